/**
 * The HTTP middleware with the real bulwark classes behind it, on each framework's real loopback
 * server: AdaptiveShedder (an injected load signal, ManualClock), SreBreaker and CircuitBreaker
 * (ManualClock), and RedisPeriodLimiter against a real redis-server.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../src/core/clock.js';
import { AdaptiveShedder } from '../src/limit/adaptive-shedder.js';
import { RedisPeriodLimiter } from '../src/limit/redis-period-limiter.js';
import { SreBreaker } from '../src/breaker/sre-breaker.js';
import { CircuitBreaker } from '../src/breaker/circuit-breaker.js';
import { HttpGuard, type HttpGuardOptions } from '../src/http/index.js';
import { redisBinary, startRedis, type RedisServer } from './support/redis.js';
import { skipReason } from './support/servers.js';
import { frameworks, request, until, type Server } from './http-harness.js';

for (const fw of frameworks) {
  describe(`http middleware with the real guards on ${fw.name}`, () => {
    const servers: Server[] = [];
    const start = async (g: HttpGuard | HttpGuardOptions): Promise<Server> => {
      const s = await fw.start(g);
      servers.push(s);
      return s;
    };
    after(async () => {
      for (const s of servers) await s.close();
    });

    it('AdaptiveShedder: 503 while the load signal says overloaded and calls pile up; back after the cool-off', async () => {
      const clock = new ManualClock();
      let utilization = 0.1;
      const shedder = new AdaptiveShedder({ clock, load: () => ({ utilization, delayP99Ms: 0 }) });
      const s = await start({ shedder });
      assert.equal((await request(s.url)).status, 200);
      await until(() => shedder.stats().inFlight === 0);

      // Pile up work in flight (held by the test itself), as an overloaded server would have.
      const held = Array.from({ length: 200 }, () => shedder.admit());
      for (const t of held.splice(0, 100)) t.failure();
      utilization = 0.99;
      const shed = await request(s.url);
      assert.equal(shed.status, 503);
      assert.equal(shed.headers['retry-after'], '1');
      assert.equal(JSON.parse(shed.body).error.code, 'ERR_OVERLOADED');

      utilization = 0.1; // the load is gone, but the shedder stays hot for its cool-off
      assert.equal((await request(s.url)).status, 503);
      clock.advance(1000);
      assert.equal((await request(s.url)).status, 200);
      for (const t of held) t.failure();
      await until(() => shedder.stats().inFlight === 0);
      assert.equal(s.handled(), 2);
    });

    it('SreBreaker: failing responses make it drop with 503, a forced pass probes, and it recovers', async () => {
      const clock = new ManualClock();
      const breaker = new SreBreaker({ clock, random: () => 0 });
      const g = new HttpGuard({ breaker });
      const s = await start(g);
      let failing = 0;
      let first503: number | undefined;
      for (let i = 0; i < 20 && first503 === undefined; i++) {
        const r = await request(`${s.url}fail`);
        if (r.status === 503) first503 = i;
        else {
          assert.equal(r.status, 500);
          failing++;
          await until(() => breaker.stats().failures === failing);
        }
      }
      assert.ok(first503 !== undefined && first503 >= 6, `first 503 after ${first503} requests`);
      const open = await request(s.url);
      assert.equal(open.status, 503);
      assert.equal(JSON.parse(open.body).error.code, 'ERR_BREAKER_OPEN');
      assert.equal(open.headers['retry-after'], '1');

      clock.advance(1000); // go-zero's forced pass: one request reaches the handler
      assert.equal((await request(s.url)).status, 200);
      assert.equal((await request(s.url)).status, 503);
      clock.advance(10_000); // the failures age out of the window
      for (let i = 0; i < 5; i++) assert.equal((await request(s.url)).status, 200);
      assert.ok(g.stats().broken >= 2);
    });

    it('CircuitBreaker: opens on failures, a client that leaves mid-probe fails it, then probes close it', async () => {
      const clock = new ManualClock();
      const breaker = new CircuitBreaker({ clock, minimumCalls: 4, openMs: 5000, halfOpenCalls: 2, windowCalls: 10 });
      const s = await start({ breaker, breakerRetryAfterMs: 5000 });
      for (let i = 0; i < 4; i++) assert.equal((await request(`${s.url}fail`)).status, 500);
      await until(() => breaker.state === 'open');
      const open = await request(s.url);
      assert.equal(open.status, 503);
      assert.equal(open.headers['retry-after'], '5');

      clock.advance(5000);
      const ac = new AbortController();
      const probe = request(`${s.url}slow`, {}, { signal: ac.signal });
      await until(() => s.handled() === 5); // the half-open probe reached the handler: now the client leaves
      ac.abort();
      await assert.rejects(probe);
      await until(() => breaker.state === 'open');
      s.release();

      clock.advance(5000);
      assert.equal((await request(s.url)).status, 200);
      assert.equal((await request(s.url)).status, 200);
      await until(() => breaker.state === 'closed');
      assert.equal((await request(s.url)).status, 200);
    });
  });
}

describe('http middleware with RedisPeriodLimiter on a real redis-server', { skip: skipReason(redisBinary, 'redis-server') }, () => {
  let redis: RedisServer;
  const limiters: RedisPeriodLimiter[] = [];
  const servers: Server[] = [];
  after(async () => {
    for (const s of servers) await s.close();
    for (const l of limiters) await l.close();
    await redis?.stop();
  });

  for (const fw of frameworks) {
    it(`${fw.name}: a quota per client shared in Redis answers 429 with the RateLimit-* headers`, async () => {
      redis ??= await startRedis();
      const limiter = new RedisPeriodLimiter({ redis: redis.url, prefix: `http-test-${fw.name}:`, periodMs: 60_000, quota: 2, timeoutMs: 2000 });
      limiters.push(limiter);
      // A new limiter decides in process until its connection is up (by design): wait for Redis.
      await until(() => limiter.mode === 'redis');
      const s = await fw.start({ limiter, key: { header: 'x-user' } });
      servers.push(s);
      const a1 = await request(s.url, { 'x-user': 'ann' });
      assert.equal(a1.status, 200);
      assert.equal(a1.headers['ratelimit-limit'], '2');
      assert.equal(a1.headers['ratelimit-remaining'], '1');
      assert.equal((await request(s.url, { 'x-user': 'ann' })).status, 200);
      const refused = await request(s.url, { 'x-user': 'ann' });
      assert.equal(refused.status, 429, JSON.stringify({ headers: refused.headers, stats: limiter.stats() }));
      assert.equal(refused.headers['ratelimit-remaining'], '0');
      const wait = Number(refused.headers['retry-after']);
      assert.ok(wait >= 1 && wait <= 60, `Retry-After ${wait}`);
      assert.equal((await request(s.url, { 'x-user': 'bob' })).status, 200);
      assert.equal(limiter.mode, 'redis', 'the decisions were made in Redis, not in rescue');
    });
  }
});
