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
 *    share of the hash space ÷ the mean (`maxShare`, exact arcs, no sampling). And the updates that
 *    re-place every point, built in slices on timer turns while picks use the old ring: the first
 *    list of 13 107 instances (2²⁰ points), a change of scale past the bound (13 108: every instance
 *    halves) and back under it (6 553: every instance doubles). Each runs on the real event loop; the
 *    subject reports the slowest slice and the p99 of slices (wall and CPU time: on a shared machine the
 *    wall time of a slice includes other processes'), the number of slices and the time until the
 *    new ring is in. Targets: the p90 slice ≤ 5 ms CPU (the slowest is printed beside the slowest of
 *    as many runs of a fixed 1 ms loop, `noiseMaxCpuMs`: on the shared machine both are mostly the
 *    machine); the pick that hands over a list where one instance joined and every point halves ≤ 5 ms;
 *    the first build's CPU time against its floor (hashing the points' names and sorting them
 *    natively, what the ring did before: ≤ 1×). A first list of 13 107 instances is a bulk update:
 *    its pick syncs 13 107 new entries at once (`pickMs`, and `coldPickMs` when it is the process's
 *    first, code not yet compiled); only its ring is built in slices.
 *
 * 4. The instance table every picker (and the Balancer) keeps, synced with a new list of 10 000: the
 *    same instances in a new array, one added, one removed, one re-weighted (a new object), every
 *    instance a new equal object (a registry re-list that keeps no identity) and a whole new list
 *    (10 000 new ids). A list differing in thousands of instances is taken in in slices on timer turns
 *    (a ManualClock here, its turns timed one by one); the op is the sync, every slice and the sync
 *    that hands it over. Each subject reports the CPU time of the longest turn (`maxTurnCpuMs`, the
 *    median over ops), the sync call itself (`callCpuMs`) and the turns taken. Target: the longest
 *    turn ≤ 5 ms for every kind of list.
 *
 * 5. A Balancer of each strategy taking in a list of 10 000 over timer turns (a ManualClock, its turns
 *    timed one by one, a keyed pick after each): a whole new list (10 000 new ids) and a first list
 *    (until `ready()` resolves). Each subject reports the longest turn once each turn's noise is
 *    filtered out (the least over the ops of each turn, then the longest): `maxLeastMs` in wall time,
 *    `maxLeastCpuMs` in CPU time (which counts the collector's helper threads too), the longest turn
 *    noise included (`maxTurnCpuMs`, the median over ops) and the turns taken. Target: `maxLeastMs`
 *    ≤ 5 ms.
 *
 *   BENCH_RUNS=3 BENCH_MS=300 npm run bench -- scale
 */
import { createRequire } from 'node:module';
import { atMost, bench, type Subject, type Target } from './harness.js';
import { Balancer, LeastRequest, P2C, Random, RingHash, RoundRobin, SmoothWeightedRoundRobin, type Picker, type StrategyName } from '../src/balancer/index.js';
import { InstanceTable, type Entry } from '../src/balancer/instance-table.js';
import { ManualClock, systemClock, type Clock } from '../src/core/clock.js';
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
const keyAt = (i: number) =>
  (keys ??= Array.from({ length: KEYS }, (_, k) => Buffer.from(`user:${k * 7919}:session`, 'latin1').toString('latin1')))[i & (KEYS - 1)]!;

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

/** settle makes the balancer's strategy build its state for its first list (a ring: all its slices). */
function settle(b: Balancer, clock: ManualClock, key: string | undefined): void {
  b.pick(key);
  if (b.picker instanceof RingHash) while (b.picker.stats().rebuilding) clock.advance(1);
}

/** built resolves once `p` has no rebuild running (its slices run on the real event loop). */
async function built(p: RingHash): Promise<void> {
  while (p.stats().rebuilding) await new Promise((r) => setTimeout(r, 1));
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
        const clock = new ManualClock();
        const b = new Balancer({ instances: list, strategy, clock });
        settle(b, clock, key);
        return alternate(
          () => (b.update(grown), b.pick(key)),
          () => (b.update(list), b.pick(key)),
          () => b.close(),
        );
      };
      out[`${strategy} eject/return N=${n}`] = () => {
        const list = fleet(n);
        const clock = new ManualClock();
        const b = new Balancer({
          instances: list,
          strategy,
          clock,
          outlier: { consecutiveFailures: 1, baseEjectionMs: 1_000, maxEjectionMs: 1_000, maxEjectionPercent: 100 },
        });
        settle(b, clock, key);
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
          const clock = new ManualClock();
          const b = new Balancer({ instances: list, strategy, clock });
          settle(b, clock, key);
          return alternate(
            () => (b.update(heavier), b.pick(key)),
            () => (b.update(list), b.pick(key)),
            () => b.close(),
          );
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
      return alternate(
        () => (ring.add(extra), ring.get('k')),
        () => (ring.remove(extra), ring.get('k')),
      );
    };
  }
  return out;
}

function pickSubjects(): Record<string, () => Subject | Promise<Subject>> {
  const makers: Record<string, () => Picker> = {
    RoundRobin: () => new RoundRobin(),
    Random: () => new Random(),
    SmoothWeightedRoundRobin: () => new SmoothWeightedRoundRobin(),
    RingHash: () => new RingHash(),
    P2C: () => new P2C(),
    'LeastRequest (all busy)': () => new LeastRequest(),
  };
  const out: Record<string, () => Subject | Promise<Subject>> = {};
  for (const [name, make] of Object.entries(makers)) {
    for (const n of SIZES) {
      out[`${name} N=${n}`] = async () => {
        const list = fleet(n);
        const p = make();
        if (p instanceof RingHash) {
          keyAt(0);
          let i = 0;
          p.pick(list, 'k');
          await built(p);
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

/** SliceClock is the system clock timing every timer callback it runs (a rebuild's slices), wall and CPU. */
class SliceClock implements Clock {
  wall: number[] = [];
  cpu: number[] = [];
  now = systemClock.now;
  setInterval = systemClock.setInterval;
  clearTimeout = systemClock.clearTimeout;
  setTimeout(fn: () => void, ms: number) {
    return systemClock.setTimeout(() => {
      const t = performance.now();
      const c = process.cpuUsage();
      fn();
      const u = process.cpuUsage(c);
      this.cpu.push((u.user + u.system) / 1000);
      this.wall.push(performance.now() - t);
    }, ms);
  }
  /** take answers the slices timed since the last take: how many, the median, p90 and slowest, wall and CPU. */
  take() {
    const q = (xs: number[], f: number) => [...xs].sort((x, y) => x - y)[Math.min(xs.length - 1, Math.floor(xs.length * f))] ?? NaN;
    const r = { slices: this.wall.length, maxMs: Math.max(...this.wall), cpuMs: q(this.cpu, 0.5), p90CpuMs: q(this.cpu, 0.9), maxCpuMs: Math.max(...this.cpu) };
    this.wall = [];
    this.cpu = [];
    return r;
  }
}

/**
 * noise answers the slowest CPU time of `n` runs of a fixed ~1 ms loop: what the machine alone adds to
 * the slowest of n slices (on the shared bench machine, 2 cores at load ~14, it is 5–15 ms).
 */
function noise(n: number): number {
  const a = new Uint32Array(1 << 16);
  let max = 0;
  for (let r = 0; r < n; r++) {
    const c = process.cpuUsage();
    for (let k = 0; k < 20; k++) for (let i = 0; i < a.length; i++) a[i] = (a[i]! * 31 + i) | 0;
    const u = process.cpuUsage(c);
    max = Math.max(max, (u.user + u.system) / 1000);
  }
  return max;
}

function ringSubjects(): Record<string, () => Subject | Promise<Subject>> {
  const out: Record<string, () => Subject | Promise<Subject>> = {};
  for (const n of SIZES) {
    out[`RingHash ring N=${n}`] = async () => {
      const list = Array.from({ length: n }, (_, i) => instance(i, 1)); // weight 1: equal shares
      const p = new RingHash();
      p.pick(list, 'k');
      await built(p);
      const shares = p.ring.shares();
      const maxShare = Math.max(...shares.values()) * n;
      const stats = p.stats();
      let i = 0;
      return { op: () => p.pick(list, keyAt(i++)), extra: () => ({ points: stats.points, perInstance: stats.points / n, maxShare }) };
    };
  }
  // The updates that re-place every point, each measured on the real event loop: the pick that hands
  // the list over (it decides, and starts the rebuild), then every slice until the new ring is in.
  const big = () => Array.from({ length: 13_107 }, (_, i) => instance(i, 1));
  const rebuild = async (p: RingHash, clock: SliceClock, list: readonly ServiceInstance[]) => {
    const t = performance.now();
    const c = process.cpuUsage();
    p.pick(list, 'k');
    const pickMs = performance.now() - t;
    const v = process.cpuUsage(c);
    await built(p);
    const u = process.cpuUsage(c);
    return { pickMs, pickCpuMs: (v.user + v.system) / 1000, doneMs: performance.now() - t, totalCpuMs: (u.user + u.system) / 1000, ...clock.take() };
  };
  out['RingHash first build of 13 107 instances (2^20 points)'] = async () => {
    const clock = new SliceClock();
    const cold = await rebuild(new RingHash({ clock }), clock, big()); // the first in the process: code not yet compiled
    const p = new RingHash({ clock });
    const list = big();
    const r = await rebuild(p, clock, list);
    // Floor: hashing the points' names and sorting them natively (packed with their index), the way
    // the ring built itself before it was sliced; CPU time.
    const points = p.stats().points;
    const c = process.cpuUsage();
    const packed = new Float64Array(points);
    let j = 0;
    for (const x of list) for (let k = 0; k < points / list.length; k++) packed[j++] = hash32(`${k}-${x.id}`) * 2 ** 21 + (j & 0xfffff);
    packed.sort();
    const u = process.cpuUsage(c);
    const noiseMaxCpuMs = noise(r.slices);
    let i = 0;
    return {
      op: () => p.pick(list, keyAt(i++)),
      extra: () => ({ ...r, coldPickMs: cold.pickMs, coldMaxCpuMs: cold.maxCpuMs, floorCpuMs: (u.user + u.system) / 1000, noiseMaxCpuMs }),
    };
  };
  // A change of scale: the total weight crossing the ring's bound re-places points (halving each
  // instance's points past 2^20 at 13 108 instances of 80; doubling them again when the list falls to
  // 6 553). Each happens once per child, so the subject measures a first and a second round (code then
  // optimised) and reports the second; the op is a plain pick.
  out['RingHash change of scale at 2^20 points (halve, double)'] = async () => {
    const clock = new SliceClock();
    const p = new RingHash({ clock });
    const list = big();
    const over = [...list, instance(13_107, 1)];
    const small = list.slice(0, 6_553);
    await rebuild(p, clock, list);
    const rounds = [];
    for (let k = 0; k < 2; k++)
      rounds.push({ halve: await rebuild(p, clock, over), double: await rebuild(p, clock, small), regrow: await rebuild(p, clock, list) });
    const last = rounds[1]!;
    let i = 0;
    return {
      op: () => p.pick(list, keyAt(i++)),
      extra: () => ({
        halvePickMs: last.halve.pickMs,
        halvePickCpuMs: last.halve.pickCpuMs,
        halveSlices: last.halve.slices,
        halveCpuMs: last.halve.cpuMs,
        halveP90CpuMs: last.halve.p90CpuMs,
        halveMaxCpuMs: last.halve.maxCpuMs,
        halveDoneMs: last.halve.doneMs,
        doublePickMs: last.double.pickMs,
        doubleSlices: last.double.slices,
        doubleCpuMs: last.double.cpuMs,
        doubleP90CpuMs: last.double.p90CpuMs,
        doubleMaxCpuMs: last.double.maxCpuMs,
        doubleDoneMs: last.double.doneMs,
        regrowPickMs: last.regrow.pickMs,
        noiseMaxCpuMs: noise(last.double.slices),
      }),
    };
  };
  return out;
}

/** TurnClock is a ManualClock timing, in CPU time, every timer callback it runs (a sliced sync's turns). */
class TurnClock extends ManualClock {
  turns: number[] = [];
  override setTimeout(fn: () => void, ms: number) {
    return super.setTimeout(() => {
      const c = process.cpuUsage();
      fn();
      const u = process.cpuUsage(c);
      this.turns.push((u.user + u.system) / 1000);
    }, ms);
  }
}

const TABLE_N = 10_000;

/**
 * tableSubjects: an InstanceTable of TABLE_N instances synced with `other(base)` and back, in turn
 * (the op is one sync, every slice it takes and the sync that hands it over).
 */
function tableSubjects(): Record<string, () => Subject> {
  const cases: Record<string, (base: readonly ServiceInstance[]) => readonly ServiceInstance[]> = {
    'same instances, new array': (base) => [...base],
    'one added': (base) => [...base, instance(TABLE_N)],
    'one removed': (base) => base.filter((_, i) => i !== TABLE_N >> 1),
    'one weight changed': (base) => base.map((x, i) => (i === TABLE_N >> 1 ? instance(i, 7) : x)),
    'every instance a new equal object (re-list)': (base) => base.map((x) => Object.freeze({ ...x })),
    'whole new list (10 000 new ids)': () => Array.from({ length: TABLE_N }, (_, i) => instance(TABLE_N + i)),
  };
  const out: Record<string, () => Subject> = {};
  for (const [name, other] of Object.entries(cases)) {
    out[`InstanceTable sync N=10000: ${name}`] = () => {
      const base = fleet(TABLE_N);
      const next = other(base);
      const clock = new TurnClock();
      const t = new InstanceTable<Entry>((instance, prev) => (prev === undefined ? { instance, seen: 0, index: 0 } : ((prev.instance = instance), prev)), {
        clock,
      });
      t.sync(base);
      let odd = false;
      const maxTurn: number[] = [];
      const call: number[] = [];
      const turns: number[] = [];
      const cpu = (f: () => void) => {
        const c = process.cpuUsage();
        f();
        const u = process.cpuUsage(c);
        return (u.user + u.system) / 1000;
      };
      const op = () => {
        odd = !odd;
        const list = odd ? next : base;
        clock.turns = [];
        const first = cpu(() => t.sync(list));
        while (clock.pendingTimers > 0) clock.advance(1);
        const handover = t.source === list ? 0 : cpu(() => t.sync(list));
        if (t.entries.length === 0 || t.source !== list) throw new Error('the list was not taken in');
        if (maxTurn.length < MAX_SAMPLES) {
          maxTurn.push(Math.max(first, handover, ...clock.turns));
          call.push(first);
          turns.push(1 + clock.turns.length + (handover > 0 ? 1 : 0));
        }
      };
      const late = (xs: number[]) => xs.slice(xs.length >> 1).sort((x, y) => x - y);
      const med = (xs: number[]) => late(xs)[Math.floor(late(xs).length / 2)] ?? NaN;
      return { batch: 1, op, extra: () => ({ maxTurnCpuMs: med(maxTurn), callCpuMs: med(call), turns: med(turns) }) };
    };
  }
  return out;
}

/**
 * balancerListSubjects: a Balancer of each strategy handed a list of TABLE_N it takes in over timer
 * turns (a ManualClock here, each `advance` of it one turn, timed in CPU, with a keyed pick after each
 * as picks go on meanwhile): a whole new list (10 000 leave, 10 000 join; one op is one list taken in,
 * alternating between two), and a first list (one op is a new Balancer, until `ready()` resolves and
 * one pick).
 */
function balancerListSubjects(): Record<string, () => Subject> {
  const out: Record<string, () => Subject> = {};
  for (const strategy of STRATEGIES) {
    out[`Balancer ${strategy}: whole new list`] = () => {
      const base = fleet(TABLE_N);
      const next = Object.freeze(Array.from({ length: TABLE_N }, (_, i) => instance(TABLE_N + i)));
      const clock = new ManualClock();
      const b = new Balancer({ instances: base, strategy, clock });
      b.pick('k');
      while (clock.pendingTimers > 0) clock.advance(1);
      let odd = false;
      const turns = new Turns();
      const op = () => {
        odd = !odd;
        const list = odd ? next : base;
        turns.start(odd ? 'there' : 'back');
        turns.time(() => (b.update(list), b.pick('k')));
        while (clock.pendingTimers > 0) turns.time(() => (clock.advance(1), b.pick('k')));
        if (b.instances()[0] !== list[0]) throw new Error('the list was not taken in');
        turns.end();
      };
      return { batch: 1, op, teardown: () => b.close(), extra: () => turns.report() };
    };
    out[`Balancer ${strategy}: first list`] = () => {
      const list = fleet(TABLE_N);
      const turns = new Turns();
      const op = async () => {
        const clock = new ManualClock();
        let b!: Balancer;
        turns.start('first');
        turns.time(() => (b = new Balancer({ instances: list, strategy, clock })));
        let ready = false;
        void b.ready().then(() => (ready = true));
        for (let n = 0; !ready || clock.pendingTimers > 0; n++) {
          if (n > 100_000) throw new Error('the list was not taken in');
          turns.time(() => clock.advance(1));
          for (let k = 0; k < 4; k++) await null;
          if (ready) turns.add(() => b.pick('k'));
        }
        turns.end();
        await b.close();
      };
      return { batch: 1, op, async: true, extra: () => turns.report() };
    };
  }
  return out;
}

/**
 * Turns times the turns of each op (wall and CPU) and keeps, for each kind of op and each turn, the
 * least time over the ops: on a shared machine any one turn may take a time slice or a collection,
 * so the target reads the longest turn once each turn's noise is filtered out that way. CPU time
 * includes the collector's helper threads (concurrent marking), which do not block the loop; wall
 * time includes other processes' time slices: the least of many ops filters both. `maxTurnCpuMs`
 * is the median over ops of their longest turn, noise included.
 */
class Turns {
  private kind = '';
  private wall: number[] = [];
  private cpu: number[] = [];
  private readonly least = new Map<string, { ops: number; wall: number[]; cpu: number[]; n: number[] }>();
  private readonly maxCpu: number[] = [];
  private readonly counts: number[] = [];

  start(kind: string): void {
    this.kind = kind;
    this.wall = [];
    this.cpu = [];
  }

  /** time runs `f` as a turn of its own. */
  time(f: () => void): void {
    this.wall.push(0);
    this.cpu.push(0);
    this.add(f);
  }

  /** add runs `f` as part of the last turn. */
  add(f: () => void): void {
    const t = performance.now();
    const c = process.cpuUsage();
    f();
    const u = process.cpuUsage(c);
    this.wall[this.wall.length - 1]! += performance.now() - t;
    this.cpu[this.cpu.length - 1]! += (u.user + u.system) / 1000;
  }

  end(): void {
    if (this.maxCpu.length < MAX_SAMPLES) {
      this.maxCpu.push(Math.max(...this.cpu));
      this.counts.push(this.cpu.length);
    }
    let l = this.least.get(this.kind);
    if (l === undefined) this.least.set(this.kind, (l = { ops: 0, wall: [], cpu: [], n: [] }));
    if (l.ops++ === 0) return; // the process's first: code not yet compiled
    for (let i = 0; i < this.cpu.length; i++) {
      l.wall[i] = Math.min(l.wall[i] ?? Infinity, this.wall[i]!);
      l.cpu[i] = Math.min(l.cpu[i] ?? Infinity, this.cpu[i]!);
      l.n[i] = (l.n[i] ?? 0) + 1;
    }
  }

  report(): Record<string, number> {
    const late = (xs: number[]) => xs.slice(xs.length >> 1).sort((x, y) => x - y);
    const med = (xs: number[]) => late(xs)[Math.floor(late(xs).length / 2)] ?? NaN;
    let maxLeastMs = 0;
    let maxLeastCpuMs = 0;
    let maxLeastAt = 0;
    // Turns that only a few ops had (a longer op than usual) are left out: they cannot be filtered.
    for (const l of this.least.values()) {
      for (let i = 0; i < l.cpu.length; i++) {
        if (l.n[i]! * 2 < l.ops) continue;
        if (l.wall[i]! > maxLeastMs) {
          maxLeastMs = l.wall[i]!;
          maxLeastAt = i;
        }
        maxLeastCpuMs = Math.max(maxLeastCpuMs, l.cpu[i]!);
      }
    }
    return { maxLeastMs, maxLeastCpuMs, maxLeastAt, maxTurnCpuMs: med(this.maxCpu), turns: med(this.counts) };
  }
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
const tables = tableSubjects();
if (child === undefined || child in tables) {
  await bench('scale: an instance table synced with a new list of 10 000 (one op = one list taken in)', {
    subjects: tables,
    targets: Object.keys(tables).map((subject): Target => ({
      label: `${subject.replace('InstanceTable sync N=10000: ', '')}: longest turn ≤ ${UPDATE_BUDGET_MS} ms CPU`,
      check: (m) => {
        const v = m.extra(subject, 'maxTurnCpuMs');
        return { value: v, ok: v <= UPDATE_BUDGET_MS, unit: ' ms' };
      },
    })),
  });
}
const balancerLists = balancerListSubjects();
if (child === undefined || child in balancerLists) {
  await bench('scale: a Balancer taking in a list of 10 000 (one op = one list taken in)', {
    subjects: balancerLists,
    targets: Object.keys(balancerLists).map((subject): Target => ({
      label: `${subject.replace('Balancer ', '')}: longest turn (least of the ops at each turn) ≤ ${UPDATE_BUDGET_MS} ms`,
      check: (m) => {
        const v = m.extra(subject, 'maxLeastMs');
        return { value: v, ok: v <= UPDATE_BUDGET_MS, unit: ' ms' };
      },
    })),
  });
}
const rings = ringSubjects();
const FIRST = 'RingHash first build of 13 107 instances (2^20 points)';
const SCALE = 'RingHash change of scale at 2^20 points (halve, double)';
if (child === undefined || child in rings) {
  await bench('scale: RingHash at its bound (maxRingSize 2^20): keyed pick, points, balance', {
    subjects: rings,
    targets: [
      {
        label: 'busiest instance ≤ 1.6 × the mean share at 10 000',
        check: (m) => {
          const v = m.extra('RingHash ring N=10000', 'maxShare');
          return { value: v, ok: v <= 1.6, unit: '×' };
        },
      },
      ...(
        [
          ['first build of 13 107: p90 slice ≤ 5 ms CPU', FIRST, 'p90CpuMs'],
          ["halving every instance's points (one instance joins): the pick that hands it over ≤ 5 ms CPU", SCALE, 'halvePickCpuMs'],
          ["halving every instance's points: p90 slice ≤ 5 ms CPU", SCALE, 'halveP90CpuMs'],
          ["doubling every instance's points: p90 slice ≤ 5 ms CPU", SCALE, 'doubleP90CpuMs'],
        ] as const
      ).map(([label, subject, key]): Target => ({
        label,
        check: (m) => {
          const v = m.extra(subject, key);
          return { value: v, ok: v <= UPDATE_BUDGET_MS, unit: ' ms' };
        },
      })),
      {
        label: 'first build of 13 107: CPU time ≤ its floor (hashing names, native sort)',
        check: (m) => {
          const v = m.extra(FIRST, 'totalCpuMs') / m.extra(FIRST, 'floorCpuMs');
          return { value: v, ok: v <= 1, unit: '×' };
        },
      },
    ],
  });
}
