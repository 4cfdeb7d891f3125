/**
 * Redis limiters across a network partition (packets dropped, not refused: test/support/netfault.ts):
 * while Redis is cut off every decision is made within `timeoutMs` (in rescue), and once the partition
 * heals every limiter is back on Redis within 1 s — although the connection it had is stuck in TCP
 * retransmission backoff, whose next try may be seconds after the heal.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { RedisPeriodLimiter, RedisTokenLimiter } from '../src/limit/index.js';
import { netfaultSkip, PacketFilter } from './support/netfault.js';
import { onRedis, redisBinary, startRedis, type RedisServer } from './support/redis.js';
import { skipReason, waitFor } from './support/servers.js';

type Limiter = { readonly mode: string; take(key: string): Promise<boolean>; close(): Promise<void>; stats(): { redisDecisions: number } };

/** Calls is one limiter's bounded call loop: how many, how many failed, the longest. */
interface Calls {
  made: number;
  failed: number;
  longestMs: number;
  stop(): Promise<void>;
}

/** callLoop takes from `limiter` every `everyMs` (one call at a time), at most `max` calls. */
function callLoop(limiter: Limiter, everyMs: number, max: number): Calls {
  let running = true;
  const c: Calls = {
    made: 0,
    failed: 0,
    longestMs: 0,
    stop: async () => {
      running = false;
      await loop;
    },
  };
  const loop = (async () => {
    for (let i = 0; running && i < max; i++) {
      const t0 = performance.now();
      try {
        await limiter.take(`user-${i % 8}`);
      } catch {
        c.failed++;
      }
      c.longestMs = Math.max(c.longestMs, performance.now() - t0);
      c.made++;
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return c;
}

const skip = skipReason(redisBinary, 'redis-server') ?? netfaultSkip;

describe('Redis limiters across a partition', { skip }, () => {
  let redis: RedisServer;
  before(async () => {
    redis = await startRedis();
  });
  after(async () => {
    await redis?.stop();
  });

  it('decide within timeoutMs while Redis is cut off for 5 s, and are back on Redis within 1 s of the heal', async () => {
    const timeoutMs = 50;
    const limiters: Record<string, Limiter> = {
      token: new RedisTokenLimiter({ redis: redis.url, prefix: 'pt:', rate: 1_000, timeoutMs }),
      leased: new RedisTokenLimiter({ redis: redis.url, prefix: 'pl:', rate: 1_000, lease: { tokens: 10, maxMs: 100 }, timeoutMs }),
      period: new RedisPeriodLimiter({ redis: redis.url, prefix: 'pp:', periodMs: 1_000, quota: 1_000, timeoutMs }),
    };
    const filter = await PacketFilter.open();
    const loops: Calls[] = [];
    // A decision can be no later than the event loop lets its deadline timer fire: on a busy 2-core machine
    // this process may wait 100 ms and more for a core. The loop's own delay is measured, not guessed.
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    try {
      for (const l of Object.values(limiters)) await onRedis(l);
      loopDelay.enable();
      for (const l of Object.values(limiters)) loops.push(callLoop(l, 10, 2_000));
      await waitFor('calls on Redis', () => loops.every((c) => c.made > 5));

      const cutAt = performance.now();
      await filter.isolate(redis.port);
      await waitFor('every limiter in rescue', () => Object.values(limiters).every((l) => l.mode === 'rescue'), 5_000);
      const detectMs = performance.now() - cutAt;
      // The partition's length is what is under test: a timed wait, not a condition.
      await new Promise((r) => setTimeout(r, 5_000 - (performance.now() - cutAt)));
      const healAt = performance.now();
      await filter.heal();
      const backMs: Record<string, number> = {};
      await waitFor(
        'every limiter back on Redis',
        () => {
          for (const [name, l] of Object.entries(limiters)) if (backMs[name] === undefined && l.mode === 'redis') backMs[name] = performance.now() - healAt;
          return Object.keys(backMs).length === Object.keys(limiters).length;
        },
        10_000,
      );
      const before = Object.values(limiters).map((l) => l.stats().redisDecisions);
      await waitFor('decisions made on Redis again', () => Object.values(limiters).every((l, i) => l.stats().redisDecisions > before[i]!), 5_000);
      for (const c of loops) await c.stop();
      loopDelay.disable();
      const lagMs = loopDelay.max / 1e6;

      const made = loops.reduce((n, c) => n + c.made, 0);
      const failed = loops.reduce((n, c) => n + c.failed, 0);
      const longest = Math.max(...loops.map((c) => c.longestMs));
      console.log(
        `# redis partition 5 s: ${made} calls, ${failed} failed, longest ${longest.toFixed(0)} ms (event loop delay up to ${lagMs.toFixed(0)} ms), detected in ${detectMs.toFixed(0)} ms, back on Redis ${Object.entries(
          backMs,
        )
          .map(([n, ms]) => `${n} ${ms.toFixed(0)} ms`)
          .join(', ')} after the heal`,
      );
      assert.equal(failed, 0, 'no call fails: rescue answers');
      assert.ok(
        longest <= timeoutMs + lagMs + 20,
        `the longest call took ${longest.toFixed(0)} ms (timeoutMs ${timeoutMs}, event loop delay up to ${lagMs.toFixed(0)} ms)`,
      );
      // Within 1 s of the heal, give or take how late this process's timers ran (the probes and reconnects are timers).
      for (const [name, ms] of Object.entries(backMs))
        assert.ok(ms <= 1_000 + lagMs, `${name} came back to Redis ${ms.toFixed(0)} ms after the heal (event loop delay up to ${lagMs.toFixed(0)} ms)`);
    } finally {
      for (const c of loops) await c.stop();
      await filter.close();
      for (const l of Object.values(limiters)) await l.close();
    }
  });
});
