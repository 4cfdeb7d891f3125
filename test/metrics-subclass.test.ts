/**
 * Every trackable component describes itself (`describeMetrics(ctx)`), so a subclass of one — `class
 * ApiLimiter extends TokenLimiter {}`, or a class a minifier renamed — is tracked with the same families
 * as its base: for each component, the base and a subclass made with the same options are tracked in
 * two registries under one name, and their expositions list the same families (HELP and TYPE) and the
 * same series, and their snapshots the same kind. EtcdRegistry runs on a real etcd, the Redis limiters
 * on a real Redis.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { BulwarkMetrics } from '../src/metrics/index.js';
import { CircuitBreaker, SreBreaker, BreakerGroup } from '../src/breaker/index.js';
import { AdaptiveShedder, KeyedLimiter, PeriodLimiter, RedisPeriodLimiter, RedisTokenLimiter, TokenLimiter } from '../src/limit/index.js';
import { Bulkhead, Fallback, Retry, RetryBudget, Timeout } from '../src/policy/index.js';
import { HttpGuard } from '../src/http/index.js';
import { EtcdRegistry, MemoryRegistry, RegistryCache } from '../src/registry/index.js';
import { Balancer } from '../src/balancer/index.js';
import { ResilientClient } from '../src/client/index.js';
import { Group, HttpPool } from '../src/cache/index.js';
import { GrpcClientGuard, GrpcDiscovery, GrpcServerGuard } from '../src/grpc/index.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { redisBinary, startRedis, type RedisServer } from './support/redis.js';
import { skipReason } from './support/servers.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Ctor = new (...args: any[]) => object;

/** subclassOf answers `class Api<Base> extends Base {}`, adding nothing. */
function subclassOf(base: Ctor): Ctor {
  const name = `Api${base.name}`;
  return { [name]: class extends base {} }[name]!;
}

/** Made is one component of a kind: the instance, and what makes its event-counted series appear. */
interface Made {
  c: object;
  exercise?(): Promise<void>;
}

/** shape answers an exposition as its HELP and TYPE lines and its series (values left out), sorted. */
function shape(text: string): { families: string[]; series: string[] } {
  const lines = text.split('\n').filter((l) => l.length > 0);
  return {
    families: lines.filter((l) => l.startsWith('# ')).sort(),
    series: lines
      .filter((l) => !l.startsWith('#'))
      .map((l) => l.slice(0, l.lastIndexOf(' ')))
      .sort(),
  };
}

describe('a subclass of every trackable component', { skip: skipReason(etcdBinary, 'etcd') ?? skipReason(redisBinary, 'redis-server') }, () => {
  let etcd: EtcdServer;
  let redis: RedisServer;
  let reg: MemoryRegistry;
  let cache: RegistryCache;
  const closers: (() => Promise<void> | void)[] = [];
  before(async () => {
    etcd = await startEtcd();
    redis = await startRedis();
    reg = new MemoryRegistry();
    await reg.register({ id: 'a', name: 'svc', address: '127.0.0.1:8080' });
    cache = new RegistryCache(reg);
    await cache.getService('svc');
  });
  after(async () => {
    for (const close of closers.reverse()) await close();
    await cache?.close();
    await reg?.close();
    await etcd?.stop();
    await redis?.stop();
  });

  /** Each kind: its class, and how to make one of (a subclass of) it. */
  const kinds: [Ctor, (C: Ctor, i: number) => Promise<Made> | Made][] = [
    [SreBreaker, (C) => ({ c: new C({ name: 'b' }) })],
    [CircuitBreaker, (C) => ({ c: new C({ name: 'b' }) })],
    [
      BreakerGroup,
      (C) => {
        const g = new C() as BreakerGroup;
        return { c: g, exercise: async () => void (await g.execute('peer-1', () => 1)) };
      },
    ],
    [TokenLimiter, (C) => ({ c: new C({ rate: 10 }) })],
    [PeriodLimiter, (C) => ({ c: new C({ quota: 10, periodMs: 1000 }) })],
    [KeyedLimiter, (C) => ({ c: new C({ rate: 10 }) })],
    [RedisTokenLimiter, (C, i) => ({ c: new C({ redis: redis.url, prefix: `subclass-t${i}`, rate: 10 }) })],
    [RedisPeriodLimiter, (C, i) => ({ c: new C({ redis: redis.url, prefix: `subclass-p${i}`, quota: 10, periodMs: 1000 }) })],
    [AdaptiveShedder, (C) => ({ c: new C() })],
    [
      RegistryCache,
      (C) => {
        const c = new C(reg) as RegistryCache;
        return { c, exercise: async () => void (await c.getService('svc')) };
      },
    ],
    [EtcdRegistry, (C) => ({ c: new C({ hosts: etcd.endpoint }) })],
    [
      Balancer,
      async (C) => {
        const b = new C({ registry: cache, service: 'svc', strategy: 'p2c' }) as Balancer;
        await b.ready();
        return { c: b, exercise: async () => b.release(b.pick()) };
      },
    ],
    [
      ResilientClient,
      (C) => {
        const c = new C({ registry: cache }) as ResilientClient;
        return { c, exercise: async () => void (await c.call('svc', async () => 'ok')) };
      },
    ],
    [
      Retry,
      (C) => {
        const r = new C({ maxAttempts: 2, backoff: { initialMs: 1, maxMs: 1 } }) as Retry;
        let n = 0;
        return { c: r, exercise: async () => void (await r.execute(() => (n++ === 0 ? Promise.reject(new Error('once')) : 'ok'))) };
      },
    ],
    [RetryBudget, (C) => ({ c: new C() })],
    [Bulkhead, (C) => ({ c: new C() })],
    [Timeout, (C) => ({ c: new C() })],
    [
      Fallback,
      (C) => {
        const f = new C({ value: 'x' }) as Fallback;
        return { c: f, exercise: async () => void (await f.execute(() => Promise.reject(new Error('x')))) };
      },
    ],
    [HttpGuard, (C) => ({ c: new C({ limiter: new KeyedLimiter({ rate: 10 }) }) })],
    [Group, (C, i) => ({ c: new C({ name: `subclass-${i}`, cacheBytes: 1024, getter: (k: string) => k }) })],
    [HttpPool, (C) => ({ c: new C({ self: 'http://127.0.0.1:9' }) })],
    [GrpcClientGuard, (C) => ({ c: new C({ target: 'bulwark:///greeter' }) })],
    [GrpcServerGuard, (C) => ({ c: new C({}) })],
    [GrpcDiscovery, (C) => ({ c: new C({ registry: cache, health: false }) })],
  ];
  let made = 0;
  for (const [base, make] of kinds) {
    it(`${base.name}: Api${base.name} is tracked with the same families, series and kind`, async () => {
      const scrape = async (C: Ctor) => {
        const m = await make(C, made++);
        closers.push(() => (m.c as { close?: () => Promise<void> }).close?.());
        const metrics = new BulwarkMetrics({ registry: new Registry(), instanceLabel: 'peer' });
        assert.equal(metrics.track(m.c, { name: 'x' }), 'x');
        await m.exercise?.();
        const text = await metrics.metrics();
        const kind = metrics.snapshot().components[0]!.kind;
        await metrics.close();
        return { ...shape(text), kind };
      };
      const want = await scrape(base);
      const got = await scrape(subclassOf(base));
      assert.ok(want.families.length > 0, `${base.name} has families`);
      assert.deepEqual(got.families, want.families, 'families (HELP, TYPE)');
      assert.deepEqual(got.series, want.series, 'series');
      assert.equal(got.kind, want.kind, 'kind');
    });
  }
});
