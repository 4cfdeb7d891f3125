/**
 * Latency, not loss: etcd and Redis behind a delaying TCP proxy (test/support/netfault.ts — this kernel
 * has no sch_netem). With etcd 200 ms away each way, the registry cache answers from memory, follows
 * changes through its watch and keeps its leases; with Redis 50 ms away each way and the limiters'
 * `timeoutMs` at 1 s, every decision is made on Redis within its deadline. Nothing times out that
 * should not: no rescue, no watch reconnect, no registry error. The deadline is ten round trips: at 250
 * and at 400 ms, CI runs with chromium and three-process tests busy beside this one saw Redis (a process
 * of its own, starved of a core) miss them — a call of 272 ms, then every limiter in rescue. And when one
 * call does miss its deadline soon after the limiter connected, the limiter is back on Redis after two
 * PONGs, as after any outage: the first connect is not a return that the timeout would be a relapse of.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { RedisPeriodLimiter, RedisTokenLimiter } from '../src/limit/index.js';
import { EtcdRegistry, RegistryCache } from '../src/registry/index.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { DelayProxy } from './support/netfault.js';
import { onRedis, redisBinary, startRedis, type RedisServer } from './support/redis.js';
import { skipReason, waitFor } from './support/servers.js';

describe('Redis 50 ms away each way', { skip: skipReason(redisBinary, 'redis-server') }, () => {
  let redis: RedisServer;
  let proxy: DelayProxy;
  before(async () => {
    redis = await startRedis();
    proxy = await DelayProxy.start({ host: redis.host, port: redis.port }, { delayMs: 50 });
  });
  after(async () => {
    await proxy?.close();
    await redis?.stop();
  });

  it('limiters with timeoutMs 1 000 decide every call on Redis within the deadline', async (t) => {
    const timeoutMs = 1_000;
    const url = `redis://${proxy.address}`;
    const limiters = {
      token: new RedisTokenLimiter({ redis: url, prefix: 'lt:', rate: 1_000, timeoutMs }),
      leased: new RedisTokenLimiter({ redis: url, prefix: 'll:', rate: 1_000, lease: { tokens: 10, maxMs: 100 }, timeoutMs }),
      period: new RedisPeriodLimiter({ redis: url, prefix: 'lp:', periodMs: 1_000, quota: 1_000, timeoutMs }),
    };
    const switches: string[] = [];
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    try {
      for (const l of Object.values(limiters)) await onRedis(l); // each starts in rescue until it has connected
      for (const [name, l] of Object.entries(limiters)) l.onModeChange((e) => switches.push(`${name} → ${e.mode}`));
      loopDelay.enable();
      let made = 0;
      let failed = 0;
      let longest = 0;
      let shortest = Infinity;
      // 3 limiters × 4 callers × 15 calls, each caller one call at a time.
      await Promise.all(
        Object.values(limiters).flatMap((l) =>
          Array.from({ length: 4 }, async (_, c) => {
            for (let i = 0; i < 15; i++) {
              const t0 = performance.now();
              try {
                await l.take(`user-${c}`);
              } catch {
                failed++;
              }
              const ms = performance.now() - t0;
              longest = Math.max(longest, ms);
              shortest = Math.min(shortest, ms);
              made++;
            }
          }),
        ),
      );
      loopDelay.disable();
      const lagMs = loopDelay.max / 1e6;
      const stats = Object.values(limiters).map((l) => l.stats());
      t.diagnostic(
        `redis +50 ms each way: ${made} calls, ${failed} failed, longest ${longest.toFixed(0)} ms, shortest ${shortest.toFixed(0)} ms (event loop delay up to ${lagMs.toFixed(0)} ms), rescue decisions ${stats.reduce((n, s) => n + s.rescueDecisions, 0)}`,
      );
      assert.equal(failed, 0);
      assert.deepEqual(switches, [], `no limiter went to rescue: ${JSON.stringify(stats.map((s) => String(s.cause)))}`);
      assert.ok(
        stats.every((s) => s.failures === 0 && s.rescueDecisions === 0),
        JSON.stringify(stats.map((s) => [s.failures, s.rescueDecisions])),
      );
      assert.ok(longest <= timeoutMs + lagMs + 20, `a call took ${longest.toFixed(0)} ms (timeoutMs ${timeoutMs})`);
      // The proxy is in the path: a leased limiter answers from its lease at once, a Redis round trip takes 100 ms.
      assert.ok(longest >= 100, `the longest call took ${longest.toFixed(0)} ms: was Redis really 100 ms away?`);
    } finally {
      for (const l of Object.values(limiters)) await l.close();
    }
  });

  it('a limiter that misses its deadline once, soon after it connected, is back on Redis after two PONGs', async (t) => {
    // probeIntervalMs 300: an outage within 10 intervals (3 s) of a return would be a relapse, and a
    // PING's give-up (max(timeoutMs, probeIntervalMs) = 1 s) is ten round trips away.
    const lim = new RedisTokenLimiter({ redis: `redis://${proxy.address}`, prefix: 'lo:', rate: 1_000, timeoutMs: 1_000, probeIntervalMs: 300 });
    const admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    const pings = async () => Number(/cmdstat_ping:calls=(\d+)/.exec(await admin.info('commandstats'))?.[1] ?? 0);
    try {
      await onRedis(lim);
      const connected = performance.now();
      assert.equal(await lim.take('k'), true);
      assert.equal(lim.stats().redisDecisions, 1);
      await admin.config('RESETSTAT');
      proxy.delayMs = 1_500; // one call held past its 1 s deadline
      const slow = lim.take('k');
      await waitFor('the limiter to go to rescue', () => lim.mode === 'rescue', 5_000);
      const rescued = performance.now();
      proxy.delayMs = 50; // Redis answers again (once the held call is through: the proxy keeps order)
      assert.equal(await slow, true);
      await waitFor('the limiter to return to Redis', () => lim.mode === 'redis', 10_000);
      const back = performance.now();
      const probes = await pings();
      t.diagnostic(
        `one timeout ${(rescued - connected).toFixed(0)} ms after the connect; back on Redis ${(back - rescued).toFixed(0)} ms later, after ${probes} PINGs`,
      );
      assert.ok(rescued - connected < 3_000, 'the outage started within the relapse window of the connect (else this tests nothing)');
      assert.equal(lim.stats().outages, 1);
      assert.equal(probes, 2, 'two PONGs in a row, as after any outage — not the four of a relapse');
      const decided = lim.stats().redisDecisions;
      assert.equal(await lim.take('k'), true);
      assert.equal(lim.stats().redisDecisions, decided + 1, 'decided on Redis, 100 ms away, within its 1 s deadline');
    } finally {
      proxy.delayMs = 50;
      admin.disconnect();
      await lim.close();
    }
  });
});

describe('etcd 200 ms away each way', { skip: skipReason(etcdBinary, 'etcd') }, () => {
  let etcd: EtcdServer;
  let proxy: DelayProxy;
  before(async () => {
    etcd = await startEtcd();
    proxy = await DelayProxy.start({ host: '127.0.0.1', port: Number(new URL(etcd.endpoint).port) }, { delayMs: 0 });
  });
  after(async () => {
    await proxy?.close();
    await etcd?.stop();
  });

  it('the registry cache answers from memory, follows changes and keeps its leases; nothing times out', async (t) => {
    const prefix = `/latency-${process.pid}`;
    const warnings: string[] = [];
    const direct = new EtcdRegistry({ hosts: etcd.endpoint, prefix });
    // A call's deadline sized for a registry 400 ms a round trip away: a register is a lease grant and a
    // transaction, two to four round trips, and at the default 3 s a CI run with every core busy saw one
    // go unconfirmed (RegistryPendingError) while the write itself went through.
    const far = new EtcdRegistry({ hosts: `http://${proxy.address}`, prefix, dialTimeoutMs: 8_000, onWarning: (m) => warnings.push(m) });
    const cache = new RegistryCache(far, { onWarning: (m) => warnings.push(m) });
    const inst = (i: number) => ({ id: `i${i}`, name: 'api', address: `127.0.0.1:${9000 + i}` });
    try {
      // Registered through the far path, on 3 s leases: their keep-alives (one every third of the TTL)
      // cross the delay from here on, a 400 ms round trip each, more while every core is busy. On 2 s
      // leases a CI run never saw the cache reach its own write (cause not captured; a lease lost to a
      // late keep-alive is the likely one), so the leases have more room, and a failure says what was
      // missing and where.
      for (let i = 0; i < 3; i++) await far.register(inst(i), { ttlMs: 3_000 });
      assert.equal((await cache.getService('api')).length, 3);
      proxy.delayMs = 200;
      const started = performance.now();

      // Lookups while changes arrive through the watch: every one answered from memory.
      let lookups = 0;
      let slowest = 0;
      let lookingUp = true;
      const looking = (async () => {
        while (lookingUp && lookups < 1_000) {
          const t0 = performance.now();
          await cache.getService('api');
          slowest = Math.max(slowest, performance.now() - t0);
          lookups++;
          await new Promise((r) => setTimeout(r, 10));
        }
      })();
      const seen = async (n: number) => (await cache.getService('api')).length === n;
      let t0 = performance.now();
      await direct.register(inst(3));
      await waitFor('the cache to see the new instance', () => seen(4), 5_000);
      const addMs = performance.now() - t0;
      t0 = performance.now();
      await direct.deregister(inst(0));
      await waitFor('the cache to see the removal', () => seen(3), 5_000);
      const removeMs = performance.now() - t0;
      t0 = performance.now();
      await far.register(inst(4)); // a write across the delay
      const writeMs = performance.now() - t0;
      await waitFor('the cache to see its own write', () => seen(4), 5_000).catch(async (err: unknown) => {
        // Say what was missing, and where: in the cache only (the watch), or in etcd too (a lease lost).
        const inCache = (await cache.getService('api')).map((i) => i.id).sort();
        const inEtcd = (await direct.getService('api')).map((i) => i.id).sort();
        throw new Error(
          `${(err as Error).message}: the cache has [${inCache.join(', ')}], etcd has [${inEtcd.join(', ')}]; far registry ${JSON.stringify(far.stats())}; ${cache.stats().watchReconnects} watch reconnects; warnings ${JSON.stringify(warnings)}`,
        );
      });
      // Past the 3 s lease TTL: leases kept alive across the delay (waiting for that is the point here).
      await waitFor('4 s under the delay', () => performance.now() - started > 4_000, 6_000);
      lookingUp = false;
      await looking;
      const listed = (await direct.getService('api')).map((i) => i.id).sort();
      const stats = cache.stats();
      t.diagnostic(
        `etcd +200 ms each way: ${lookups} lookups, slowest ${slowest.toFixed(1)} ms; watch delivered an add in ${addMs.toFixed(0)} ms, a removal in ${removeMs.toFixed(0)} ms; a register across the delay took ${writeMs.toFixed(0)} ms; ${stats.watchReconnects} watch reconnects, ${warnings.length} warnings`,
      );
      assert.deepEqual(listed, ['i1', 'i2', 'i3', 'i4'], 'the far leases stayed alive (i1, i2), the changes are in etcd');
      assert.ok(slowest < 50, `a lookup took ${slowest.toFixed(1)} ms: the cache did not answer from memory`);
      assert.ok(addMs >= 200, `the add arrived in ${addMs.toFixed(0)} ms: was etcd really 200 ms away?`);
      assert.equal(stats.watchReconnects, 0, 'no watch timed out');
      assert.deepEqual(warnings, []);
    } finally {
      await cache.close();
      await far.close();
      await direct.close();
    }
  });
});
