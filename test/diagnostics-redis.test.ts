/**
 * The diagnostics channels only a real Redis reaches: refusals decided on Redis (`mode: 'redis'`,
 * batched and leased answers included), and `bulwark:limit:mode` as Redis goes away (killed) and comes
 * back (restarted). Waits are for a condition with a deadline, never a fixed sleep.
 */
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { diagnosticsChannels, type LimitModeMessage, type LimitRefusedMessage } from '../src/core/diagnostics.js';
import { RedisPeriodLimiter, RedisTokenLimiter } from '../src/limit/index.js';
import { onRedis, redisBinary, startRedis } from './support/redis.js';
import { useRedis } from './support/use-redis.js';
import { skipReason, waitFor } from './support/servers.js';

const skip = skipReason(redisBinary, 'redis-server');

const undo: (() => void)[] = [];
afterEach(() => {
  for (const u of undo.splice(0)) u();
});

function record<M>(name: string): M[] {
  const seen: M[] = [];
  const fn = (m: unknown) => void seen.push(m as M);
  subscribe(name, fn);
  undo.push(() => unsubscribe(name, fn));
  return seen;
}

describe('diagnostics_channel on a real Redis', { skip }, () => {
  const fx = useRedis();

  it('bulwark:limit:refused: refusals decided by Redis carry mode redis, one per refused caller of a batch', async () => {
    const seen = record<LimitRefusedMessage>(diagnosticsChannels.limitRefused);
    const lim = new RedisTokenLimiter({ redis: fx.srv.url, prefix: 'diag-t:', rate: 1, burst: 2 });
    const per = new RedisPeriodLimiter({ redis: fx.srv.url, prefix: 'diag-p:', periodMs: 60_000, quota: 1 });
    try {
      await onRedis(lim);
      await onRedis(per);
      // five callers in one tick: one script call for the batch; 2 allowed, 3 refused
      const answers = await Promise.all([1, 2, 3, 4, 5].map(() => lim.take('u1')));
      assert.deepEqual(answers, [true, true, false, false, false]);
      assert.equal((await lim.takeDecision('u1', 2)).allowed, false);
      assert.equal(await per.takeAnswer('u2'), 'hit-quota');
      assert.equal(await per.takeAnswer('u2'), 'over-quota');
      assert.equal(await per.take('u2'), false);
      assert.equal(lim.mode, 'redis');
      assert.deepEqual(
        seen.map((m) => [m.limiter, m.key, m.n, m.mode]),
        [
          ['RedisTokenLimiter', 'u1', 1, 'redis'],
          ['RedisTokenLimiter', 'u1', 1, 'redis'],
          ['RedisTokenLimiter', 'u1', 1, 'redis'],
          ['RedisTokenLimiter', 'u1', 2, 'redis'],
          ['RedisPeriodLimiter', 'u2', 1, 'redis'],
          ['RedisPeriodLimiter', 'u2', 1, 'redis'],
        ],
      );
      assert.ok(seen.slice(0, 4).every((m) => m.source === lim));
    } finally {
      await lim.close();
      await per.close();
    }
  });

  it('bulwark:limit:mode: rescue when Redis dies (before the waiting calls are answered), redis when it is back', async () => {
    const srv = await startRedis();
    const modes = record<LimitModeMessage>(diagnosticsChannels.limitMode);
    const order: string[] = [];
    const onMode = (m: unknown) => void order.push(`mode ${(m as LimitModeMessage).mode}`);
    const onRefused = (m: unknown) => void order.push(`refused ${(m as LimitRefusedMessage).mode}`);
    subscribe(diagnosticsChannels.limitMode, onMode);
    subscribe(diagnosticsChannels.limitRefused, onRefused);
    undo.push(
      () => unsubscribe(diagnosticsChannels.limitMode, onMode),
      () => unsubscribe(diagnosticsChannels.limitRefused, onRefused),
    );
    const lim = new RedisTokenLimiter({ redis: srv.url, prefix: 'diag-m:', rate: 1, burst: 1, timeoutMs: 200, probeIntervalMs: 50 });
    try {
      await onRedis(lim);
      // A limiter decides in process until it first reaches Redis: reaching it is a switch to redis
      // (as onModeChange reports it); starting in rescue is not an outage, so it was not published.
      assert.deepEqual(
        modes.splice(0).map((m) => m.mode),
        ['redis'],
      );
      order.length = 0;
      assert.equal(await lim.take('k'), true);
      await srv.kill();
      // this call fails on Redis and is answered from rescue (its bucket is fresh: allowed), the next is refused there
      assert.equal(await lim.take('k'), true);
      assert.equal(await lim.take('k'), false);
      assert.equal(lim.mode, 'rescue');
      assert.equal(modes.length, 1);
      assert.equal(modes[0]!.limiter, 'RedisTokenLimiter(diag-m:)');
      assert.equal(modes[0]!.mode, 'rescue');
      assert.ok(modes[0]!.cause !== undefined);
      assert.deepEqual(order, ['mode rescue', 'refused rescue']);
      await srv.restart();
      await waitFor('back on Redis', () => lim.mode === 'redis', 10_000);
      assert.deepEqual(modes.map((m) => [m.mode, m.cause]).slice(1), [['redis', undefined]]);
    } finally {
      await lim.close();
      await srv.stop();
    }
  });
});
