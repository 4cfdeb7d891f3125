/**
 * Scale benchmarks: what one update and one pick cost at N = 10 / 100 / 1 000 / 10 000 instances,
 * every point in its own process (the harness runs each subject in its own child).
 *
 * 1. Updates through a `Balancer`, each followed by a pick (a strategy applies a new list on its next
 *    pick): an instance joining or leaving (`update()` with N + 1, then N instances), an instance
 *    ejected by outlier detection or returning (a failed call, then its ejection ending), and one
 *    instance's weight changing. The peer is the `hashring` npm package adding and removing a
 *    server (it rebuilds its continuum), as the RingHash picker did before it merged points in.
 *    Each subject also reports the median and p99 wall time of single updates and the median CPU time
 *    of one (on a loaded machine the p99 is mostly the scheduler). Target: the median update ≤ 5 ms
 *    at 10 000 instances, for every strategy and kind of update.
 * 2. Picks by each strategy alone (LeastRequest with a call in flight to every instance, where a scan
 *    would be slowest). Targets: a pick at 10 000 within 3× its cost at 10 for the O(1) strategies,
 *    within 6× for the O(log n) ones (smooth WRR's tree, the ring's binary search).
 * 3. RingHash's ring at its bound (`maxRingSize` 2²⁰): points per instance and the busiest instance's
 *    share of the hash space ÷ the mean (`maxShare`, exact arcs, no sampling). And its changes of
 *    scale (halving every instance's points when the ring would pass 2²⁰, doubling them back), with the
 *    first build of 13 107 instances against its floor (hashing and sorting the points alone).
 *
 *   BENCH_RUNS=3 BENCH_MS=300 npm run bench -- scale
 */
import { createRequire } from 'node:module';
import { atMost, bench, type Subject, type Target } from './harness.js';
import { Balancer, LeastRequest, P2C, Random, RingHash, RoundRobin, SmoothWeightedRoundRobin, type Picker, type StrategyName } from '../src/balancer/index.js';
import { ManualClock } from '../src/core/clock.js';
import { hash32 } from '../src/core/hash.js';
import type { ServiceInstance } from '../src/registry/types.js';

/** The `hashring` npm package (no type declarations), loaded by the subjects that measure it. */
type HashRingPkg = new (servers: string[]) => { add(s: string): unknown; remove(s: string): unknown; get(key: string): string | undefined };
const hashRingPkg = () => createRequire(import.meta.url)('hashring') as HashRingPkg;

const SIZES = [10, 100, 1_000, 10_000];
const STRATEGIES: StrategyName[] = ['round-robin', 'random', 'weighted-round-robin', 'ring-hash', 'p2c', 'least-request'];
/** Updates must not block the loop for longer than this at 10 000 instances. */
const UPDATE_BUDGET_MS = 5;

const instance = (i: number, weight = 1 + (i % 3)): ServiceInstance => {
  const address = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}:8080`;
  return Object.freeze({ id: address, name: 'payments', address, metadata: Object.freeze({ weight: String(weight) }) });
};
const fleet = (n: number) => Object.freeze(Array.from({ length: n }, (_, i) => instance(i)));

/** 64 Ki distinct flat keys, cycled. */
const KEYS = 1 << 16;
let keys: string[] | undefined;
const keyAt = (i: number) => (keys ??= Array.from({ length: KEYS }, (_, k) => Buffer.from(`user:${k * 7919}:session`, 'latin1').toString('latin1')))[i & (KEYS - 1)]!;

/** The most per-op samples an update subject keeps (its ops take 1 µs … 10 ms). */
const MAX_SAMPLES = 20_000;

/**
 * alternate calls `a` and `b` in turn (one op is one update) and times every call, wall and CPU: on a
 * shared machine the mean of a few ms-long ops is at the mercy of the scheduler, so the subject also
 * reports the median and p99 of single updates and the median CPU time of one (`cpuMs`).
 */
function alternate(a: () => void, b: () => void, teardown?: () => unknown): Subject {
  let odd = false;
  const wall: number[] = [];
  const cpu: number[] = [];
  const op = () => {
    const t = performance.now();
    const c = process.cpuUsage();
    if ((odd = !odd)) a();
    else b();
    if (wall.length < MAX_SAMPLES) {
      const u = process.cpuUsage(c);
      cpu.push((u.user + u.system) / 1000);
      wall.push(performance.now() - t);
    }
  };
  const q = (xs: number[], f: number) => [...xs].sort((x, y) => x - y)[Math.min(xs.length - 1, Math.floor(xs.length * f))] ?? NaN;
  // The first half of the samples includes the harness's warm-up (code not yet optimised): use the second.
  const late = (xs: number[]) => xs.slice(xs.length >> 1);
  return { batch: 1, op, teardown, extra: () => ({ p50Ms: q(late(wall), 0.5), p99Ms: q(late(wall), 0.99), cpuMs: q(late(cpu), 0.5) }) };
}

function updateSubjects(): Record<string, () => Subject> {
  const out: Record<string, () => Subject> = {};
  for (const strategy of STRATEGIES) {
    for (const n of SIZES) {
      // Ring-hash picks with a key; the others without.
      const key = strategy === 'ring-hash' ? 'user:1:session' : undefined;
      out[`${strategy} join/leave N=${n}`] = () => {
        const list = fleet(n);
        const grown = Object.freeze([...list, instance(n)]);
        const b = new Balancer({ instances: list, strategy, clock: new ManualClock() });
        b.pick(key);
        return alternate(() => (b.update(grown), b.pick(key)), () => (b.update(list), b.pick(key)), () => b.close());
      };
      out[`${strategy} eject/return N=${n}`] = () => {
        const list = fleet(n);
        const clock = new ManualClock();
        const b = new Balancer({ instances: list, strategy, clock, outlier: { consecutiveFailures: 1, baseEjectionMs: 1_000, maxEjectionMs: 1_000, maxEjectionPercent: 100 } });
        b.pick(key);
        const victim = list[n >> 1]!;
        const failed = { ok: false, latencyMs: 1 };
        return alternate(
          () => (b.report(victim, failed), b.pick(key)),
          () => (clock.advance(1_000), b.pick(key)),
          () => b.close(),
        );
      };
      if (strategy === 'weighted-round-robin' || strategy === 'ring-hash') {
        out[`${strategy} weight change N=${n}`] = () => {
          const list = fleet(n);
          const k = n >> 1;
          const heavier = Object.freeze(list.map((x, i) => (i === k ? instance(k, 5) : x)));
          const b = new Balancer({ instances: list, strategy, clock: new ManualClock() });
          b.pick(key);
          return alternate(() => (b.update(heavier), b.pick(key)), () => (b.update(list), b.pick(key)), () => b.close());
        };
      }
    }
  }
  // hashring rebuilds its whole continuum (md5 of 160 points per server) on add and remove: ~15 s per
  // update at 10 000 servers on the bench machine, too slow to run here.
  for (const n of SIZES.filter((s) => s <= 1_000)) {
    out[`hashring (npm) add/remove N=${n}`] = () => {
      const HashRingPkg = hashRingPkg();
      const ring = new HashRingPkg(fleet(n).map((x) => x.id));
      const extra = instance(n).id;
      return alternate(() => (ring.add(extra), ring.get('k')), () => (ring.remove(extra), ring.get('k')));
    };
  }
  return out;
}

function pickSubjects(): Record<string, () => Subject> {
  const makers: Record<string, () => Picker> = {
    RoundRobin: () => new RoundRobin(),
    Random: () => new Random(),
    SmoothWeightedRoundRobin: () => new SmoothWeightedRoundRobin(),
    RingHash: () => new RingHash(),
    P2C: () => new P2C(),
    'LeastRequest (all busy)': () => new LeastRequest(),
  };
  const out: Record<string, () => Subject> = {};
  for (const [name, make] of Object.entries(makers)) {
    for (const n of SIZES) {
      out[`${name} N=${n}`] = () => {
        const list = fleet(n);
        const p = make();
        if (name.startsWith('RingHash')) {
          keyAt(0);
          let i = 0;
          p.pick(list, 'k');
          return { op: () => p.pick(list, keyAt(i++)) };
        }
        p.pick(list);
        if (name.startsWith('LeastRequest')) for (const x of list) p.start!(x);
        return { op: () => p.pick(list) };
      };
    }
  }
  return out;
}

function ringSubjects(): Record<string, () => Subject> {
  const out: Record<string, () => Subject> = {};
  for (const n of SIZES) {
    out[`RingHash ring N=${n}`] = () => {
      const list = Array.from({ length: n }, (_, i) => instance(i, 1)); // weight 1: equal shares
      const p = new RingHash();
      const start = process.hrtime.bigint();
      p.pick(list, 'k');
      const buildMs = Number(process.hrtime.bigint() - start) / 1e6;
      const shares = p.ring.shares();
      const maxShare = Math.max(...shares.values()) * n;
      const stats = p.stats();
      let i = 0;
      return { op: () => p.pick(list, keyAt(i++)), extra: () => ({ points: stats.points, perInstance: stats.points / n, maxShare, firstBuildMs: buildMs }) };
    };
  }
  // A change of scale: the total weight crossing the ring's bound re-places points (halving each
  // instance's points past 2^20 at 13 108 instances of 80 points; doubling them again when the list falls
  // to 6 553). Each happens once per child, so the subject reports the times of the first and of a
  // second round (code then optimised); the op is a plain pick. Floor: hashing and sorting the
  // points of the first build alone (what any ring must do), against the first build itself.
  out['RingHash rescale at 2^20 points'] = () => {
    const big = Array.from({ length: 13_107 }, (_, i) => instance(i, 1));
    const over = [...big, instance(13_107, 1)];
    const small = big.slice(0, 6_553);
    const p = new RingHash();
    const time = (f: () => void) => {
      const t = performance.now();
      f();
      return performance.now() - t;
    };
    const buildMs = time(() => p.pick(big, 'k'));
    const rounds = [0, 1].map(() => ({
      halveMs: time(() => p.pick(over, 'k')),
      doubleMs: time(() => p.pick(small, 'k')),
      regrowMs: time(() => p.pick(big, 'k')),
    }));
    const points = p.stats().points;
    const floorMs = time(() => {
      const packed = new Float64Array(points);
      let j = 0;
      for (const x of big) for (let r = 0; r < points / big.length; r++) packed[j++] = hash32(`${r}-${x.id}`) * 2 ** 21 + (j & 0xfffff);
      packed.sort();
    });
    let i = 0;
    return {
      op: () => p.pick(big, keyAt(i++)),
      extra: () => ({ buildMs, floorMs, halveMs: rounds[0]!.halveMs, doubleMs: rounds[0]!.doubleMs, halveWarmMs: rounds[1]!.halveMs, doubleWarmMs: rounds[1]!.doubleMs }),
    };
  };
  return out;
}

/** within: the median single update of `subject` takes at most `maxMs` (wall time; see `alternate`). */
const within = (label: string, subject: string, maxMs: number): Target => ({
  label,
  check: (m) => {
    const ms = m.extra(subject, 'p50Ms');
    return { value: ms, ok: ms <= maxMs, unit: ' ms' };
  },
});

const updates = updateSubjects();
const updateTargets: Target[] = Object.keys(updates)
  .filter((s) => s.endsWith('N=10000') && !s.startsWith('hashring'))
  .map((s) => within(`${s.replace(' N=10000', '')}: median update ≤ ${UPDATE_BUDGET_MS} ms at 10 000`, s, UPDATE_BUDGET_MS));
const picks = pickSubjects();
/**
 * O(log n) pickers may grow with the depth of their search: log₂ 10 000 ÷ log₂ 10 = 4, plus cache
 * misses. Smooth WRR reads a precomputed cycle while the total weight is ≤ 1 024 (N = 10, 100 here),
 * so its tree is compared between 1 000 and 10 000 instances.
 */
const pickTargets: Target[] = [...new Set(Object.keys(picks).map((s) => s.replace(/ N=\d+$/, '')))].map((name) =>
  name === 'SmoothWeightedRoundRobin'
    ? atMost(`${name} pick at 10 000 ≤ 2× at 1 000 (O(log n) tree)`, `${name} N=10000`, `${name} N=1000`, 2)
    : name === 'RingHash'
      ? atMost(`${name} pick at 10 000 ≤ 6× at 10 (O(log n))`, `${name} N=10000`, `${name} N=10`, 6)
      : atMost(`${name} pick at 10 000 ≤ 3× at 10 (O(1))`, `${name} N=10000`, `${name} N=10`, 3),
);

const childAt = process.argv.indexOf('--child');
const child = childAt >= 0 ? process.argv[childAt + 1] : undefined;
if (child === undefined || child in updates) {
  await bench('scale: one update (+ the pick that applies it) per op', { subjects: updates, targets: updateTargets });
}
if (child === undefined || child in picks) {
  await bench('scale: one pick per op', { subjects: picks, targets: pickTargets });
}
const rings = ringSubjects();
if (child === undefined || child in rings) {
  await bench('scale: RingHash at its bound (maxRingSize 2^20): keyed pick, points, balance', {
    subjects: rings,
    targets: [{ label: 'busiest instance ≤ 1.6 × the mean share at 10 000', check: (m) => { const v = m.extra('RingHash ring N=10000', 'maxShare'); return { value: v, ok: v <= 1.6, unit: '×' }; } }],
  });
}
