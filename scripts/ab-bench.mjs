#!/usr/bin/env node
/**
 * A/B of the library's hot paths between two builds, in one run: each (subject, build) pair runs in its
 * own child process, alternating A and B (and which goes first) round after round, so that machine
 * noise falls on both alike; it prints the median ns/op of each, the ratio B / A of the medians, and the
 * median (and range) of the per-round ratios, which pair runs made back to back.
 *
 *   node scripts/ab-bench.mjs <dist A> <dist B> [rounds]      e.g. /tmp/base/dist dist 7
 *
 * A build is a `dist/` folder of this package (npm run build). Subjects adapt to renamed verbs (a
 * breaker's `allow()` became `admit()`), so a build from before a rename compares with one after it.
 * Environment: AB_MS (measured time per child, default 700), AB_FILTER (substring of subject names),
 * AB_CPU=1 (each child times its own CPU time, user + system, instead of wall time: on a machine shared
 * with other jobs a child waiting for a core is then not counted as slower), AB_VS_PLAIN=1 (side A runs
 * the plain counterpart of each "(bound to rules)", "tracked" and "fleet-aware" subject: with the same dist
 * as A and B, what binding a component to rules, tracking it in BulwarkMetrics, or joining a fleet, costs
 * its hot path in one build), AB_REDIS_URL (the Redis of the subjects that need one; without it the parent
 * starts a redis-server of its own for them, stopped at the end), BENCH_PIN (a CPU list for `taskset -c`, e.g. `0`: every child runs on those
 * CPUs; on a machine whose cores differ in speed, unpinned rounds compare the cores as much as the builds).
 */
import { spawnSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { resolve } from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';

const noop = () => undefined;
const task = () => Promise.resolve(1);
const admit = (b) => (typeof b.admit === 'function' ? b.admit() : b.allow());
const instances = (n) => Array.from({ length: n }, (_, i) => ({ id: `i${i}`, name: 'svc', address: `127.0.0.1:${9000 + i}` }));

/**
 * bound binds a component to a Rules binder (bulwark/rules, on the memory store) with one rule of `kind`
 * applied (`set` over what it was built with), where the build has rules; answers a teardown. The binder
 * only calls the component when its rules change: the subject measures what that leaves on the hot path.
 */
async function bound(load, kind, name, component, set) {
  const rules = await load('rules').catch(() => undefined);
  if (rules === undefined) return async () => undefined;
  const store = new rules.MemoryRuleStore();
  await store.put(`svc/${kind}/${name}`, JSON.stringify({ set }));
  const binder = new rules.Rules({ store, service: 'svc', instance: 'i0' });
  await binder.start();
  binder.bind(kind, name, component);
  if (binder.stats().applied !== 1 || binder.stats().refused !== 0) throw new Error(`the ${kind} rule was not applied: ${JSON.stringify(binder.status())}`);
  return async () => (await binder.close(), await store.close());
}

/** Each subject: (load(module) → Promise<module namespace>, loadFile(path in dist)) → { op, async? , teardown? }. */
const SUBJECTS = {
  'SreBreaker.execute success': async (load) => {
    const { SreBreaker } = await load('breaker');
    const b = new SreBreaker();
    return { op: () => b.execute(task), async: true };
  },
  'CircuitBreaker.execute success': async (load) => {
    const { CircuitBreaker } = await load('breaker');
    const b = new CircuitBreaker();
    return { op: () => b.execute(task), async: true };
  },
  'CircuitBreaker.execute success (bound to rules)': async (load) => {
    const { CircuitBreaker } = await load('breaker');
    const b = new CircuitBreaker({ name: 'dep' });
    const teardown = await bound(load, 'circuit-breaker', 'dep', b, { failureRate: 0.6, minimumCalls: 20 });
    return { op: () => b.execute(task), async: true, teardown };
  },
  'SreBreaker.execute success (bound to rules)': async (load) => {
    const { SreBreaker } = await load('breaker');
    const b = new SreBreaker({ name: 'dep' });
    const teardown = await bound(load, 'sre-breaker', 'dep', b, { k: 1.8 });
    return { op: () => b.execute(task), async: true, teardown };
  },
  // A fleet-aware breaker (bulwark/fleet, on the memory store) where the build has one, a plain one where
  // it has not: an A/B of a build without fleets against one with measures what joining a fleet costs
  // the success path (the view's timer and its reads of the window at its publishing rate included).
  'fleet-aware CircuitBreaker.execute success': async (load) => {
    const { CircuitBreaker } = await load('breaker');
    const fleet = await load('fleet').catch(() => undefined);
    const store = fleet === undefined ? undefined : new fleet.MemoryFleetStore();
    const b = new CircuitBreaker(store === undefined ? {} : { fleet: { store } });
    return { op: () => b.execute(task), async: true, teardown: () => b.close() };
  },
  'fleet-aware SreBreaker.execute success': async (load) => {
    const { SreBreaker } = await load('breaker');
    const fleet = await load('fleet').catch(() => undefined);
    const store = fleet === undefined ? undefined : new fleet.MemoryFleetStore();
    const b = new SreBreaker(store === undefined ? {} : { fleet: { store } });
    return { op: () => b.execute(task), async: true, teardown: () => b.close() };
  },
  'fleet-aware CircuitBreaker admit+success': async (load) => {
    const { CircuitBreaker } = await load('breaker');
    const fleet = await load('fleet').catch(() => undefined);
    const store = fleet === undefined ? undefined : new fleet.MemoryFleetStore();
    const b = new CircuitBreaker(store === undefined ? {} : { fleet: { store } });
    return { op: () => admit(b).success(), teardown: () => b.close() };
  },
  'SreBreaker admit+success': async (load) => {
    const { SreBreaker } = await load('breaker');
    const b = new SreBreaker();
    return { op: () => admit(b).success() };
  },
  'CircuitBreaker admit+success': async (load) => {
    const { CircuitBreaker } = await load('breaker');
    const b = new CircuitBreaker();
    return { op: () => admit(b).success() };
  },
  'open CircuitBreaker.execute rejects': async (load) => {
    const { CircuitBreaker } = await load('breaker');
    const b = new CircuitBreaker({ minimumCalls: 1 });
    for (let i = 0; i < 5; i++) await b.execute(() => Promise.reject(new Error('x'))).catch(noop);
    return { op: () => b.execute(task).catch(noop), async: true };
  },
  'dropping SreBreaker.execute rejects': async (load) => {
    const { SreBreaker } = await load('breaker');
    const b = new SreBreaker({ random: () => 0, forcePassMs: 1e12 });
    for (let i = 0; i < 50; i++) await b.execute(() => Promise.reject(new Error('x'))).catch(noop);
    return { op: () => b.execute(task).catch(noop), async: true };
  },
  'TokenLimiter.allow admit': async (load) => {
    const { TokenLimiter } = await load('limit');
    const l = new TokenLimiter({ rate: 1e12, burst: 1e12 });
    return { op: () => l.allow() };
  },
  'TokenLimiter.allow reject': async (load) => {
    const { TokenLimiter } = await load('limit');
    const l = new TokenLimiter({ rate: 1e-9, burst: 1 });
    l.allow();
    return { op: () => l.allow() };
  },
  // A limiter an operator's rule changed while it ran (reconfigure, where the build has it) against a plain
  // one: reconfiguration swaps fields, so the hot path must not tell them apart.
  'TokenLimiter.allow admit (reconfigured)': async (load) => {
    const { TokenLimiter } = await load('limit');
    const l = new TokenLimiter({ rate: 1e9, burst: 1e9 });
    l.reconfigure?.({ rate: 1e12, burst: 1e12 });
    return { op: () => l.allow() };
  },
  'KeyedLimiter.allow (1 024 keys)': async (load) => {
    const { KeyedLimiter } = await load('limit');
    const l = new KeyedLimiter({ rate: 1e12, burst: 1e12 });
    const keys = Array.from({ length: 1024 }, (_, i) => `key-${i}`);
    let i = 0;
    return { op: () => l.allow(keys[i++ & 1023]) };
  },
  'KeyedLimiter.allow (1 024 keys, reconfigured)': async (load) => {
    const { KeyedLimiter } = await load('limit');
    const l = new KeyedLimiter({ rate: 1e9, burst: 1e9 });
    const keys = Array.from({ length: 1024 }, (_, i) => `key-${i}`);
    for (const k of keys) l.allow(k);
    l.reconfigure?.({ rate: 1e12, burst: 1e12 });
    let i = 0;
    return { op: () => l.allow(keys[i++ & 1023]) };
  },
  'LruCache.get hit (4 096 keys)': async (load) => {
    const { LruCache } = await load('cache');
    const c = new LruCache({ maxBytes: 1 << 24 });
    const keys = Array.from({ length: 4096 }, (_, i) => `key-${i}`);
    for (const k of keys) c.add(k, k);
    let i = 0;
    return { op: () => c.get(keys[i++ & 4095]) };
  },
  'Group.get hit (4 096 keys)': async (load) => {
    const { Group } = await load('cache');
    const g = new Group({ name: 'g', cacheBytes: 1 << 24, getter: (k) => k });
    const keys = Array.from({ length: 4096 }, (_, i) => `key-${i}`);
    for (const k of keys) await g.get(k);
    let i = 0;
    return { op: () => g.get(keys[i++ & 4095]), async: true };
  },
  'PeriodLimiter.allow (1 024 keys)': async (load) => {
    const { PeriodLimiter } = await load('limit');
    const l = new PeriodLimiter({ periodMs: 1e12, quota: 1e9 });
    const keys = Array.from({ length: 1024 }, (_, i) => `key-${i}`);
    let i = 0;
    return { op: () => l.allow(keys[i++ & 1023]) };
  },
  'PeriodLimiter.allow (1 024 keys, reconfigured)': async (load) => {
    const { PeriodLimiter } = await load('limit');
    const l = new PeriodLimiter({ periodMs: 1e12, quota: 1e8 });
    l.reconfigure?.({ quota: 1e9 });
    const keys = Array.from({ length: 1024 }, (_, i) => `key-${i}`);
    let i = 0;
    return { op: () => l.allow(keys[i++ & 1023]) };
  },
  'PeriodLimiter.allow evicting (4 096 keys, maxKeys 1 024)': async (load) => {
    const { PeriodLimiter } = await load('limit');
    const l = new PeriodLimiter({ periodMs: 1e12, quota: 1e9, maxKeys: 1024 });
    const keys = Array.from({ length: 4096 }, (_, i) => `key-${i}`);
    let i = 0;
    return { op: () => l.allow(keys[i++ & 4095]) };
  },
  'HashRing.get (core, 16 members × 160)': async (load) => {
    const { HashRing } = await load('core');
    const ring = new HashRing({ replicas: 160 });
    const members = Array.from({ length: 16 }, (_, i) => `10.0.0.${i}:80`);
    if (typeof ring.set === 'function') ring.set(members);
    else for (const m of members) ring.add(m);
    const keys = Array.from({ length: 4096 }, (_, i) => `key-${i}`);
    let i = 0;
    return { op: () => ring.get(keys[i++ & 4095]) };
  },
  'RingHash.pick (balancer, 16 instances)': async (load) => {
    const { RingHash } = await load('balancer');
    const p = new RingHash();
    const list = instances(16);
    const keys = Array.from({ length: 4096 }, (_, i) => `key-${i}`);
    let i = 0;
    return { op: () => p.pick(list, keys[i++ & 4095]) };
  },
  'P2C.pick + report (16 instances)': async (load) => {
    const { P2C } = await load('balancer');
    const p = new P2C();
    const list = instances(16);
    const outcome = { ok: true, latencyMs: 1 };
    return {
      op: () => {
        const x = p.pick(list);
        p.start?.(x);
        p.report?.(x, outcome);
      },
    };
  },
  'RoundRobin.pick (16 instances)': async (load) => {
    const { RoundRobin } = await load('balancer');
    const p = new RoundRobin();
    const list = instances(16);
    return { op: () => p.pick(list) };
  },
  'RegistryCache.getService hit': async (load) => {
    const { MemoryRegistry, RegistryCache } = await load('registry');
    const reg = new MemoryRegistry();
    const names = Array.from({ length: 16 }, (_, i) => `svc-${i}`);
    for (const n of names) for (let j = 0; j < 8; j++) await reg.register({ id: `i${j}`, name: n, address: `127.0.0.1:${9000 + j}` });
    const cache = new RegistryCache(reg);
    for (const n of names) await cache.getService(n);
    let i = 0;
    return { op: () => cache.getService(names[i++ & 15]), async: true, teardown: async () => (await cache.close(), await reg.close()) };
  },
  'ResilientClient.call (defaults)': async (load) => {
    const { MemoryRegistry } = await load('registry');
    const { ResilientClient } = await load('client');
    const registry = new MemoryRegistry();
    for (const x of instances(3)) await registry.register(x);
    const c = new ResilientClient({ registry });
    await c.call('svc', task);
    return { op: () => c.call('svc', task), async: true, teardown: async () => (await c.close(), await registry.close()) };
  },
  // The options that take work away (issue 31: none may make a call slower than the defaults).
  'ResilientClient.call (no timeout)': async (load) => {
    const { MemoryRegistry } = await load('registry');
    const { ResilientClient } = await load('client');
    const registry = new MemoryRegistry();
    for (const x of instances(3)) await registry.register(x);
    const c = new ResilientClient({ registry, timeoutMs: 0 });
    await c.call('svc', task);
    return { op: () => c.call('svc', task), async: true, teardown: async () => (await c.close(), await registry.close()) };
  },
  'ResilientClient.call (no timeout, no retry)': async (load) => {
    const { MemoryRegistry } = await load('registry');
    const { ResilientClient } = await load('client');
    const registry = new MemoryRegistry();
    for (const x of instances(3)) await registry.register(x);
    const c = new ResilientClient({ registry, timeoutMs: 0, maxAttempts: 1 });
    await c.call('svc', task);
    return { op: () => c.call('svc', task), async: true, teardown: async () => (await c.close(), await registry.close()) };
  },
  'Timeout.execute (10 s)': async (load) => {
    const { Timeout } = await load('policy');
    const t = new Timeout({ timeoutMs: 10_000 });
    return { op: () => t.execute(task), async: true };
  },
  'Timeout.execute (10 s, caller signal)': async (load) => {
    const { Timeout } = await load('policy');
    const t = new Timeout({ timeoutMs: 10_000 });
    const options = { signal: new AbortController().signal };
    return { op: () => t.execute(task, options), async: true };
  },
  'Retry.execute success': async (load) => {
    const { Retry } = await load('policy');
    const r = new Retry({ maxAttempts: 3 });
    return { op: () => r.execute(task), async: true };
  },
  'Bulkhead.execute': async (load) => {
    const { Bulkhead } = await load('policy');
    const b = new Bulkhead({ maxConcurrent: 1_000 });
    return { op: () => b.execute(task), async: true };
  },
  'Bulkhead.execute (reconfigured)': async (load) => {
    const { Bulkhead } = await load('policy');
    const b = new Bulkhead({ maxConcurrent: 10 });
    b.reconfigure?.({ maxConcurrent: 1_000 });
    return { op: () => b.execute(task), async: true };
  },
  'ResilientClient.call (defaults, tracked)': async (load) => {
    const { MemoryRegistry } = await load('registry');
    const { ResilientClient } = await load('client');
    const { BulwarkMetrics } = await load('metrics');
    const { Registry } = await import('prom-client');
    const registry = new MemoryRegistry();
    for (const x of instances(3)) await registry.register(x);
    const c = new ResilientClient({ registry });
    new BulwarkMetrics({ registry: new Registry() }).track(c);
    await c.call('svc', task);
    return { op: () => c.call('svc', task), async: true, teardown: async () => (await c.close(), await registry.close()) };
  },
  // The client bound as `client/svc` with a rule setting that service's live options (a success does
  // not retry: maxAttempts 2 or 3 runs the same path).
  'ResilientClient.call (defaults, bound to rules)': async (load) => {
    const { MemoryRegistry } = await load('registry');
    const { ResilientClient } = await load('client');
    const registry = new MemoryRegistry();
    for (const x of instances(3)) await registry.register(x);
    const c = new ResilientClient({ registry });
    const unbind = await bound(load, 'client', 'svc', c, { maxAttempts: 2 });
    await c.call('svc', task);
    return { op: () => c.call('svc', task), async: true, teardown: async () => (await unbind(), await c.close(), await registry.close()) };
  },
  // A scrape is one op of milliseconds: the batches are of 100 (async), so AB_MS should allow a few.
  'BulwarkMetrics scrape (BreakerGroup of 10 000)': async (load) => {
    const { BreakerGroup } = await load('breaker');
    const { BulwarkMetrics } = await load('metrics');
    const { Registry } = await import('prom-client');
    const group = new BreakerGroup({ maxBreakers: 20_000 });
    for (let i = 0; i < 10_000; i++) admit(group.get(`dep-${i}`)).success();
    const m = new BulwarkMetrics({ registry: new Registry() });
    m.track(group, { name: 'deps' });
    return { op: () => m.metricsBuffer(), async: true, teardown: () => (m.close(), group.close()) };
  },
  // `bulwark serve`'s client API answering a cache hit (1 KiB, with its age) to a response that records
  // the call: the handler's own work, without node:http's parsing and writing (bench/serve measures those).
  'serve client API cache hit (handler, in process)': async (load, loadFile) => {
    const { handleClient } = await loadFile('cli/serve/client-api.js');
    const { ServedGroup } = await loadFile('cli/serve/served-group.js');
    const { HttpPool } = await load('cache');
    const { systemClock } = await load('core');
    const pool = new HttpPool({ self: 'http://127.0.0.1:1' });
    // `bulwark serve`'s defaults: 64 MiB main, 8 MiB hot, a quarter of the main cache for last good values.
    const g = new ServedGroup({
      name: 'default',
      cacheBytes: 64 << 20,
      hotCacheBytes: 8 << 20,
      ttlMs: 3_600_000,
      negativeTtlMs: 1_000,
      loadTimeoutMs: 5_000,
      staleBytes: 16 << 20,
      staleMaxAgeMs: 3_600_000,
      pool,
      load: async () => 'x'.repeat(1024),
      clock: systemClock,
    });
    const node = { groups: new Map([['default', g]]), config: { service: 'svc', advertise: 'http://127.0.0.1:1' }, pool: { members: () => [] } };
    const req = { url: '/v1/groups/default/keys/hot-key', method: 'GET', headers: { host: '127.0.0.1', connection: 'keep-alive' } };
    let written = 0;
    class Recorded {
      writableEnded = false;
      destroyed = false;
      headersSent = false;
      writeHead(status, headers) {
        written += headers.length;
        return this;
      }
      end(data) {
        this.writableEnded = true;
        written += data?.length ?? 0;
      }
    }
    const res = () => new Recorded();
    await handleClient(node, req, res());
    if (written < 1024) throw new Error('the hit wrote no value');
    return { op: () => handleClient(node, req, res()), async: true, teardown: () => pool.close() };
  },
  'BulwarkMetrics scrape (1 000 breakers tracked each)': async (load) => {
    const { SreBreaker, CircuitBreaker } = await load('breaker');
    const { BulwarkMetrics } = await load('metrics');
    const { Registry } = await import('prom-client');
    const m = new BulwarkMetrics({ registry: new Registry() });
    for (let i = 0; i < 1_000; i++) {
      const b = i % 2 === 0 ? new SreBreaker() : new CircuitBreaker();
      admit(b).success();
      m.track(b, { name: `dep-${i}` });
    }
    return { op: () => m.metricsBuffer(), async: true, teardown: () => m.close() };
  },
  // Issue 31's one-caller row on a real Redis (the parent starts one: see NEEDS_REDIS): one take() at a
  // time, every call admitted, on a connection the limiter owns. A round trip dominates (40–160 µs here),
  // so only the median of round ratios over many rounds tells a change of a µs from the machine's noise.
  'RedisTokenLimiter.take, one caller (real Redis)': async (load) => {
    const { RedisTokenLimiter } = await load('limit');
    const lim = new RedisTokenLimiter({ redis: process.env.AB_REDIS_URL, prefix: `ab:${process.pid}:`, rate: 1e6, burst: 1e12, timeoutMs: 2_000 });
    const until = Date.now() + 10_000;
    while (lim.stats().redisDecisions === 0) {
      if (Date.now() > until) throw new Error('the limiter did not reach Redis within 10 s');
      await lim.take('k');
      await new Promise((r) => setTimeout(r, 10));
    }
    return { op: () => lim.take('k'), async: true, teardown: () => lim.close() };
  },
};
/** Subjects that need a Redis: the parent starts one (test/support/redis.ts) and hands its URL to the children in AB_REDIS_URL. */
const NEEDS_REDIS = new Set(['RedisTokenLimiter.take, one caller (real Redis)']);

/** clock answers milliseconds: of wall time, or with AB_CPU=1 of this process's CPU time. */
const clock =
  process.env.AB_CPU === '1'
    ? () => {
        const u = process.cpuUsage();
        return (u.user + u.system) / 1000;
      }
    : () => performance.now();

async function measure(subject, ms) {
  const batch = subject.async ? 100 : 1_000;
  const runFor = async (limit) => {
    let ops = 0;
    const start = clock();
    let now = start;
    while (now - start < limit) {
      if (subject.async) for (let i = 0; i < batch; i++) await subject.op();
      else for (let i = 0; i < batch; i++) subject.op();
      ops += batch;
      now = clock();
    }
    return ((now - start) * 1e6) / ops;
  };
  await runFor(Math.min(300, ms / 2));
  const ns = await runFor(ms);
  await subject.teardown?.();
  return ns;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

const self = fileURLToPath(import.meta.url);
if (process.argv[2] === '--child') {
  const [, , , dist, asked, label] = process.argv;
  // AB_VS_PLAIN=1: side A runs the plain subject ("X (bound to rules)" → "X", "X (a, bound to rules)" → "X (a)",
  // "X (a, tracked)" → "X (a)", "fleet-aware X" → "X").
  const plain = asked
    .replace(/ \(bound to rules\)$/, '')
    .replace(/, bound to rules\)$/, ')')
    .replace(/, tracked\)$/, ')')
    .replace(/^fleet-aware /, '');
  const name = process.env.AB_VS_PLAIN === '1' && label === 'A' && SUBJECTS[plain] !== undefined ? plain : asked;
  const load = (mod) => import(pathToFileURL(resolve(dist, mod, 'index.js')).href);
  const loadFile = (path) => import(pathToFileURL(resolve(dist, path)).href);
  const ns = await measure(await SUBJECTS[name](load, loadFile), Number(process.env.AB_MS ?? 700));
  process.stdout.write(`@@NS ${ns}\n`);
  process.exit(0);
}

const [a, b] = [process.argv[2], process.argv[3]];
if (!a || !b) {
  console.error('usage: node scripts/ab-bench.mjs <dist A> <dist B> [rounds]');
  process.exit(2);
}
const rounds = Number(process.argv[4] ?? 7);
const names = Object.keys(SUBJECTS).filter((n) => !process.env.AB_FILTER || n.includes(process.env.AB_FILTER));
const results = new Map(names.map((n) => [n, { A: [], B: [], ratios: [] }]));
let failed = 0;
let redis;
if (names.some((n) => NEEDS_REDIS.has(n)) && !process.env.AB_REDIS_URL) {
  const { tsImport } = await import('tsx/esm/api');
  const { startRedis } = await tsImport('../test/support/redis.ts', import.meta.url);
  redis = await startRedis();
  process.env.AB_REDIS_URL = redis.url;
}
for (let r = 0; r < rounds; r++) {
  for (const name of names) {
    const order =
      r % 2 === 0
        ? [
            ['A', a],
            ['B', b],
          ]
        : [
            ['B', b],
            ['A', a],
          ];
    const round = {};
    for (const [label, dist] of order) {
      const cpus = process.env.BENCH_PIN;
      const args = [self, '--child', dist, name, label];
      const child = cpus
        ? spawnSync('taskset', ['-c', cpus, process.execPath, ...args], { encoding: 'utf8', timeout: 60_000 })
        : spawnSync(process.execPath, args, { encoding: 'utf8', timeout: 60_000 });
      const line = child.stdout?.split('\n').find((l) => l.startsWith('@@NS '));
      if (child.status !== 0 || !line) {
        failed++;
        process.stderr.write(`${name} [${label}] failed (status ${child.status}): ${child.stderr?.slice(-600)}\n`);
        continue;
      }
      round[label] = Number(line.slice(5));
      results.get(name)[label].push(round[label]);
    }
    // The two builds of one round ran back to back: their ratio is the least noisy comparison.
    if (round.A !== undefined && round.B !== undefined) results.get(name).ratios.push(round.B / round.A);
  }
}
const fmt = (ns) => (ns >= 1e3 ? `${(ns / 1e3).toFixed(2)} µs` : `${ns.toFixed(1)} ns`);
console.log(`A = ${a}\nB = ${b}\n${rounds} rounds, alternating, each (subject, build) in its own process\n`);
if (process.env.AB_VS_PLAIN === '1')
  console.log('AB_VS_PLAIN=1: A runs the plain counterpart of each "(bound to rules)", "tracked" and "fleet-aware" subject\n');
console.log('| hot path | A median | B median | B / A | median of round ratios (min–max) |');
console.log('| --- | --- | --- | --- | --- |');
for (const name of names) {
  const { A, B, ratios } = results.get(name);
  if (!A.length || !B.length) {
    console.log(`| ${name} | ${A.length ? fmt(median(A)) : 'failed'} | ${B.length ? fmt(median(B)) : 'failed'} | – | – |`);
    continue;
  }
  const spread = ratios.length ? `${median(ratios).toFixed(3)} (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})` : '–';
  console.log(`| ${name} | ${fmt(median(A))} | ${fmt(median(B))} | ${(median(B) / median(A)).toFixed(3)} | ${spread} |`);
}
await redis?.stop();
process.exit(failed ? 1 : 0);
