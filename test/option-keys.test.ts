/**
 * Every constructor (and every function that takes an options object) refuses a key it does not know,
 * with a TypeError naming the owner, the key and the options there are: a typo in a JavaScript caller's
 * options (`timeoutMS`, `burts`, `openMS`) fails where it is written instead of being ignored. One row per
 * public owner; the bad key is checked before anything is opened, so no server is needed.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Backoff, CoarseClock, Deadlines, Follower, HashRing, ManualClock, RollingWindow, SingleFlight } from '../src/core/index.js';
import { BreakerGroup, CircuitBreaker, SreBreaker } from '../src/breaker/index.js';
import { Bulkhead, Fallback, FaultInjector, Retry, RetryBudget, Timeout } from '../src/policy/index.js';
import { AdaptiveShedder, EventLoopLoad, KeyedLimiter, PeriodLimiter, RedisPeriodLimiter, RedisTokenLimiter, TokenLimiter } from '../src/limit/index.js';
import { EtcdRegistry, MemoryRegistry, RegistryCache, announce } from '../src/registry/index.js';
import {
  ActiveHealthChecker,
  Balancer,
  LeastRequest,
  OutlierDetector,
  P2C,
  Random,
  RingHash,
  RoundRobin,
  SmoothWeightedRoundRobin,
} from '../src/balancer/index.js';
import { ResilientClient } from '../src/client/index.js';
import { Group, HttpPool, LruCache } from '../src/cache/index.js';
import { HttpGuard } from '../src/http/index.js';
import { GrpcClientGuard, GrpcDiscovery, GrpcHealth, GrpcServerGuard, announceGrpc } from '../src/grpc/index.js';

const clock = new ManualClock();
const registry = new MemoryRegistry({ clock });
const instance = { id: 'a', name: 'svc', address: '127.0.0.1:1' };
const source = { watch: async function* () {} };

/** Each row: the owner as messages name it, an option it has, and a build given one more key. */
const rows: Array<[owner: string, known: string, build: (bad: object) => unknown]> = [
  ['CoarseClock', 'resolutionMs', (x) => new CoarseClock({ ...x })],
  ['SingleFlight', 'timeoutMs', (x) => new SingleFlight({ ...x })],
  ['RollingWindow', 'windowMs', (x) => new RollingWindow({ clock, ...x })],
  ['Backoff', 'multiplier', (x) => new Backoff({ ...x })],
  ['Follower', 'readyWaitMs', (x) => new Follower({ source, onList: () => {}, onEvent: () => {}, clock, ...x })],
  ['Deadlines', 'timeoutMs', (x) => new Deadlines({ timeoutMs: 10, clock, ...x })],
  ['HashRing', 'replicas', (x) => new HashRing({ ...x })],
  ['SreBreaker', 'k', (x) => new SreBreaker({ clock, ...x })],
  ['CircuitBreaker', 'openMs', (x) => new CircuitBreaker({ clock, ...x })],
  ['BreakerGroup', 'factory', (x) => new BreakerGroup({ clock, ...x })],
  ['Retry', 'maxAttempts', (x) => new Retry({ clock, ...x })],
  ['RetryBudget', 'percentCanRetry', (x) => new RetryBudget({ clock, ...x })],
  ['Timeout', 'timeoutMs', (x) => new Timeout({ timeoutMs: 10, clock, ...x })],
  ['Bulkhead', 'maxConcurrent', (x) => new Bulkhead({ ...x })],
  ['Fallback', 'value', (x) => new Fallback({ value: 1, ...x })],
  ['FaultInjector', 'ttlMs', (x) => new FaultInjector({ clock, ...x })],
  ['TokenLimiter', 'burst', (x) => new TokenLimiter({ rate: 5, clock, ...x })],
  ['PeriodLimiter', 'quota', (x) => new PeriodLimiter({ periodMs: 1_000, quota: 5, clock, ...x })],
  ['KeyedLimiter', 'maxKeys', (x) => new KeyedLimiter({ rate: 5, clock, ...x })],
  ['RedisTokenLimiter', 'rate', (x) => new RedisTokenLimiter({ redis: 'redis://127.0.0.1:1', prefix: 'p', rate: 5, ...x })],
  ['RedisPeriodLimiter', 'quota', (x) => new RedisPeriodLimiter({ redis: 'redis://127.0.0.1:1', prefix: 'p', periodMs: 1_000, quota: 5, ...x })],
  ['AdaptiveShedder', 'coolOffMs', (x) => new AdaptiveShedder({ clock, ...x })],
  ['EventLoopLoad', 'sampleMs', (x) => new EventLoopLoad({ clock, ...x })],
  ['MemoryRegistry', 'ttlMs', (x) => new MemoryRegistry({ clock, ...x })],
  ['EtcdRegistry', 'hosts', (x) => new EtcdRegistry({ hosts: 'etcd://127.0.0.1:1', ...x })],
  ['RegistryCache', 'ttlMs', (x) => new RegistryCache(registry, { clock, ...x })],
  ['announce', 'ttlMs', (x) => announce(registry, instance, { signals: [], clock, ...x })],
  ['RoundRobin', 'random', (x) => new RoundRobin({ ...x })],
  ['Random', 'random', (x) => new Random({ ...x })],
  ['SmoothWeightedRoundRobin', 'warn', (x) => new SmoothWeightedRoundRobin({ ...x })],
  ['RingHash', 'replicas', (x) => new RingHash({ clock, ...x })],
  ['P2C', 'decayMs', (x) => new P2C({ clock, ...x })],
  ['LeastRequest', 'choiceCount', (x) => new LeastRequest({ ...x })],
  ['OutlierDetector', 'consecutiveFailures', (x) => new OutlierDetector({ clock, ...x })],
  ['ActiveHealthChecker', 'intervalMs', (x) => new ActiveHealthChecker({ clock, ...x })],
  ['Balancer', 'strategy', (x) => new Balancer({ instances: [], clock, ...x })],
  ['ResilientClient', 'timeoutMs', (x) => new ResilientClient({ registry, clock, ...x })],
  ['LruCache', 'maxBytes', (x) => new LruCache({ maxBytes: 64, ...x })],
  ['Group', 'cacheBytes', (x) => new Group({ name: 'g', cacheBytes: 1_024, getter: () => 'v', clock, ...x })],
  ['HttpPool', 'self', (x) => new HttpPool({ self: 'http://127.0.0.1:1', ...x })],
  ['HttpPool.bindRegistry', 'service', (x) => new HttpPool({ self: 'http://127.0.0.1:1' }).bindRegistry(registry, { clock, ...x })],
  ['HttpGuard', 'limiter', (x) => new HttpGuard({ ...x })],
  ['GrpcClientGuard', 'target', (x) => new GrpcClientGuard({ clock, ...x })],
  ['GrpcServerGuard', 'limiter', (x) => new GrpcServerGuard({ clock, ...x })],
  ['GrpcDiscovery', 'strategy', (x) => new GrpcDiscovery({ registry, clock, ...x })],
  ['GrpcHealth', 'services', (x) => new GrpcHealth({ ...x })],
  ['announceGrpc', 'drainMs', (x) => announceGrpc(registry, instance, { server: {} as never, health: {} as never, signals: [], clock, ...x })],
];

describe('unknown option keys', () => {
  for (const [owner, known, build] of rows) {
    it(`${owner} refuses one, naming it and the options there are`, async () => {
      const check = (err: unknown) => {
        assert.ok(err instanceof TypeError, String(err));
        assert.match(err.message, new RegExp(`^${owner.replace('.', '\\.')}: timeoutMS is not an option; the options are (\\w+, )*${known}(, \\w+)*$`));
        return true;
      };
      let answer: unknown;
      try {
        answer = build({ timeoutMS: 500 });
      } catch (err) {
        check(err);
        return;
      }
      // the functions that answer a promise reject with it
      assert.ok(answer instanceof Promise, `${owner} accepted an unknown key`);
      await assert.rejects(answer, check);
    });
  }

  it('a nested option names its path under the owner', () => {
    assert.throws(() => new ResilientClient({ registry, clock, bulkhead: { maxConcurent: 5 } as never }), {
      name: 'TypeError',
      message: 'ResilientClient: bulkhead.maxConcurent is not an option; the options are maxConcurrent, maxQueued',
    });
    assert.throws(() => new Retry({ backoff: { multiplyer: 2 } as never }), {
      name: 'TypeError',
      message: 'Retry: backoff.multiplyer is not an option; the options are initialMs, maxMs, multiplier, jitter, random',
    });
  });
});
