/**
 * Registry numbers:
 * 1. RegistryCache.getService on a fresh entry (target ≥ 5 M lookups/s), against a bare Map.get, and
 *    against the code before this round (`BULWARK_BASE_DIST`, default /work/base/dist; target: within 3 %).
 * 2. One registry event at 10 / 100 / 1 000 / 10 000 watched services (MemoryRegistry → RegistryCache,
 *    one watch per service; each point in its own process): target, the event at 10 000 services costs
 *    at most 2× the event at 10; the code before this round at 10 000 services is shown beside it.
 * 3. etcd put → RegistryCache updated through its watch, p50/p99, against a bare etcd3 watch's
 *    put → event latency in the same run (target within 1.5×). Each subject starts its own etcd.
 * 4. Per etcd layout (bulwark, go-zero, go-micro): a lookup (EtcdRegistry.getService of 8 instances on
 *    loopback etcd), a watch event (a put changing an instance's address → RegistryCache shows it) and
 *    the codec alone (one key decoded); targets: the foreign layouts' lookup and event within 1.2× of
 *    bulwark's own, in CPU time per op of the client process (what a layout changes: its codec and
 *    bookkeeping) and in median latency. The etcd subjects share one etcd, started by the parent, each
 *    under a prefix of its own, so that no subject pays another etcd's state.
 */
import { existsSync } from 'node:fs';
import { Etcd3 } from 'etcd3';
import { atMost, bench } from './harness.js';
import { MemoryRegistry } from '../src/registry/memory-registry.js';
import { EtcdRegistry } from '../src/registry/etcd-registry.js';
import { RegistryCache } from '../src/registry/registry-cache.js';
import type { ServiceInstance } from '../src/registry/types.js';
import { etcdLayout, type EtcdLayoutName } from '../src/registry/etcd-layout.js';
import type { IKeyValue } from 'etcd3';
import { startEtcd } from '../test/support/etcd.js';

const NAMES = Array.from({ length: 16 }, (_, i) => `svc${i}`);

async function warmCache() {
  const reg = new MemoryRegistry({ sweepIntervalMs: 0 });
  for (const name of NAMES) for (let i = 0; i < 8; i++) await reg.register({ id: `i${i}`, name, address: `10.0.0.${i}:80` });
  const cache = new RegistryCache(reg);
  for (const name of NAMES) await cache.getService(name);
  return { cache, teardown: async () => (await cache.close(), await reg.close()) };
}

/** The compiled code before this round, for A/B in the same run. */
const BASE = process.env.BULWARK_BASE_DIST ?? '/work/base/dist';

interface CacheLike {
  getService(name: string): Promise<unknown>;
  onChange(listener: (change: { service: string }) => void): unknown;
  close(): Promise<void>;
}
interface RegistryLike {
  register(instance: ServiceInstance): Promise<void>;
  close(): Promise<void>;
}

/** Builds (ours or the base's) a MemoryRegistry with `services` services of one instance each and a RegistryCache over it that has looked each up. */
async function watchedServices(services: number, base: boolean) {
  const { MemoryRegistry: Reg } = (base ? await import(`${BASE}/registry/memory-registry.js`) : { MemoryRegistry }) as {
    MemoryRegistry: new (o: object) => RegistryLike;
  };
  const { RegistryCache: Cache } = (base ? await import(`${BASE}/registry/registry-cache.js`) : { RegistryCache }) as {
    RegistryCache: new (r: RegistryLike) => CacheLike;
  };
  const reg = new Reg({ sweepIntervalMs: 0 });
  for (let i = 0; i < services; i++) await reg.register({ id: 'i0', name: `svc${i}`, address: '10.0.0.1:80' });
  const cache = new Cache(reg);
  for (let i = 0; i < services; i++) await cache.getService(`svc${i}`);
  await new Promise((r) => setImmediate(r));
  return { reg, cache, teardown: async () => (await cache.close(), await reg.close()) };
}

// The harness runs each subject in a child that re-runs this file: run only the bench that has the subject.
const child = process.argv.includes('--child') ? process.argv[process.argv.indexOf('--child') + 1] : undefined;
/** BENCH_SECTION=lookup|event|etcd runs one section only (while iterating). */
const section = process.env.BENCH_SECTION;
const runs = (name: string) => child === undefined && (section === undefined || section === name);
const LOOKUP = [
  'Map.get',
  'Map.get via awaited Promise.resolve',
  'RegistryCache.peek',
  'RegistryCache.getService',
  'RegistryCache.getService (before)',
  'RegistryCache.getService awaited',
];
const SCALE = [10, 100, 1_000, 10_000];
const EVENT = [...SCALE.map((n) => `event at ${n} services`), 'event at 10000 services (before)', 'event at 10000 services, each in turn'];
const LAYOUTS: EtcdLayoutName[] = ['bulwark', 'go-zero', 'go-micro'];
const LAYOUT = LAYOUTS.flatMap((l) => [`lookup (${l})`, `watch event (${l})`, `decode (${l})`]);

if (runs('lookup') || (child !== undefined && LOOKUP.includes(child)))
  await bench('registry: lookup of a fresh entry (16 services × 8 instances)', {
    baseline: 'Map.get',
    targets: [atMost('RegistryCache.getService within 3 % of before', 'RegistryCache.getService', 'RegistryCache.getService (before)', 1.03)],
    subjects: {
      'Map.get': () => {
        const m = new Map(NAMES.map((n) => [n, Object.freeze([{ id: 'x', name: n, address: '10.0.0.1:80' }])]));
        let i = 0;
        return { op: () => m.get(NAMES[i++ & 15]!) };
      },
      'Map.get via awaited Promise.resolve': () => {
        const m = new Map(NAMES.map((n) => [n, Object.freeze([{ id: 'x', name: n, address: '10.0.0.1:80' }])]));
        let i = 0;
        return { op: () => Promise.resolve(m.get(NAMES[i++ & 15]!)), async: true };
      },
      'RegistryCache.peek': async () => {
        const { cache, teardown } = await warmCache();
        let i = 0;
        return { op: () => cache.peek(NAMES[i++ & 15]!), teardown };
      },
      'RegistryCache.getService': async () => {
        const { cache, teardown } = await warmCache();
        let i = 0;
        return { op: () => cache.getService(NAMES[i++ & 15]!), teardown };
      },
      'RegistryCache.getService (before)': async () => {
        const { MemoryRegistry: Reg } = (await import(`${BASE}/registry/memory-registry.js`)) as { MemoryRegistry: new (o: object) => RegistryLike };
        const { RegistryCache: Cache } = (await import(`${BASE}/registry/registry-cache.js`)) as { RegistryCache: new (r: RegistryLike) => CacheLike };
        const reg = new Reg({ sweepIntervalMs: 0 });
        for (const name of NAMES) for (let i = 0; i < 8; i++) await reg.register({ id: `i${i}`, name, address: `10.0.0.${i}:80` });
        const cache = new Cache(reg);
        for (const name of NAMES) await cache.getService(name);
        let i = 0;
        return { op: () => cache.getService(NAMES[i++ & 15]!), teardown: async () => (await cache.close(), await reg.close()) };
      },
      'RegistryCache.getService awaited': async () => {
        const { cache, teardown } = await warmCache();
        let i = 0;
        return { op: () => cache.getService(NAMES[i++ & 15]!), async: true, teardown };
      },
    },
  });

/** latencies keeps per-op latencies and reports p50/p99 in ms. */
function latencies() {
  const xs: number[] = [];
  return {
    add: (ms: number) => xs.length < 200_000 && xs.push(ms),
    extra: () => {
      const s = [...xs].sort((a, b) => a - b);
      const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
      return { p50_ms: at(0.5), p99_ms: at(0.99), samples: s.length };
    },
  };
}

/**
 * An event subject: update the instance of one service after another, and wait until the cache has
 * applied it. The updates go to 8 services spread over all of them (what the algorithm costs: the
 * code before this round scanned every watcher on each event), or with `everyService` to each service
 * in turn (adds a cold service per event: cache misses that grow with the memory the services take).
 */
async function eventSubject(services: number, base: boolean, everyService = false) {
  const stride = Math.max(1, Math.floor(services / 8));
  const { reg, cache, teardown } = await watchedServices(services, base);
  let resolve: (() => void) | undefined;
  let want = '';
  cache.onChange((c) => {
    if (c.service === want) resolve?.();
  });
  let n = 0;
  // CPU time per event as well as wall time: on a loaded machine the process is descheduled between
  // the awaits, which wall time counts and CPU time does not
  let cpu0: NodeJS.CpuUsage | undefined;
  let n0 = 0;
  return {
    async: true,
    op: async () => {
      if (cpu0 === undefined) {
        cpu0 = process.cpuUsage();
        n0 = n;
      }
      const k = everyService ? n++ % services : ((n++ & 7) * stride) % services;
      want = `svc${k}`;
      const seen = new Promise<void>((r) => (resolve = r));
      await reg.register({ id: 'i0', name: want, address: '10.0.0.1:80', version: String(n) });
      await seen;
    },
    extra: () => {
      const used = process.cpuUsage(cpu0);
      return { cpu_us_per_event: (used.user + used.system) / (n - n0) };
    },
    teardown,
  };
}

if (runs('event') || (child !== undefined && EVENT.includes(child)))
  await bench('registry: one event (instance updated → RegistryCache applied) at 10 … 10 000 watched services', {
    baseline: 'event at 10 services',
    subjects: {
      ...Object.fromEntries(SCALE.map((n) => [`event at ${n} services`, () => eventSubject(n, false)])),
      // the code before this round, when its build is there
      ...(existsSync(BASE) ? { 'event at 10000 services (before)': () => eventSubject(10_000, true) } : {}),
      'event at 10000 services, each in turn': () => eventSubject(10_000, false, true),
    },
    targets: [
      atMost('event at 10 000 services ≤ 2× the event at 10 (wall time)', 'event at 10000 services', 'event at 10 services', 2),
      {
        label: 'event at 10 000 services ≤ 2× the event at 10 (CPU time)',
        check: (m) => {
          const value = m.extra('event at 10000 services', 'cpu_us_per_event') / m.extra('event at 10 services', 'cpu_us_per_event');
          return { value, ok: value <= 2, unit: '×' };
        },
      },
    ],
  });

if (runs('etcd') || (child !== undefined && !LOOKUP.includes(child) && !EVENT.includes(child) && !LAYOUT.includes(child)))
  await bench('registry: etcd put → change seen (loopback etcd, one key updated per op)', {
    baseline: 'etcd3 watch (bare)',
    durationMs: Number(process.env.BENCH_MS ?? 2_000),
    subjects: {
      'etcd3 watch (bare)': async () => {
        const etcd = await startEtcd();
        const client = new Etcd3({ hosts: etcd.endpoint });
        const watcher = await client.watch().key('/bench/k').create();
        let resolve: (() => void) | undefined;
        watcher.on('put', () => resolve?.());
        const lat = latencies();
        let n = 0;
        return {
          async: true,
          batch: 10,
          op: async () => {
            const seen = new Promise<void>((r) => (resolve = r));
            const t0 = performance.now();
            await client.put('/bench/k').value(String(++n));
            await seen;
            lat.add(performance.now() - t0);
          },
          extra: lat.extra,
          teardown: async () => {
            await watcher.cancel();
            client.close();
            await etcd.stop();
          },
        };
      },
      'RegistryCache via EtcdRegistry watch': async () => {
        const etcd = await startEtcd();
        const client = new Etcd3({ hosts: etcd.endpoint });
        const registry = new EtcdRegistry({ hosts: etcd.endpoint, prefix: '/bench' });
        const base: ServiceInstance = { id: 'i1', name: 'api', address: '127.0.0.1:9000' };
        await client.put('/bench/api/i1').value(JSON.stringify(base));
        const cache = new RegistryCache(registry);
        await cache.getService('api');
        let want = '';
        let resolve: (() => void) | undefined;
        cache.onChange((c) => {
          if (c.instances[0]?.version === want) resolve?.();
        });
        const lat = latencies();
        let n = 0;
        return {
          async: true,
          batch: 10,
          op: async () => {
            want = String(++n);
            const seen = new Promise<void>((r) => (resolve = r));
            const t0 = performance.now();
            await client.put('/bench/api/i1').value(JSON.stringify({ ...base, version: want }));
            await seen;
            lat.add(performance.now() - t0);
          },
          extra: lat.extra,
          teardown: async () => {
            await cache.close();
            await registry.close();
            client.close();
            await etcd.stop();
          },
        };
      },
    },
  });

/** The 8 instances of service `api` as layout `name` writes them: raw keys and values, and the registry's root. */
function layoutFixture(name: EtcdLayoutName, prefix: string) {
  const layout = etcdLayout('bench', name);
  const root = `${prefix}/`;
  const instances: ServiceInstance[] = Array.from({ length: 8 }, (_, i) => ({
    id: `api-${i}`,
    name: 'api',
    address: `10.0.0.${i + 1}:8080`,
    version: '1.0.0',
    metadata: { zone: 'eu-1', weight: '100', protocol: 'grpc' },
  }));
  // go-zero keys name a lease: any decimal will do for reading
  const kvs = instances.map((inst, i) => ({ key: layout.key(root, inst, String(7_587_869_420_219_453_957n + BigInt(i))), value: layout.encode(inst) }));
  return { layout, root, instances, kvs };
}

/** The etcd the parent started for the layout subjects (BULWARK_BENCH_ETCD), or one of the subject's own. */
async function layoutEtcd() {
  const shared = process.env.BULWARK_BENCH_ETCD;
  if (shared !== undefined) return { endpoint: shared, stop: async () => {} };
  return startEtcd();
}

async function layoutRegistry(name: EtcdLayoutName) {
  const etcd = await layoutEtcd();
  const client = new Etcd3({ hosts: etcd.endpoint });
  const prefix = `/bench-${process.pid}`;
  const f = layoutFixture(name, prefix);
  for (const kv of f.kvs) await client.put(kv.key).value(kv.value);
  const registry = new EtcdRegistry({ hosts: etcd.endpoint, prefix, layout: name });
  const teardown = async () => {
    await registry.close();
    await client.delete().prefix(`${prefix}/`).exec();
    client.close();
    await etcd.stop();
  };
  return { client, f, registry, teardown };
}

/** cpuPerOp counts the client process's CPU time per op from the first measured op on. */
function cpuPerOp() {
  let cpu0: NodeJS.CpuUsage | undefined;
  let n = 0;
  return {
    tick: () => (cpu0 === undefined ? (cpu0 = process.cpuUsage()) : n++),
    extra: () => {
      const used = process.cpuUsage(cpu0);
      return { cpu_us_per_op: (used.user + used.system) / Math.max(1, n) };
    },
  };
}

const layoutRuns = runs('layout') || (child !== undefined && LAYOUT.includes(child));
const sharedEtcd = runs('layout') && child === undefined && process.env.BULWARK_BENCH_ETCD === undefined ? await startEtcd() : undefined;
if (sharedEtcd !== undefined) process.env.BULWARK_BENCH_ETCD = sharedEtcd.endpoint;
const byCpu = (label: string, subject: string, than: string) => ({
  label,
  check: (m: { extra(s: string, k: string): number }) => {
    const value = m.extra(subject, 'cpu_us_per_op') / m.extra(than, 'cpu_us_per_op');
    return { value, ok: value <= 1.2, unit: '×' };
  },
});
const byP50 = (label: string, subject: string, than: string) => ({
  label,
  check: (m: { extra(s: string, k: string): number }) => {
    const value = m.extra(subject, 'p50_ms') / m.extra(than, 'p50_ms');
    return { value, ok: value <= 1.2, unit: '×' };
  },
});

if (layoutRuns)
  await bench('registry: per etcd layout — lookup, watch event, codec (bulwark is the baseline)', {
    baseline: 'lookup (bulwark)',
    durationMs: Number(process.env.BENCH_MS ?? 2_000),
    subjects: Object.fromEntries(
      LAYOUTS.flatMap((name) => [
        [
          `lookup (${name})`,
          async () => {
            const { registry, teardown } = await layoutRegistry(name);
            const lat = latencies();
            const cpu = cpuPerOp();
            return {
              async: true,
              batch: 20,
              op: async () => {
                cpu.tick();
                const t0 = performance.now();
                await registry.getService('api');
                lat.add(performance.now() - t0);
              },
              extra: () => ({ ...lat.extra(), ...cpu.extra() }),
              teardown,
            };
          },
        ],
        [
          `watch event (${name})`,
          async () => {
            const { client, f, registry, teardown } = await layoutRegistry(name);
            const cache = new RegistryCache(registry);
            await cache.getService('api');
            let want = '';
            let resolve: (() => void) | undefined;
            cache.onChange((c) => {
              if (c.instances.some((i) => i.address === want)) resolve?.();
            });
            const lat = latencies();
            const cpu = cpuPerOp();
            let n = 0;
            return {
              async: true,
              batch: 10,
              // instance 0 moves to a new address each op: an update in the bulwark and go-micro layouts, a delete and a create in go-zero's
              op: async () => {
                cpu.tick();
                want = `10.0.1.${(++n % 200) + 1}:8080`;
                const seen = new Promise<void>((r) => (resolve = r));
                const t0 = performance.now();
                await client.put(f.kvs[0]!.key).value(f.layout.encode({ ...f.instances[0]!, address: want }));
                await seen;
                lat.add(performance.now() - t0);
              },
              extra: () => ({ ...lat.extra(), ...cpu.extra() }),
              teardown: async () => {
                await cache.close();
                await teardown();
              },
            };
          },
        ],
        [
          `decode (${name})`,
          () => {
            const f = layoutFixture(name, '/bench');
            const kvs = f.kvs.map((kv) => ({ key: Buffer.from(kv.key), value: kv.value, mod_revision: '1' }) as IKeyValue);
            let i = 0;
            return { op: () => f.layout.decode(f.root, kvs[i++ & 7]!) };
          },
        ],
      ]),
    ),
    targets: (['go-zero', 'go-micro'] as const).flatMap((l) => [
      byCpu(`lookup (${l}) within 1.2× of bulwark, CPU per op`, `lookup (${l})`, 'lookup (bulwark)'),
      byP50(`lookup (${l}) within 1.2× of bulwark, p50`, `lookup (${l})`, 'lookup (bulwark)'),
      byCpu(`watch event (${l}) within 1.2× of bulwark, CPU per op`, `watch event (${l})`, 'watch event (bulwark)'),
      byP50(`watch event (${l}) within 1.2× of bulwark, p50`, `watch event (${l})`, 'watch event (bulwark)'),
    ]),
  });
await sharedEtcd?.stop();
