/**
 * allComponents makes one of every component bulwark/metrics knows, on real servers where the component
 * needs one (etcd for EtcdRegistry, Redis for the Redis limiters, a grpc-js greeter on loopback for the
 * gRPC guards and discovery), for the tests that compare a full scrape with docs/metrics.md. `close()`
 * closes them all.
 */
import { CircuitBreaker, SreBreaker, BreakerGroup } from '../../src/breaker/index.js';
import { AdaptiveShedder, KeyedLimiter, PeriodLimiter, RedisPeriodLimiter, RedisTokenLimiter, TokenLimiter } from '../../src/limit/index.js';
import { Bulkhead, Fallback, FaultInjector, Retry, RetryBudget, Timeout } from '../../src/policy/index.js';
import { HttpGuard } from '../../src/http/index.js';
import { EtcdRegistry, MemoryRegistry, RegistryCache } from '../../src/registry/index.js';
import { Balancer } from '../../src/balancer/index.js';
import { ResilientClient } from '../../src/client/index.js';
import { Group, HttpPool } from '../../src/cache/index.js';
import { GrpcClientGuard, GrpcDiscovery, GrpcServerGuard } from '../../src/grpc/index.js';
import { GreeterClientCtor, sayHello, startGreeter } from './grpc-greeter.js';
import { credentials } from '@grpc/grpc-js';

export async function allComponents(etcdUrl: string, redisUrl: string): Promise<{ parts: object[]; exercise(): Promise<void>; close(): Promise<void> }> {
  const reg = new MemoryRegistry();
  await reg.register({ id: 'a', name: 'svc', address: '127.0.0.1:8080' });
  const cache = new RegistryCache(reg);
  await cache.getService('svc');
  const balancer = new Balancer({ registry: cache, service: 'svc', strategy: 'p2c' });
  await balancer.ready();
  const fallback = new Fallback({ value: 'x' });
  const retry = new Retry({ maxAttempts: 2, backoff: { initialMs: 1, maxMs: 1 } });
  const client = new ResilientClient({ registry: cache });
  const group = new BreakerGroup();
  const circuits = new BreakerGroup({ factory: (name) => new CircuitBreaker({ name }) });
  const circuit = new CircuitBreaker({ name: 'circuit', minimumCalls: 1 });
  // gRPC: a greeter behind the server guard, called through bulwark:///greeter with the client guard.
  const serverGuard = new GrpcServerGuard({});
  const greeter = await startGreeter('g', { interceptors: [serverGuard.interceptor] });
  await reg.register({ id: 'g', name: 'greeter', address: greeter.address });
  const discovery = new GrpcDiscovery({ registry: cache, health: false });
  const clientGuard = new GrpcClientGuard({ target: 'bulwark:///greeter' });
  const greeterClient = new GreeterClientCtor('bulwark:///greeter', credentials.createInsecure(), {
    ...discovery.channelOptions(),
    interceptors: [clientGuard.interceptor],
  });
  /** exercise makes the event-counted series appear (run it after tracking). */
  const exercise = async (): Promise<void> => {
    await fallback.execute(() => Promise.reject(new Error('x')));
    let n = 0;
    await retry.execute(() => (n++ === 0 ? Promise.reject(new Error('once')) : 'ok'));
    await client.call('svc', async () => 'ok');
    await group.execute('peer-1', () => 1);
    await circuits.execute('peer-1', () => 1);
    await circuit.execute(() => Promise.reject(new Error('x'))).catch(() => {});
    circuits.get('drained')!.isolate('operator drill'); // an isolated member: breaker_isolated has a sample
    balancer.release(balancer.pick());
    await sayHello(greeterClient, { name: 'metrics' });
  };
  const etcd = new EtcdRegistry({ hosts: etcdUrl });
  await etcd.register({ id: 'e', name: 'svc', address: '127.0.0.1:8081' }, { ttlMs: 5000 });
  const redisToken = new RedisTokenLimiter({ redis: redisUrl, prefix: 'metrics-doc-t', rate: 10 });
  const redisPeriod = new RedisPeriodLimiter({ redis: redisUrl, prefix: 'metrics-doc-p', quota: 10, periodMs: 1000 });
  const pool = new HttpPool({ self: 'http://127.0.0.1:9' });
  const parts: object[] = [
    new SreBreaker({ name: 'sre' }),
    circuit,
    group,
    circuits,
    new TokenLimiter({ rate: 10 }),
    new PeriodLimiter({ quota: 10, periodMs: 1000 }),
    new KeyedLimiter({ rate: 10 }),
    redisToken,
    redisPeriod,
    new AdaptiveShedder(),
    cache,
    etcd,
    balancer,
    client,
    retry,
    new RetryBudget(),
    new Bulkhead(),
    new Timeout(),
    new FaultInjector({ delay: { ms: 1, percent: 1 } }),
    fallback,
    new HttpGuard({ limiter: new KeyedLimiter({ rate: 10 }) }),
    new Group({ name: 'g', cacheBytes: 1024, getter: (k) => k }),
    pool,
    clientGuard,
    serverGuard,
    discovery,
  ];
  return {
    parts,
    exercise,
    async close() {
      greeterClient.close();
      greeter.server.forceShutdown();
      for (const p of [...parts].reverse()) await (p as { close?: () => Promise<void> }).close?.();
      await reg.close?.();
    },
  };
}
