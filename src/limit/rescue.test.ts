import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { ManualClock } from '../core/clock.js';
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

process.on('warning', () => {}); // the rescue's warning is expected here

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
