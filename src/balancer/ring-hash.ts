/**
 * RingHash is consistent hashing on the core `HashRing` (the ring the cache's peer picker uses too):
 * a key goes to the first virtual node clockwise from its MurmurHash3, so the same key keeps reaching
 * the same instance (and its local cache), and a membership change moves only about 1/n of the keys.
 *
 * Points: each instance gets `replicas` × its weight virtual nodes (at least 1), 1 280 per unit of
 * weight by default, chosen by measurement: over 300 random 10-member sets the busiest member's share
 * was, at p95 / worst, 1.22 / 1.27 × the mean with 160 points, 1.10 / 1.14 with 640 and 1.07 / 1.09
 * with 1 280 (the spread falls as 1/√points). As Envoy's ring hash does, the ring's size is bounded:
 * when the points would pass `maxRingSize` (default 2²⁰, 8 MiB of ring) the points per unit of weight
 * halve until they fit, and they double again (up to `replicas`) once they fit twice over, or while
 * the ring is below `minRingSize`. At 10 000 instances of weight 1 that is 80 points each; the busiest
 * instance then takes ~1.4 × the mean share of keys (docs/balancer.md has the measured curve).
 *
 * Updates are incremental: an instance that joins merges its points into the ring, a weight change
 * adds or drops the difference, and an instance that leaves the list — removed, or ejected by health
 * checks — stays on the ring, skipped at pick time (a key it owned walks clockwise to the next present
 * instance, exactly where it would go on a ring without it). Absent instances' points are dropped once
 * they are half the ring; an ejected instance that returns first costs nothing.
 *
 * One update is one list handed to `pick`; it costs the ring work its differences need (a point kept,
 * sorted or merged is one unit, a point hashed eight). Within `sliceSize` units (one instance joining,
 * leaving, ejected or re-weighted, at any N) it is applied at once. A larger one (a change of scale,
 * dropping absent points from a big ring, a first list of 10 000) builds the new ring beside the old
 * in slices of `sliceSize` units, one per timer turn of `clock` (`HashRing.rebuild`), reconciles it
 * with the list in slices too, and swaps it in. Meanwhile picks use the old ring, which stays right:
 * an instance that left is skipped as an ejected one is; those that joined take keyed picks once the
 * new ring is in. Before any ring has a present instance (a first build, a whole new list), a keyed
 * pick goes to jump consistent hashing over the list (Lamping & Veach 2014): stable for a key while
 * the build runs, evenly spread, O(log n). With `sliceLists`, a list differing in thousands of
 * instances is walked by the instance table and its effect on the ring staged (ring-handover.ts) over
 * timer turns while picks answer the previous list; the turn that takes it over swaps state in.
 *
 * `boundedLoad` turns on Google's "consistent hashing with bounded loads" (Mirrokni, Thorup,
 * Zadimoghaddam 2016; Vimeo's HAProxy patch): no instance takes more than ⌈c × (in-flight + 1) / n⌉
 * calls at once (c = 1.25); a key whose instance is full walks clockwise to the next one that is not.
 * In-flight counts come from `start` / `report`.
 *
 * A pick without a key goes to a random instance (Envoy's ring hash does the same).
 */
import { systemClock, type Clock } from '../core/clock.js';
import { hash32 } from '../core/hash.js';
import { HashRing } from '../core/hash-ring.js';
import { clockOption, finite, fn, integer, options as checkOptions, type OptionKeys } from '../core/validate.js';
import type { ServiceInstance } from '../registry/types.js';
import type { CallOutcome, ExcludeSet, Picker, RingHashOptions, RingStats } from './types.js';
import { InstanceTable, TABLE_SLICE, sliceLists, allowedCount, instanceWeight, noInstance, nthAllowed } from './instance-table.js';
import { jump, reconcile, RingCounts, stage, type Job, type Prep, type Reconciled, type RingEntry, type Staged } from './ring-handover.js';
import { RingSize } from './ring-size.js';

/** The keys of RingHashOptions, all of them: any other is refused (see `options`). */
const RING_HASH_KEYS = {
  replicas: true,
  minRingSize: true,
  maxRingSize: true,
  boundedLoad: true,
  loadFactor: true,
  random: true,
  sliceSize: true,
  clock: true,
  sliceLists: true,
} as const satisfies OptionKeys<RingHashOptions>;

export type { RingHashOptions, RingStats } from './types.js';

/** Defaults for RingHashOptions. */
export const ringHashDefaults = Object.freeze({
  replicas: 1280,
  minRingSize: 1024,
  maxRingSize: 1 << 20,
  boundedLoad: false,
  loadFactor: 1.25,
  sliceSize: 1 << 18,
});

/** RingHash is a Picker that routes a key to the same instance by consistent hashing. */
export class RingHash implements Picker {
  readonly replicas: number;
  readonly minRingSize: number;
  readonly maxRingSize: number;
  readonly boundedLoad: boolean;
  readonly loadFactor: number;
  readonly sliceSize: number;
  private readonly random: () => number;
  private readonly clock: Clock;
  private current: HashRing;
  private job: Job | undefined;
  private rebuilds = 0;
  private closed = false;
  /** No instance on the ring is in the list (a first build runs): keyed picks use jump hashing. */
  private interim = false;
  declare private readonly table: InstanceTable<RingEntry>;
  /** bySlot[s] is the entry of the ring member in slot s, or undefined while that member is absent. */
  private bySlot: (RingEntry | undefined)[] = [];
  /** Ring members not in the list, with their points. */
  private absent = new Map<string, number>();
  /** Counts changes of the ring state a staged list was computed against (ring, absent, sizes). */
  private epoch = 0;
  private prep: Prep | undefined;
  /** Called once a list is taken over (see `prepare`). */
  private waiting: (() => void)[] = [];
  private absentPoints = 0;
  /** Points per unit of weight, and the total the list wants at that scale. */
  private readonly size: RingSize;
  private totalLoad = 0;

  constructor(options?: RingHashOptions) {
    const o = checkOptions('RingHash', options, RING_HASH_KEYS);
    this.replicas = integer('RingHash', 'replicas', o.replicas ?? ringHashDefaults.replicas, 1, 1 << 16);
    this.maxRingSize = integer('RingHash', 'maxRingSize', o.maxRingSize ?? ringHashDefaults.maxRingSize, 1, 1 << 24);
    this.minRingSize = integer('RingHash', 'minRingSize', o.minRingSize ?? ringHashDefaults.minRingSize, 1, this.maxRingSize);
    this.current = new HashRing({ replicas: this.replicas });
    this.size = new RingSize(this.replicas, this.minRingSize, this.maxRingSize);
    this.boundedLoad = o.boundedLoad ?? ringHashDefaults.boundedLoad;
    if (typeof this.boundedLoad !== 'boolean') throw new TypeError(`RingHash: boundedLoad must be a boolean, got ${typeof this.boundedLoad}`);
    this.loadFactor = finite('RingHash', 'loadFactor', o.loadFactor ?? ringHashDefaults.loadFactor, 1.000001, 100);
    this.random = o.random === undefined ? Math.random : fn('RingHash', 'random', o.random);
    this.sliceSize = integer('RingHash', 'sliceSize', o.sliceSize ?? ringHashDefaults.sliceSize, 1, Number.MAX_SAFE_INTEGER);
    this.clock = clockOption('RingHash', o.clock, systemClock);
    this.table = new InstanceTable<RingEntry>(
      (instance, prev) => {
        if (prev === undefined) return { instance, seen: 0, index: 0, load: 0, weight: instanceWeight(instance) };
        prev.instance = instance;
        return prev;
      },
      {
        clock: sliceLists('RingHash', o.sliceLists) ? this.clock : undefined,
        sliceSize: Math.min(this.sliceSize, TABLE_SLICE),
        hold: true,
        onReady: (list) => this.stageList(list),
      },
    );
  }

  /** ring is the ring picks use now (shared semantics with the cache's peer picker); a sliced rebuild swaps it. */
  get ring(): HashRing {
    return this.current;
  }

  /**
   * pick returns the instance owning `key` on the ring (with `boundedLoad`, the first one clockwise
   * that is under its bound); without a key, a random instance. With `exclude`, the walk goes on
   * clockwise past the instances it has (the key's next owner, as on a membership change), and a
   * pick without a key is random among the others. Throws NoInstanceError when empty.
   */
  pick(instances: readonly ServiceInstance[], key?: string, exclude?: ExcludeSet): ServiceInstance {
    const entries = instances === this.table.source ? this.table.entries : this.sync(instances);
    const n = entries.length;
    if (n === 0) throw noInstance();
    if (exclude !== undefined) {
      const m = allowedCount(entries, exclude);
      if (m > 0 && m < n) return this.pickAllowed(key, exclude, m);
    }
    if (key === undefined) {
      const i = Math.floor(this.random() * n);
      return entries[i >= 0 && i < n ? i : 0]!.instance;
    }
    if (typeof key !== 'string') throw new TypeError(`RingHash.pick: key must be a string, got ${typeof key}`);
    if (this.interim) return this.jumpPick(key, undefined, n);
    const ring = this.current;
    const pos = ring.position(key);
    const bySlot = this.bySlot;
    if (!this.boundedLoad) {
      const owner = bySlot[ring.memberIndexAt(pos)];
      return owner !== undefined ? owner.instance : this.walk(pos);
    }
    const cap = Math.ceil((this.loadFactor * (this.totalLoad + 1)) / n);
    // Σ caps ≥ c × (total + 1) > total, so some instance is under its cap and the walk ends.
    const points = ring.pointCount;
    for (let i = 0; i < points; i++) {
      const e = bySlot[ring.memberIndexAt(pos + i)];
      if (e !== undefined && e.load < cap) return e.instance;
    }
    return this.walk(pos);
  }

  /** walk returns the first present instance clockwise from `pos` (absent ones are skipped). */
  private walk(pos: number): ServiceInstance {
    const ring = this.current;
    const points = ring.pointCount;
    for (let i = 1; i < points; i++) {
      const e = this.bySlot[ring.memberIndexAt(pos + i)];
      if (e !== undefined) return e.instance;
    }
    return this.table.entries[0]!.instance; // unreachable: some present instance has points
  }

  /** pickAllowed is `pick` over the `m` instances `exclude` lacks (0 < m < n). */
  private pickAllowed(key: string | undefined, exclude: ExcludeSet, m: number): ServiceInstance {
    const entries = this.table.entries;
    if (key === undefined) {
      const i = Math.floor(this.random() * m);
      return nthAllowed(entries, exclude, i >= 0 && i < m ? i : 0).instance;
    }
    if (typeof key !== 'string') throw new TypeError(`RingHash.pick: key must be a string, got ${typeof key}`);
    if (this.interim) return this.jumpPick(key, exclude, m);
    const ring = this.current;
    const pos = ring.position(key);
    const cap = this.boundedLoad ? Math.ceil((this.loadFactor * (this.totalLoad + 1)) / m) : Infinity;
    let first: RingEntry | undefined;
    const points = ring.pointCount;
    for (let i = 0; i < points; i++) {
      const e = this.bySlot[ring.memberIndexAt(pos + i)];
      if (e === undefined || exclude.has(e.instance.id)) continue;
      if (e.load < cap) return e.instance;
      first ??= e;
    }
    return (first ?? nthAllowed(entries, exclude, 0)).instance;
  }

  /**
   * jumpPick is a keyed pick while no ring instance is in the list: jump consistent hashing gives the
   * key an index in the list, from which the pick walks on past excluded (or, with `boundedLoad`, full)
   * instances. `m` is how many instances are allowed.
   */
  private jumpPick(key: string, exclude: ExcludeSet | undefined, m: number): ServiceInstance {
    const entries = this.table.entries;
    const n = entries.length;
    const start = jump(hash32(key), n);
    const cap = this.boundedLoad ? Math.ceil((this.loadFactor * (this.totalLoad + 1)) / m) : Infinity;
    let first: RingEntry | undefined;
    for (let k = 0; k < n; k++) {
      const e = entries[start + k < n ? start + k : start + k - n]!;
      if (exclude?.has(e.instance.id)) continue;
      if (e.load < cap) return e.instance;
      first ??= e;
    }
    return (first ?? entries[start]!).instance;
  }

  /** start counts a call in flight to `instance` (used by `boundedLoad`). */
  start(instance: ServiceInstance): void {
    const e = this.table.get(instance.id);
    if (e === undefined) return;
    e.load++;
    this.totalLoad++;
  }

  /** report ends a call started with `start`. */
  report(instance: ServiceInstance, _outcome?: CallOutcome): void {
    const e = this.table.get(instance.id);
    if (e === undefined || e.load === 0) return;
    e.load--;
    this.totalLoad--;
  }

  /** stats answers the ring's size and how it is used. */
  stats(): RingStats {
    return {
      instances: this.table.entries.length,
      points: this.current.pointCount,
      absentPoints: this.absentPoints,
      pointsPerWeight: this.size.scale,
      inFlight: this.totalLoad,
      rebuilding: this.job !== undefined,
      rebuilds: this.rebuilds,
      listPending: this.table.pending,
    };
  }

  /**
   * close clears the timer of a rebuild in progress and completes it at once; later updates apply at
   * once however large (no timers). Idempotent.
   */
  async close(): Promise<void> {
    this.closed = true;
    this.dropPrep();
    this.table.close();
    const job = this.job;
    if (job === undefined) return;
    this.clock.clearTimeout(job.timer);
    this.stepJob(job, true);
  }

  /** [Symbol.asyncDispose] closes the picker (`await using p = new RingHash(…)`). */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * sync applies what changed in the list: presence at once (absent instances are skipped by picks),
   * and the ring work as `plan` decides — unless a rebuild runs, which reconciles when it completes.
   */
  private sync(instances: readonly ServiceInstance[], sliceFirst = false): RingEntry[] {
    const t = this.table;
    this.dropPrep(); // a list being staged is replaced (the table drops its walk too)
    this.epoch++;
    const entries = t.sync(instances, sliceFirst);
    const ring = this.current;
    const job = this.job;
    for (const e of t.removed) {
      const id = e.instance.id;
      this.totalLoad -= e.load;
      this.size.present -= this.size.pointsFor(e.weight);
      job?.left.push(id);
      const slot = ring.slotOf(id);
      if (slot < 0) continue; // joined while a rebuild ran: not on this ring
      const pts = ring.pointsOf(id);
      this.bySlot[slot] = undefined;
      this.absent.set(id, pts);
      this.absentPoints += pts;
    }
    const changes: [string, number][] = [];
    const onRing = ring.size > 0; // a first list skips the lookups
    for (const e of t.added) {
      const id = e.instance.id;
      const was = this.absent.size > 0 ? this.absent.get(id) : undefined;
      if (was !== undefined) {
        this.absent.delete(id);
        this.absentPoints -= was;
      }
      const slot = onRing ? ring.slotOf(id) : -1;
      if (slot >= 0) this.bySlot[slot] = e;
      const want = this.size.pointsFor(e.weight);
      this.size.present += want;
      if (job === undefined && (slot < 0 ? 0 : ring.pointsOf(id)) !== want) changes.push([id, want]);
    }
    for (const e of t.updated) {
      const w = instanceWeight(e.instance);
      if (w === e.weight) continue;
      this.size.present += this.size.pointsFor(w) - this.size.pointsFor(e.weight);
      e.weight = w;
      if (job === undefined) changes.push([e.instance.id, this.size.pointsFor(w)]);
    }
    this.interim = ring.size === this.absent.size;
    if (job === undefined) this.plan(entries, changes);
    if (!t.pending) this.prepared();
    return entries;
  }

  /** prepare takes `instances` in ahead of the first pick, a first list too in slices with `sliceLists` (see `Picker.prepare`). */
  prepare(instances: readonly ServiceInstance[], done: () => void): void {
    if (instances !== this.table.source) this.sync(instances, true);
    this.waiting.push(done);
    if (!this.table.pending) this.prepared();
  }

  /** prepared calls the `prepare` callbacks: a list has been taken over. */
  private prepared(): void {
    const waiting = this.waiting;
    if (waiting.length === 0) return;
    this.waiting = [];
    for (const fn of waiting) fn();
  }

  /**
   * plan applies `changes` (and a change of scale or the dropping of absent points, if due) to the
   * ring: at once when the work fits one slice, else by starting a sliced rebuild.
   */
  private plan(entries: readonly RingEntry[], changes: [string, number][], changesWork = -1): void {
    this.epoch++;
    const ring = this.current;
    const rescaled = this.size.rescale(entries);
    // Absent instances' points go once they are half the ring (a pick then walks past one on average).
    const compact = rescaled || this.absentPoints * 2 > ring.pointCount;
    let target: Iterable<readonly [string, number]> = changes;
    let work = compact ? ring.pointCount : 0;
    if (rescaled) {
      // Every instance's count changes: the list of them is made lazily, in the rebuild's steps.
      target = new RingCounts(entries, this.size, [...this.absent.keys()]);
      work += 8 * this.size.present;
    } else {
      if (changes.length === 0 && !compact) return;
      if (changesWork < 0) {
        changesWork = 0;
        for (const [id, count] of changes) {
          const had = ring.pointsOf(id);
          changesWork += count > had ? 8 * (count - had) : had - count;
        }
      }
      work += changesWork;
      if (compact) {
        // The absent members go too (read lazily by the rebuild, from a copy of their ids).
        work += this.absentPoints;
        target = new RingCounts(changes, undefined, [...this.absent.keys()]);
      }
    }
    if (work > this.sliceSize && !this.closed) {
      const job: Job = { build: ring.rebuild(target, this.sliceSize), timer: undefined, left: [], settle: undefined, entries };
      this.job = job;
      this.rebuilds++;
      this.schedule(job);
      return;
    }
    ring.update(target);
    if (compact) {
      this.absent.clear();
      this.absentPoints = 0;
    }
    const t = this.table;
    if (rescaled) for (const e of entries) this.bySlot[ring.slotOf(e.instance.id)] = e;
    else for (const [id, count] of changes) if (count > 0) this.bySlot[ring.slotOf(id)] = t.get(id);
    this.interim = ring.size === this.absent.size;
  }

  /** schedule runs the next slice of `job` on the next timer turn. */
  private schedule(job: Job): void {
    job.timer = this.clock.setTimeout(() => {
      if (this.job !== job) return;
      if (!this.stepJob(job)) this.schedule(job);
    }, 0);
    job.timer.unref();
  }

  /**
   * stepJob does one slice of `job` (all of it without a budget): a step of the rebuild, then of its
   * reconciliation with the list as it is now (started again when the list changes meanwhile: the
   * instances that left are in `left`); once both are complete it swaps the new ring in and answers
   * true. The ring work still due (instances that joined or changed weight meanwhile) goes to `plan`.
   */
  private stepJob(job: Job, all = false): boolean {
    if (job.settle === undefined) {
      let built = job.build.step();
      while (all && !built) built = job.build.step();
      if (!built) return false;
      job.settle = this.settlement(job);
      if (!all) return false; // the reconciliation starts on a turn of its own
    }
    if (job.entries !== this.table.entries) job.settle = this.settlement(job);
    let r = job.settle.next();
    while (all && r.done !== true) r = job.settle.next();
    if (r.done !== true) return false;
    this.job = undefined;
    const { absent, absentPoints, bySlot, changes } = r.value;
    this.current = job.build.ring;
    this.absent = absent;
    this.absentPoints = absentPoints;
    this.bySlot = bySlot;
    this.interim = this.current.size === absent.size;
    this.plan(this.table.entries, changes);
    return true;
  }

  /** settlement starts reconciling `job`'s ring with the list as it is now. */
  private settlement(job: Job): Generator<void, Reconciled, void> {
    const t = this.table;
    job.entries = t.entries;
    return reconcile(job.build.ring, this.size, t.entries, (id) => t.get(id), [...this.absent.keys(), ...job.left], this.sliceSize);
  }

  /** stageList starts staging `list`, which the table has walked and holds, on the next timer turns. */
  private stageList(list: readonly ServiceInstance[]): void {
    if (this.closed) return;
    this.dropPrep();
    const p: Prep = { list, epoch: -1, steps: undefined, staged: undefined, timer: undefined };
    this.prep = p;
    this.schedulePrep(p);
  }

  private schedulePrep(p: Prep): void {
    p.timer = this.clock.setTimeout(() => {
      p.timer = undefined;
      if (this.prep === p && !this.prepStep(p)) this.schedulePrep(p);
    }, 0);
    p.timer.unref();
  }

  /**
   * prepStep does one slice of staging `p` (starting again if the ring state changed meanwhile), and
   * on the turn after the last one takes the list over; answers true when done.
   */
  private prepStep(p: Prep): boolean {
    const walked = this.table.next;
    if (walked === undefined || walked.list !== p.list) {
      this.prep = undefined; // the walk was dropped
      return true;
    }
    if (p.epoch !== this.epoch) {
      p.epoch = this.epoch;
      p.steps = stage(this.current, this.size, this.absent, this.absentPoints, this.size.present, walked, this.sliceSize);
      p.staged = undefined;
    }
    if (p.staged === undefined) {
      const r = p.steps!.next();
      if (r.done === true) p.staged = r.value;
      return false;
    }
    this.prep = undefined;
    this.takeOver(p.staged);
    return true;
  }

  /**
   * takeOver hands the table's held list over and swaps in its staged ring state: presence (absent
   * members, the entry of each slot), the total and the weights, then the ring work as `plan` decides
   * — unless a rebuild runs, which reconciles when it completes.
   */
  private takeOver(s: Staged): void {
    const t = this.table;
    const entries = t.handOver()!;
    const job = this.job;
    for (const e of t.removed) {
      this.totalLoad -= e.load;
      job?.left.push(e.instance.id);
    }
    const bySlot = this.bySlot.slice();
    for (const slot of s.clear) bySlot[slot] = undefined;
    for (let k = 0; k < s.set.length; k += 2) bySlot[s.set[k] as number] = s.set[k + 1] as RingEntry;
    for (let k = 0; k < s.weights.length; k += 2) (s.weights[k] as RingEntry).weight = s.weights[k + 1] as number;
    this.bySlot = bySlot;
    this.absent = s.absent;
    this.absentPoints = s.absentPoints;
    this.size.present = s.present;
    this.epoch++;
    this.interim = this.current.size === this.absent.size;
    if (job === undefined) this.plan(entries, s.changes, s.work);
    this.prepared();
  }

  private dropPrep(): void {
    const p = this.prep;
    this.prep = undefined;
    if (p?.timer !== undefined) this.clock.clearTimeout(p.timer);
  }
}
