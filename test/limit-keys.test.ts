/**
 * The Redis limiters per client key against a real redis-server: one Redis key per client key
 * (`prefix{key}`, with an expiry), a rescue budget per key, the sliding window in Redis, token buckets
 * exact at any rate, token leasing, and close().
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { ManualClock } from '../src/core/clock.js';
import { ClosedError } from '../src/core/errors.js';
import { RedisPeriodLimiter, RedisTokenLimiter } from '../src/limit/index.js';
import { onRedis, redisBinary } from './support/redis.js';
import { scriptCalls, useRedis } from './support/use-redis.js';
import { freePort, skipReason } from './support/servers.js';

const skip = skipReason(redisBinary, 'redis-server');
process.on('warning', () => {}); // the rescue's warnings are expected here

async function redisNowMs(admin: Redis): Promise<number> {
  const [sec, usec] = (await admin.time()) as unknown as [string, string];
  return Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
}

describe('Redis limiters per client key', { skip }, () => {
  const fx = useRedis();

  it('keeps one bucket per client key at prefix{key}, each with an expiry', async () => {
    await using lim = new RedisTokenLimiter({ redis: fx.srv.url, prefix: 'pk:', rate: 0.1, burst: 2, timeoutMs: 2_000 });
    await onRedis(lim);
    const answers = [];
    for (const key of ['alice', 'alice', 'alice', 'bob', 'bob', 'bob']) answers.push(await lim.take(key));
    assert.deepEqual(answers, [true, true, false, true, true, false]);
    const keys = (await fx.admin.keys('pk:*')).sort();
    assert.deepEqual(keys, ['pk:{alice}', 'pk:{bob}']);
    for (const k of keys) {
      const ttl = await fx.admin.pttl(k);
      assert.ok(ttl > 0 && ttl <= 21_000, `${k}: PTTL ${ttl}`);
    }
    const d = await lim.takeDecision('carol');
    assert.deepEqual([d.allowed, d.limit, d.remaining], [true, 2, 1]);
    await assert.rejects(lim.take('x'.repeat(1_025)), TypeError);
  });

  it('spends keys of one tick in separate buckets: behind a call in flight, one script call for all of them', async () => {
    await using lim = new RedisTokenLimiter({ redis: fx.srv.url, prefix: 'pb:', rate: 0.1, burst: 3, timeoutMs: 2_000 });
    await onRedis(lim);
    const before = await scriptCalls(fx.admin);
    const inFlight = lim.take('other'); // sent at once: the callers of this tick batch behind it
    const calls = [];
    for (let i = 0; i < 5; i++) for (const key of ['a', 'b', 'c']) calls.push(lim.take(key));
    const answers = await Promise.all(calls);
    await inFlight;
    assert.equal((await scriptCalls(fx.admin)) - before, 2, 'the call in flight, then the keys of the tick in one call');
    for (let j = 0; j < 3; j++) {
      assert.deepEqual(
        answers.filter((_, i) => i % 3 === j),
        [true, true, true, false, false],
        `key ${j}`,
      );
    }
  });

  it('is exact at any rate: 10 M tokens/s and 1 G tokens/s admit exactly the burst of a full bucket in one script call', async () => {
    for (const rate of [1e7, 1e9]) {
      await using lim = new RedisTokenLimiter({ redis: fx.srv.url, prefix: `fast${rate}:`, rate, burst: 1_000, timeoutMs: 2_000 });
      await onRedis(lim);
      // 1 024 callers in one tick behind a call in flight are one script call, so the bucket reads Redis's clock once: exactly 1 000.
      const inFlight = lim.take('other');
      const answers = await Promise.all(Array.from({ length: 1_024 }, () => lim.take('k')));
      await inFlight;
      assert.equal(answers.filter(Boolean).length, 1_000, `rate ${rate}`);
      assert.ok(answers.slice(0, 1_000).every(Boolean));
    }
  });

  it('rescues per key at rate / instances, with at most maxKeys keys', async () => {
    const clock = new ManualClock();
    await using lim = new RedisTokenLimiter({
      redis: `redis://127.0.0.1:${await freePort()}`, // nothing listens: rescue from the start
      prefix: 'r:',
      rate: 40,
      burst: 8,
      instances: 4,
      maxKeys: 100,
      clock,
    });
    assert.equal(lim.mode, 'rescue');
    const a = [];
    for (let i = 0; i < 4; i++) a.push(await lim.take('alice'));
    assert.deepEqual(a, [true, true, false, false], 'burst 8 / 4 instances, per key');
    assert.equal(await lim.take('bob'), true, 'another key has its own rescue budget');
    clock.advance(100); // 10/s per key in rescue: one token
    assert.equal(await lim.take('alice'), true);
    assert.equal(await lim.take('alice'), false);
    for (let i = 0; i < 1_000; i++) await lim.take(`flood-${i}`);
    assert.ok(lim.stats().rescueKeys <= 100, `rescue keys ${lim.stats().rescueKeys}`);
  });

  it('counts a sliding window in Redis: the previous window weighs in, so an edge burst is not 2 × quota', async () => {
    const periodMs = 3_600_000;
    const quota = 10;
    await using sliding = new RedisPeriodLimiter({ redis: fx.srv.url, prefix: 'sw:', periodMs, quota, algorithm: 'sliding', timeoutMs: 2_000 });
    await onRedis(sliding);
    // The previous window (by Redis's clock) used the whole quota.
    const now = await redisNowMs(fx.admin);
    const idx = Math.floor(now / periodMs);
    await fx.admin.set('sw:{k}', `${idx - 1} ${quota} 0`, 'PX', periodMs);
    const elapsed = (now - idx * periodMs) / periodMs; // share of this window gone: the previous one weighs 1 − that
    let admitted = 0;
    for (let i = 0; i < 2 * quota; i++) if (await sliding.take('k')) admitted++;
    const expected = Math.floor(quota * elapsed + 1e-9);
    assert.ok(Math.abs(admitted - expected) <= 1, `admitted ${admitted}, expected ~${expected} (${(elapsed * 100).toFixed(1)} % into the window)`);
    const d = await sliding.takeDecision('k');
    assert.equal(d.allowed, false);
    assert.equal(d.limit, quota);
    assert.ok(d.retryAfterMs > 0 && d.retryAfterMs <= periodMs, `retryAfterMs ${d.retryAfterMs}`);
    assert.ok(d.resetMs > 0 && d.resetMs <= 2 * periodMs);
    // A fresh key: the whole quota, then go-zero's answers.
    const answers = [];
    for (let i = 0; i < quota + 1; i++) answers.push(await sliding.takeAnswer('fresh'));
    assert.deepEqual(answers.slice(-2), ['hit-quota', 'over-quota']);
    assert.ok((await fx.admin.pttl('sw:{fresh}')) > periodMs, 'the key lives until the next window no longer needs it');
  });

  it('leases tokens: one script call takes up to lease.tokens, spent locally; the bucket is never overdrawn', async () => {
    await using lim = new RedisTokenLimiter({
      redis: fx.srv.url,
      prefix: 'ls:',
      rate: 0.001,
      burst: 25,
      lease: { tokens: 10, maxMs: 60_000 },
      timeoutMs: 2_000,
    });
    await onRedis(lim);
    const before = await scriptCalls(fx.admin);
    let admitted = 0;
    for (let i = 0; i < 40; i++) if (await lim.take('k')) admitted++;
    assert.equal(admitted, 25, 'exactly the burst');
    const calls = (await scriptCalls(fx.admin)) - before;
    assert.ok(calls <= 3 + 15, `script calls ${calls}: 3 leases (10 + 10 + 5), then one per refused call`);
    assert.equal(lim.stats().redisDecisions, 40);
    const d = await lim.takeDecision('other');
    assert.deepEqual([d.allowed, d.limit, d.remaining], [true, 25, 9], 'remaining is what this process holds of its lease');
  });

  it('lets a lease expire after maxMs (on the limiter clock): unspent tokens are not spent later', async () => {
    const clock = new ManualClock();
    await using lim = new RedisTokenLimiter({
      redis: fx.srv.url,
      prefix: 'lx:',
      rate: 0.001,
      burst: 20,
      lease: { tokens: 10, maxMs: 1_000 },
      timeoutMs: 60_000,
      clock,
    });
    await onRedis(lim);
    assert.equal(await lim.take('k'), true); // a lease of 10: 9 left
    clock.advance(1_000); // expired: the 9 are lost (never more than the bucket gave)
    let admitted = 0;
    for (let i = 0; i < 30; i++) if (await lim.take('k')) admitted++;
    assert.equal(admitted, 10, 'the bucket held 10 more; the expired lease held 9 that are gone');
  });

  it('close() answers unsent decisions, then rejects later calls with ClosedError; it is idempotent', async () => {
    const lim = new RedisTokenLimiter({ redis: fx.srv.url, prefix: 'cl:', rate: 10, burst: 10, timeoutMs: 2_000 });
    const per = new RedisPeriodLimiter({ redis: fx.srv.url, prefix: 'clp:', periodMs: 1_000, quota: 1, timeoutMs: 2_000 });
    await onRedis(lim);
    const pending = lim.take('k'); // batched for the end of this tick
    const closed = lim.close();
    assert.equal(await pending, true, 'answered (from rescue) rather than left hanging');
    await closed;
    await lim.close();
    await assert.rejects(lim.take('k'), ClosedError);
    await assert.rejects(lim.takeDecision('k', 2), ClosedError);
    await per[Symbol.asyncDispose]();
    await assert.rejects(per.take('k'), ClosedError);
    await assert.rejects(per.takeAnswer('k'), ClosedError);
  });
});
