/**
 * The Redis limiters' decision metrics on a real redis-server: decisions by result, by where they were
 * made (redis, then rescue once Redis is killed), and the rescue switch.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { BulwarkMetrics } from '../src/metrics/index.js';
import { RedisPeriodLimiter, RedisTokenLimiter } from '../src/limit/index.js';
import { onRedis, redisBinary, startRedis, type RedisServer } from './support/redis.js';
import { skipReason, waitFor } from './support/servers.js';
import { sampleValue as value } from './support/scrape.js';

describe('BulwarkMetrics on Redis limiters', { skip: skipReason(redisBinary, 'redis-server') }, () => {
  let redis: RedisServer;
  before(async () => {
    redis = await startRedis();
  });
  after(async () => {
    await redis?.stop();
  });

  it('counts decisions by result and by mode, and the switch to rescue', async () => {
    const m = new BulwarkMetrics({ registry: new Registry() });
    const token = new RedisTokenLimiter({ redis: redis.url, prefix: 'm-token', rate: 0.001, burst: 2, timeoutMs: 200, probeIntervalMs: 60_000 });
    const period = new RedisPeriodLimiter({ redis: redis.url, prefix: 'm-period', quota: 1, periodMs: 60_000, timeoutMs: 200, probeIntervalMs: 60_000 });
    m.track(token, { name: 'token' });
    m.track(period, { name: 'period' });
    try {
      await onRedis(token);
      await onRedis(period);
      const answers = [await token.take('k'), await token.take('k'), (await token.takeDecision('k')).allowed];
      assert.deepEqual(answers, [true, true, false]);
      assert.equal(await period.takeAnswer('k'), 'hit-quota'); // the last one allowed
      assert.equal(await period.take('k'), false);
      let text = await m.metrics();
      assert.equal(value(text, 'bulwark_limiter_decisions_total{name="token",result="allowed"}'), 2);
      assert.equal(value(text, 'bulwark_limiter_decisions_total{name="token",result="limited"}'), 1);
      assert.equal(value(text, 'bulwark_limiter_decisions_total{name="period",result="allowed"}'), 1);
      assert.equal(value(text, 'bulwark_limiter_decisions_total{name="period",result="limited"}'), 1);
      assert.equal(value(text, 'bulwark_limiter_redis_decisions_total{name="token",mode="redis"}'), 3);
      assert.equal(value(text, 'bulwark_limiter_mode{name="token",mode="redis"}'), 1);
      assert.equal(value(text, 'bulwark_limiter_rescue_switches_total{name="token"}'), 0);

      await redis.kill();
      // The next decision fails on Redis (or times out) and is made in process; later ones are too.
      await token.take('k2');
      await waitFor('the limiter to switch to rescue', () => token.mode === 'rescue', 10_000);
      await token.take('k2');
      text = await m.metrics();
      assert.equal(value(text, 'bulwark_limiter_mode{name="token",mode="rescue"}'), 1);
      assert.equal(value(text, 'bulwark_limiter_rescue_switches_total{name="token"}'), 1);
      assert.ok(value(text, 'bulwark_limiter_redis_decisions_total{name="token",mode="rescue"}')! >= 1);
      assert.equal(
        value(text, 'bulwark_limiter_decisions_total{name="token",result="allowed"}')! +
          value(text, 'bulwark_limiter_decisions_total{name="token",result="limited"}')!,
        5,
        'every answer counted once, wherever it was decided',
      );
    } finally {
      await m.close();
      await token.close();
      await period.close();
      await redis.restart();
    }
  });
});
