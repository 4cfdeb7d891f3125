/**
 * The Redis limiters changed while they run, against a real redis-server: what Redis counted is kept (a
 * new quota or burst counts against each key's state at once), a bad value changes nothing, and the
 * options fixed at construction are refused.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RedisPeriodLimiter, RedisTokenLimiter } from '../src/limit/index.js';
import { onRedis, redisBinary } from './support/redis.js';
import { useRedis } from './support/use-redis.js';
import { skipReason } from './support/servers.js';

const skip = skipReason(redisBinary, 'redis-server');
process.on('warning', () => {}); // the rescue's warnings are expected here

async function takeAll(take: () => Promise<boolean>, max = 50): Promise<number> {
  let n = 0;
  while (n < max && (await take())) n++;
  return n;
}

describe('Redis limiters reconfigured while they run', { skip }, () => {
  const fx = useRedis();

  it('RedisPeriodLimiter: the count in Redis is kept; a lower quota counts against it at once', async () => {
    await using lim = new RedisPeriodLimiter({ redis: fx.srv.url, prefix: 'rcp:', periodMs: 600_000, quota: 10, timeoutMs: 2_000 });
    await onRedis(lim);
    assert.equal(await takeAll(() => lim.take('k'), 6), 6);
    lim.reconfigure({ quota: 8 });
    assert.deepEqual(lim.options(), { periodMs: 600_000, quota: 8, algorithm: 'fixed', align: false, alignOffsetMs: 0 });
    assert.equal(await takeAll(() => lim.take('k')), 2);
    assert.equal(lim.mode, 'redis');
    assert.throws(() => lim.reconfigure({ quota: 20, periodMs: 0.5 }), {
      name: 'RangeError',
      message: 'RedisPeriodLimiter: periodMs must be a finite number ≥ 1, got 0.5',
    });
    assert.throws(() => lim.reconfigure({ prefix: 'x:' } as never), {
      name: 'TypeError',
      message: 'RedisPeriodLimiter: prefix cannot change on a running RedisPeriodLimiter; it is set at construction only',
    });
    assert.throws(() => lim.reconfigure({ window: 'sliding' } as never), { name: 'TypeError', message: 'RedisPeriodLimiter: window was renamed to algorithm' });
    assert.equal(lim.quota, 8);
    assert.equal(await lim.take('k'), false);
  });

  it('RedisTokenLimiter: the bucket in Redis is kept; a smaller burst caps it, a new lease applies', async () => {
    await using lim = new RedisTokenLimiter({ redis: fx.srv.url, prefix: 'rct:', rate: 0.001, burst: 10, timeoutMs: 2_000 });
    await onRedis(lim);
    assert.equal(await takeAll(() => lim.take('k'), 3), 3); // 7 left
    lim.reconfigure({ burst: 5 });
    assert.equal(await takeAll(() => lim.take('k')), 5 - 3); // the 3 taken still count against the new burst
    lim.reconfigure({ burst: 20 });
    assert.equal(await takeAll(() => lim.take('fresh')), 20);
    lim.reconfigure({ lease: { tokens: 4, maxMs: 60_000 } });
    assert.deepEqual(lim.options(), { rate: 0.001, burst: 20, lease: { tokens: 4, maxMs: 60_000 } });
    assert.equal(await takeAll(() => lim.take('leased'), 30), 20);
    assert.throws(() => lim.reconfigure({ burst: 2 }), {
      name: 'RangeError',
      message: 'RedisTokenLimiter: lease.tokens must be a finite number in [1, 2], got 4',
    });
    assert.throws(() => lim.reconfigure({ timeoutMs: 5 } as never), /RedisTokenLimiter: timeoutMs cannot change on a running RedisTokenLimiter/);
    assert.equal(lim.burst, 20);
    assert.equal(lim.mode, 'redis');
  });
});
