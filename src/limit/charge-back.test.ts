import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { ManualClock } from '../core/clock.js';
import { RedisTokenLimiter } from './redis-token-limiter.js';
import type { RedisClient } from './types.js';

/**
 * SwitchableRedis is a connected client that either answers nothing (`down`: a partition) or answers
 * every decision 1 and every PING PONG; it records the charge calls (TOKEN_SCRIPT's 'l' mode) it gets,
 * and rejects them when `failCharges` is set.
 */
class SwitchableRedis extends EventEmitter {
  status = 'ready';
  down = true;
  failCharges = false;
  readonly options = {};
  readonly charges: Array<{ key: string; n: number }> = [];
  evalsha(_sha: string, _numKeys: string, key: string, ...args: string[]): Promise<unknown> {
    if (this.down) return new Promise(() => {});
    if (args[3] === 'l') {
      this.charges.push({ key, n: Number(args[2]) });
      return this.failCharges ? Promise.reject(new Error('charge failed')) : Promise.resolve([Number(args[2]), 0]);
    }
    return Promise.resolve(1);
  }
  eval(): Promise<unknown> {
    return Promise.reject(new Error('unexpected EVAL'));
  }
  ping(): Promise<string> {
    return this.down ? new Promise(() => {}) : Promise.resolve('PONG');
  }
  script(): Promise<string> {
    return Promise.resolve('sha');
  }
}

process.on('warning', () => {}); // the rescue's warning is expected here

/** outage makes `redis` silent, sends `lim` to rescue, runs `during` in rescue, and brings Redis back. */
async function outage(clock: ManualClock, redis: SwitchableRedis, lim: RedisTokenLimiter, during: () => Promise<void>): Promise<void> {
  redis.down = true;
  const first = lim.take('a');
  await clock.advanceAsync(50);
  assert.equal(await first, true, 'answered from rescue at the deadline');
  assert.equal(lim.mode, 'rescue');
  await during();
  redis.down = false;
  for (let i = 0; i < 10 && lim.stats().mode !== 'redis'; i++) await clock.advanceAsync(100);
  assert.equal(lim.mode, 'redis');
  await clock.advanceAsync(0);
}

describe('RedisTokenLimiter charges the tokens its rescue admitted back to Redis', () => {
  it('sends one charge call per key, of what the rescue admitted for it, once the key is back on Redis', async () => {
    const clock = new ManualClock();
    const redis = new SwitchableRedis();
    const lim = new RedisTokenLimiter({ redis: redis as unknown as RedisClient, prefix: 'c:', rate: 10, timeoutMs: 50, probeIntervalMs: 100, clock });
    try {
      await outage(clock, redis, lim, async () => {
        for (let i = 0; i < 4; i++) assert.equal(await lim.take('a'), true);
        assert.equal(await lim.take('b', 2), true);
        assert.equal((await lim.takeDecision('b')).allowed, true);
        assert.equal(await lim.take('c', 11), false, 'more than the burst: refused, owes nothing');
        assert.equal(redis.charges.length, 0, 'nothing charged while in rescue');
      });
      const charged = new Map(redis.charges.map((c) => [c.key, c.n]));
      assert.deepEqual(
        [...charged],
        [
          ['c:{a}', 5],
          ['c:{b}', 3],
        ],
      );
      assert.equal(redis.charges.length, 2, 'one call per key');
      // Charged once: a later outage's return charges only what that outage admitted.
      await outage(clock, redis, lim, async () => {});
      assert.deepEqual(redis.charges.slice(2), [{ key: 'c:{a}', n: 1 }]);
    } finally {
      await lim.close();
    }
  });

  it('keeps a tally of at most maxKeys keys: a key first admitted when it is full is charged nothing', async () => {
    const clock = new ManualClock();
    const redis = new SwitchableRedis();
    const lim = new RedisTokenLimiter({
      redis: redis as unknown as RedisClient,
      prefix: 'c:',
      rate: 10,
      timeoutMs: 50,
      probeIntervalMs: 100,
      maxKeys: 2,
      clock,
    });
    try {
      await outage(clock, redis, lim, async () => {
        assert.equal(await lim.take('b'), true);
        assert.equal(await lim.take('c'), true);
        assert.equal(await lim.take('a'), true);
      });
      assert.deepEqual(redis.charges, [
        { key: 'c:{a}', n: 2 },
        { key: 'c:{b}', n: 1 },
      ]);
    } finally {
      await lim.close();
    }
  });

  it('never makes a caller fail or wait when a charge fails', async () => {
    const clock = new ManualClock();
    const redis = new SwitchableRedis();
    redis.failCharges = true;
    const lim = new RedisTokenLimiter({ redis: redis as unknown as RedisClient, prefix: 'c:', rate: 10, timeoutMs: 50, probeIntervalMs: 100, clock });
    try {
      await outage(clock, redis, lim, async () => {});
      assert.equal(redis.charges.length, 1);
      assert.equal(await lim.take('a'), true, 'decided on Redis right after the return');
      assert.equal(lim.mode, 'redis');
    } finally {
      await lim.close();
    }
  });
});
