/**
 * Registry numbers (issue 3 §6):
 * 1. RegistryCache.getService on a fresh entry (target ≥ 5 M lookups/s), against a bare Map.get.
 * 2. etcd put → RegistryCache updated through its watch, p50/p99, against a bare etcd3 watch's
 *    put → event latency in the same run (target within 1.5×). Each subject starts its own etcd.
 */
import { Etcd3 } from 'etcd3';
import { bench } from './harness.js';
import { MemoryRegistry } from '../src/registry/memory-registry.js';
import { EtcdRegistry } from '../src/registry/etcd-registry.js';
import { RegistryCache } from '../src/registry/registry-cache.js';
import type { ServiceInstance } from '../src/registry/types.js';
import { startEtcd } from '../test/support/etcd.js';

const NAMES = Array.from({ length: 16 }, (_, i) => `svc${i}`);

async function warmCache() {
  const reg = new MemoryRegistry({ sweepIntervalMs: 0 });
  for (const name of NAMES) for (let i = 0; i < 8; i++) await reg.register({ id: `i${i}`, name, address: `10.0.0.${i}:80` });
  const cache = new RegistryCache(reg);
  for (const name of NAMES) await cache.getService(name);
  return { cache, teardown: async () => (await cache.close(), await reg.close()) };
}

// The harness runs each subject in a child that re-runs this file: run only the bench that has the subject.
const child = process.argv.includes('--child') ? process.argv[process.argv.indexOf('--child') + 1] : undefined;
const LOOKUP = ['Map.get', 'Map.get via awaited Promise.resolve', 'RegistryCache.peek', 'RegistryCache.getService', 'RegistryCache.getService awaited'];

if (child === undefined || LOOKUP.includes(child)) await bench('registry: lookup of a fresh entry (16 services × 8 instances)', {
  baseline: 'Map.get',
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

if (child === undefined || !LOOKUP.includes(child)) await bench('registry: etcd put → change seen (loopback etcd, one key updated per op)', {
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
