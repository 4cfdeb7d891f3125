import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { ManualClock } from '../core/clock.js';
import { lateClock } from '../core/test-fixtures.js';
import { RedisTokenLimiter } from './redis-token-limiter.js';
import type { RedisClient } from './types.js';

/**
 * SilentRedis is a connected client whose every command goes unanswered — no reply and no error — as over
 * a connection whose packets a partition drops; `destroyed` counts how often its socket was destroyed.
 */
class SilentRedis extends EventEmitter {
  status = 'ready';
  destroyed = 0;
  readonly options: { retryStrategy?: (times: number) => number };
  readonly stream = { destroy: () => void this.destroyed++ };
  constructor(reconnects: boolean) {
    super();
    this.options = reconnects ? { retryStrategy: () => 10 } : {};
  }
  evalsha(): Promise<unknown> {
    return new Promise(() => {});
  }
  eval(): Promise<unknown> {
    return new Promise(() => {});
  }
  ping(): Promise<string> {
    return new Promise(() => {});
  }
  script(): Promise<string> {
    return Promise.resolve('sha');
  }
}

/**
 * FarRedis is a client whose every reply (PONG, or an admitting script reply) comes `latencyMs` after the
 * command, on the ManualClock, as from a Redis that far away; while `stalled`, scripts get no reply at
 * all (a Redis starved of a core). It starts connected, or connecting until `connect()`. `pings` holds
 * the time each PING was sent.
 */
class FarRedis extends EventEmitter {
  status: string;
  stalled = false;
  readonly pings: number[] = [];
  constructor(
    private readonly clock: ManualClock,
    public latencyMs: number,
    connected: boolean,
  ) {
    super();
    this.status = connected ? 'ready' : 'connecting';
  }
  connect(): void {
    this.status = 'ready';
    this.emit('ready');
  }
  private later<T>(value: T): Promise<T> {
    return new Promise((resolve) => this.clock.setTimeout(() => resolve(value), this.latencyMs));
  }
  evalsha(): Promise<unknown> {
    return this.stalled ? new Promise(() => {}) : this.later(1);
  }
  eval(): Promise<unknown> {
    return this.evalsha();
  }
  ping(): Promise<string> {
    this.pings.push(this.clock.now());
    return this.later('PONG');
  }
  script(): Promise<string> {
    return Promise.resolve('sha');
  }
}

/** returnMs advances `clock` 10 ms at a time until `lim` decides on Redis again, and answers how long that took (Infinity: not within `maxMs`). */
async function returnMs(clock: ManualClock, lim: { readonly mode: string }, maxMs = 5_000): Promise<number> {
  for (let ms = 10; ms <= maxMs; ms += 10) {
    await clock.advanceAsync(10);
    if (lim.mode === 'redis') return ms;
  }
  return Infinity;
}

/** stall sends one call into a stalled Redis and lets it time out: the limiter goes to rescue; Redis then answers again. */
async function stall(clock: ManualClock, redis: FarRedis, lim: RedisTokenLimiter, timeoutMs: number): Promise<void> {
  redis.stalled = true;
  const p = lim.take('k');
  await clock.advanceAsync(timeoutMs);
  assert.equal(await p, true, 'answered from rescue at the deadline');
  assert.equal(lim.mode, 'rescue');
  redis.stalled = false;
}

process.on('warning', () => {}); // the rescue's warning is expected here

describe('RedisRescue returning from a timeout', () => {
  it('treats one timeout soon after the first connect as an outage, not a relapse: two PONGs bring decisions back', async () => {
    const clock = new ManualClock();
    const redis = new FarRedis(clock, 1, false);
    const lim = new RedisTokenLimiter({ redis: redis as unknown as RedisClient, prefix: 'f:', rate: 1e6, timeoutMs: 50, probeIntervalMs: 100, clock });
    try {
      assert.equal(lim.mode, 'rescue', 'deciding in process until connected');
      redis.connect();
      assert.equal(await returnMs(clock, lim), 10, 'the first PONG after the connect is enough');
      const first = lim.take('k');
      await clock.advanceAsync(100);
      assert.equal(await first, true);
      assert.equal(lim.stats().redisDecisions, 1);
      await stall(clock, redis, lim, 50); // 160 ms after the connect
      const pings = redis.pings.length;
      // Two probes of a Redis 1 ms away: back at the second tick, 200 ms — not the four (400 ms) of a relapse.
      assert.equal(await returnMs(clock, lim), 210);
      assert.equal(redis.pings.length - pings, 2);
      assert.equal(lim.stats().outages, 1);
    } finally {
      await lim.close();
    }
  });

  it('sends the next probe as soon as a PING slower than probeIntervalMs (within timeoutMs) answers, not a tick later', async () => {
    const clock = new ManualClock();
    const redis = new FarRedis(clock, 150, true);
    const lim = new RedisTokenLimiter({ redis: redis as unknown as RedisClient, prefix: 'f:', rate: 1e6, timeoutMs: 1_000, probeIntervalMs: 100, clock });
    try {
      const first = lim.take('k');
      await clock.advanceAsync(150);
      assert.equal(await first, true);
      assert.equal(lim.stats().redisDecisions, 1, 'a Redis 150 ms away is used: the deadline is 1 s');
      await stall(clock, redis, lim, 1_000);
      const at = clock.now();
      // PINGs at +100 (the first tick) and at +250 (when the first PONG came): back at +400.
      assert.equal(await returnMs(clock, lim), 400);
      assert.deepEqual(
        redis.pings.map((t) => t - at),
        [100, 250],
      );
      const next = lim.take('k');
      await clock.advanceAsync(150);
      assert.equal(await next, true);
      assert.equal(lim.stats().redisDecisions, 2, 'decided on Redis again');
    } finally {
      await lim.close();
    }
  });
});

describe('RedisRescue with a connection that never answers', () => {
  it('replaces the connection after 3 probes in a row without any answer, and again 3 probes later', async () => {
    const clock = new ManualClock();
    const redis = new SilentRedis(true);
    const lim = new RedisTokenLimiter({ redis: redis as unknown as RedisClient, prefix: 's:', rate: 10, timeoutMs: 50, probeIntervalMs: 100, clock });
    try {
      const first = lim.take('k');
      await clock.advanceAsync(50);
      assert.equal(await first, true, 'answered from rescue at the deadline');
      assert.equal(lim.mode, 'rescue');
      // Probes every 100 ms, each given up after max(timeoutMs, probeIntervalMs) = 100 ms.
      for (let i = 0; i < 5 && redis.destroyed === 0; i++) await clock.advanceAsync(100);
      assert.equal(redis.destroyed, 0, 'two unanswered probes are not enough');
      await clock.advanceAsync(100);
      assert.equal(redis.destroyed, 1, 'the third unanswered probe replaces the connection');
      for (let i = 0; i < 6; i++) await clock.advanceAsync(100);
      assert.equal(redis.destroyed, 2, 'still silent: replaced again');
    } finally {
      await lim.close();
    }
  });

  it('leaves a client alone that would not reconnect (no retryStrategy)', async () => {
    const clock = new ManualClock();
    const redis = new SilentRedis(false);
    const lim = new RedisTokenLimiter({ redis: redis as unknown as RedisClient, prefix: 's:', rate: 10, timeoutMs: 50, probeIntervalMs: 100, clock });
    try {
      const first = lim.take('k');
      await clock.advanceAsync(50);
      await first;
      for (let i = 0; i < 20; i++) await clock.advanceAsync(100);
      assert.equal(lim.mode, 'rescue');
      assert.equal(redis.destroyed, 0);
    } finally {
      await lim.close();
    }
  });
});

/** HeldRedis is a connected client whose script replies wait until `answer()`: the test decides when the process reads them. */
class HeldRedis extends EventEmitter {
  status = 'ready';
  private readonly held: ((reply: unknown) => void)[] = [];
  evalsha(): Promise<unknown> {
    return new Promise((resolve) => this.held.push(resolve));
  }
  eval(): Promise<unknown> {
    return this.evalsha();
  }
  ping(): Promise<string> {
    return Promise.resolve('PONG');
  }
  script(): Promise<string> {
    return Promise.resolve('sha');
  }
  /** answer hands every held call an admitting reply, as the poll after a stall reads what came meanwhile. */
  answer(): void {
    for (const resolve of this.held.splice(0)) resolve(1);
  }
}

describe('RedisRescue and a process that was busy past a deadline', () => {
  it('counts a reply read at the turn after a late deadline timer: the process does not blame Redis for its own stall', async () => {
    const manual = new ManualClock();
    const clock = lateClock(manual);
    const redis = new HeldRedis();
    const lim = new RedisTokenLimiter({ redis: redis as unknown as RedisClient, prefix: 'b:', rate: 1e6, timeoutMs: 50, probeIntervalMs: 100, clock });
    try {
      const taken = lim.take('k');
      await manual.advanceAsync(49);
      clock.lateMs = 300; // the process is blocked for 300 ms: its deadline timer runs late, before the poll reads Redis's reply
      await manual.advanceAsync(1);
      assert.equal(lim.mode, 'redis', 'not failed in the turn that found its deadline passed');
      redis.answer(); // the poll reads the reply that came meanwhile
      await manual.advanceAsync(1); // the next timer turn
      assert.equal(await taken, true);
      const s = lim.stats();
      assert.deepEqual([lim.mode, s.redisDecisions, s.rescueDecisions, s.outages], ['redis', 1, 0, 0]);
      // A call still unanswered at that next turn fails as before.
      const late = lim.take('k');
      await manual.advanceAsync(49);
      clock.lateMs += 300;
      await manual.advanceAsync(1);
      assert.equal(lim.mode, 'redis');
      await manual.advanceAsync(1);
      assert.equal(await late, true, 'answered from rescue');
      assert.deepEqual([lim.mode, lim.stats().rescueDecisions, lim.stats().outages], ['rescue', 1, 1]);
    } finally {
      await lim.close();
    }
  });

  it('fails an unanswered call at once when its deadline timer runs on time', async () => {
    const clock = new ManualClock();
    const redis = new HeldRedis();
    const lim = new RedisTokenLimiter({ redis: redis as unknown as RedisClient, prefix: 'b:', rate: 1e6, timeoutMs: 50, probeIntervalMs: 100, clock });
    try {
      const taken = lim.take('k');
      await clock.advanceAsync(50);
      assert.equal(await taken, true, 'answered from rescue at the deadline');
      assert.deepEqual([lim.mode, lim.stats().rescueDecisions], ['rescue', 1]);
    } finally {
      await lim.close();
    }
  });
});
