/**
 * The Redis limiters' rescue arithmetic, with Redis unreachable (a URL to a closed loopback port): a
 * limiter that cannot reach Redis decides in process at rate / instances, the instance count coming
 * from a number, a function or a registry service; one warning per outage.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../src/core/clock.js';
import { RedisPeriodLimiter, RedisTokenLimiter } from '../src/limit/index.js';
import { MemoryRegistry } from '../src/registry/memory-registry.js';
import { freePort, waitFor } from './support/servers.js';

async function deadUrl(): Promise<string> {
  return `redis://127.0.0.1:${await freePort()}`; // nothing listens there
}

describe('Redis limiter rescue without Redis', () => {
  it('decides in process at rate / instances before it ever reaches Redis, and says so once', async () => {
    const clock = new ManualClock();
    const warnings: Error[] = [];
    const onWarning = (w: Error) => {
      if ((w as { code?: string }).code === 'BULWARK_LIMIT_RESCUE') warnings.push(w);
    };
    process.on('warning', onWarning);
    const lim = new RedisTokenLimiter({ redis: await deadUrl(), prefix: 'k:', rate: 400, burst: 40, instances: 4, clock, probeIntervalMs: 10 });
    try {
      assert.equal(lim.mode, 'rescue');
      let n = 0;
      for (let i = 0; i < 20; i++) if (await lim.take('k')) n++;
      assert.equal(n, 10, 'burst 40 / 4 instances');
      clock.advance(10); // 100/s → one token
      assert.equal(await lim.take('k'), true);
      assert.equal(await lim.take('k'), false);
      assert.equal((await lim.takeDecision('k')).limit, 10);
      // The probe runs on the limiter's clock: each advance sends a PING, which fails (nothing listens).
      await waitFor('the failed probe to warn', async () => (await clock.advanceAsync(10), warnings.length > 0), 10_000);
      const probes = lim.stats().failures;
      for (let i = 0; i < 20; i++) await clock.advanceAsync(10); // more failed probes: still one warning
      await new Promise((r) => setImmediate(r));
      assert.equal(warnings.length, 1);
      assert.equal(lim.stats().failures, probes, 'a failed probe is not a failed decision');
      assert.equal(lim.stats().outages, 0, 'never reached Redis: not an outage');
      assert.ok(lim.stats().cause instanceof Error);
    } finally {
      process.off('warning', onWarning);
      await lim.close();
    }
  });

  it('takes the instance count from a registry service, and keeps the last count when the registry fails', async () => {
    const registry = new MemoryRegistry();
    for (let i = 0; i < 5; i++) await registry.register({ id: `p${i}`, name: 'payments', address: `127.0.0.1:${9000 + i}` });
    const clock = new ManualClock();
    const per = new RedisPeriodLimiter({
      redis: await deadUrl(),
      prefix: 'p:',
      periodMs: 1_000,
      quota: 50,
      registry,
      service: 'payments',
      instancesRefreshMs: 20,
      clock,
    });
    try {
      await waitFor('the instance count', () => per.stats().instances === 5, 5_000); // the first count, at construction
      let n = 0;
      for (let i = 0; i < 20; i++) if (await per.take('u')) n++;
      assert.equal(n, 10, 'quota 50 / 5 instances');
      await registry.deregister({ id: 'p0', name: 'payments', address: '127.0.0.1:9000' });
      await clock.advanceAsync(19);
      assert.equal(per.stats().instances, 5, 'counted again only every instancesRefreshMs, on the clock');
      await clock.advanceAsync(1);
      assert.equal(per.stats().instances, 4);
      await registry.close(); // now every lookup fails
      await clock.advanceAsync(100);
      assert.equal(per.stats().instances, 4, 'the last count stays');
    } finally {
      await per.close();
    }
  });

  it('takes the instance count from a function', async () => {
    const clock = new ManualClock();
    const lim = new RedisTokenLimiter({ redis: await deadUrl(), prefix: 'k:', rate: 100, burst: 10, instances: () => 2, clock });
    try {
      assert.equal(lim.stats().instances, 2);
      let n = 0;
      for (let i = 0; i < 10; i++) if (await lim.take('k')) n++;
      assert.equal(n, 5);
    } finally {
      await lim.close();
    }
  });

  it('rejects instances together with a registry, and a registry without a service', () => {
    const registry = new MemoryRegistry();
    assert.throws(() => new RedisTokenLimiter({ redis: 'redis://127.0.0.1:1', prefix: 'k:', rate: 1, instances: 2, registry, service: 's' }), TypeError);
    assert.throws(() => new RedisTokenLimiter({ redis: 'redis://127.0.0.1:1', prefix: 'k:', rate: 1, registry }), /service/);
  });
});
