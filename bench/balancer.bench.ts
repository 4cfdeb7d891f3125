/**
 * Balancer benchmarks.
 *
 * 1. `pick()` with 10 instances for every strategy (target ≥ 10 M/s for RoundRobin, smooth WRR and
 *    P2C), against a bare array index; plus a full Balancer pick + report.
 * 2. RingHash lookups of distinct keys against the `hashring` npm package (md5, 160 points per server)
 *    with the same 10 members (target ≥ 10×), with each one's evenness over the same 200 000 keys
 *    (`maxShare` = the busiest member's keys ÷ the mean, target ≤ 1.10).
 *
 *   BENCH_RUNS=5 node --import tsx bench/balancer.bench.ts
 */
import { createRequire } from 'node:module';
import { bench, fasterBy, type Subject, type Target } from './harness.js';
import { Balancer, LeastRequest, P2C, Random, RingHash, RoundRobin, SmoothWeightedRoundRobin } from '../src/balancer/index.js';
import { HashRing } from '../src/core/hash-ring.js';
import type { ServiceInstance } from '../src/registry/types.js';

/** The `hashring` npm package (no type declarations): the peer RingHash is measured against. */
const HashRingPkg = createRequire(import.meta.url)('hashring') as new (servers: string[]) => { get(key: string): string | undefined };

const N = 10;
const list: readonly ServiceInstance[] = Object.freeze(
  Array.from({ length: N }, (_, i) =>
    Object.freeze({ id: `10.0.0.${i}:8080`, name: 'payments', address: `10.0.0.${i}:8080`, metadata: { weight: String(1 + (i % 3)) } }),
  ),
);
const ids = list.map((i) => i.id);
/** The same instances without weights: RingHash gives each its share of the ring by weight, and evenness is measured on equal ones. */
const plain: readonly ServiceInstance[] = Object.freeze(list.map((i) => Object.freeze({ id: i.id, name: i.name, address: i.address })));

/** 1 M distinct keys, cycled: more than hashring's 5 000-entry lookup cache, so every lookup hashes. */
const KEYS = 1 << 20;
let keys: string[] | undefined;
// Flat strings, as keys parsed from a request are (a template literal would leave V8 cons strings that
// every hash function would first have to flatten).
const keyAt = (i: number) =>
  (keys ??= Array.from({ length: KEYS }, (_, k) => Buffer.from(`user:${k * 7919}:session`, 'latin1').toString('latin1')))[i & (KEYS - 1)]!;
const EVEN_KEYS = 200_000;

function maxShare(lookup: (key: string) => string): number {
  const counts = new Map<string, number>();
  for (let i = 0; i < EVEN_KEYS; i++) {
    const m = lookup(keyAt(i));
    counts.set(m, (counts.get(m) ?? 0) + 1);
  }
  return Math.max(...counts.values()) / (EVEN_KEYS / N);
}

const picker = (p: { pick(l: readonly ServiceInstance[], k?: string): ServiceInstance }): Subject => ({ op: () => p.pick(list) });

const pickSubjects: Record<string, () => Subject> = {
  'array index (baseline)': () => {
    let i = 0;
    return { op: () => list[i++ % N] };
  },
  RoundRobin: () => picker(new RoundRobin()),
  Random: () => picker(new Random()),
  SmoothWeightedRoundRobin: () => picker(new SmoothWeightedRoundRobin()),
  P2C: () => picker(new P2C()),
  'P2C pick+start+report': () => {
    const p = new P2C();
    const outcome = { ok: true, latencyMs: 5 };
    return {
      op: () => {
        const x = p.pick(list);
        p.start(x);
        p.report(x, outcome);
      },
    };
  },
  LeastRequest: () => picker(new LeastRequest()),
  'Balancer(p2c) pick+report': () => {
    const b = new Balancer({ instances: list, strategy: 'p2c' });
    const outcome = { ok: true, latencyMs: 5 };
    return {
      op: () => b.report(b.pick(), outcome),
      teardown: () => b.close(),
    };
  },
};

const ringSubjects: Record<string, () => Subject> = {
  'hashring.get (npm, md5)': () => {
    const ring = new HashRingPkg(ids);
    let i = 0;
    return { op: () => ring.get(keyAt(i++)), extra: () => ({ maxShare: maxShare((k) => ring.get(k)!) }) };
  },
  'RingHash.pick (1 280 vnodes)': () => {
    const p = new RingHash();
    let i = 0;
    return { op: () => p.pick(plain, keyAt(i++)), extra: () => ({ maxShare: maxShare((k) => p.pick(plain, k).id) }) };
  },
  'RingHash.pick (160 vnodes)': () => {
    const p = new RingHash({ replicas: 160, minRingSize: 1 });
    let i = 0;
    return { op: () => p.pick(plain, keyAt(i++)), extra: () => ({ maxShare: maxShare((k) => p.pick(plain, k).id) }) };
  },
  'RingHash.pick bounded (c = 1.25)': () => {
    const p = new RingHash({ boundedLoad: true });
    const outcome = { ok: true, latencyMs: 1 };
    let i = 0;
    return {
      op: () => {
        const x = p.pick(plain, keyAt(i++));
        p.start(x);
        p.report(x, outcome);
      },
    };
  },
  'HashRing.get (core, 1 280 vnodes)': () => {
    const ring = new HashRing({ replicas: 1280 });
    ring.set(ids);
    let i = 0;
    return { op: () => ring.get(keyAt(i++)) };
  },
};

/** At least 10 M picks/s: at most 100 ns per pick. */
const tenMillion = (subject: string): Target => ({
  label: `${subject} ≥ 10 M picks/s`,
  check: (m) => {
    const v = 1e3 / m.ns(subject);
    return { value: v, ok: v >= 10, unit: ' M/s' };
  },
});
const pickTargets = ['RoundRobin', 'SmoothWeightedRoundRobin', 'P2C'].map(tenMillion);
const ringTargets: Target[] = [
  fasterBy('RingHash.pick ≥ 10× hashring.get', 'RingHash.pick (1 280 vnodes)', 'hashring.get (npm, md5)', 10),
  {
    label: 'RingHash (1 280 vnodes) busiest member ≤ 1.10 × the mean',
    check: (m) => {
      const v = m.extra('RingHash.pick (1 280 vnodes)', 'maxShare');
      return { value: v, ok: v <= 1.1, unit: '×' };
    },
  },
];

const childAt = process.argv.indexOf('--child');
const child = childAt >= 0 ? process.argv[childAt + 1] : undefined;
if (child === undefined || child in pickSubjects) {
  await bench(`balancer: pick() with ${N} instances`, { baseline: 'array index (baseline)', subjects: pickSubjects, targets: pickTargets });
}
if (child === undefined || child in ringSubjects) {
  keyAt(0); // build the keys before measuring
  await bench(`balancer: ring-hash lookups of distinct keys, ${N} members`, {
    baseline: 'hashring.get (npm, md5)',
    subjects: ringSubjects,
    targets: ringTargets,
  });
}
