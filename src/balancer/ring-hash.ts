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
 * One update is one list handed to `pick`; what it costs is the ring work its differences need (a
 * point kept, sorted or merged is one unit, a point hashed eight). An update within `sliceSize` units
 * (one instance joining, leaving, ejected or re-weighted, at any N) is applied at once. A larger one —
 * a change of scale (the total weight crossing a power of two near the bound re-places every point),
 * dropping the absent instances' points from a big ring, a first list of 10 000 instances or 5 000
 * joining at once — builds the new ring beside the old one in slices of `sliceSize` units, one per
 * timer turn of `clock`, and swaps it in when complete (`HashRing.rebuild`). Meanwhile picks use the
 * old ring, which stays right: an instance that left is skipped as an ejected one is, and instances
 * that joined take keyed picks once the new ring is in. Before any ring has a present instance (a first
 * build), a keyed pick goes to jump consistent hashing over the list (Lamping & Veach 2014): stable for
 * a key while the build runs, evenly spread, and O(log n). At 10 000 instances a slice takes ~1 ms and
 * a first build or change of scale completes within ~0.3 s (bench/scale.bench.ts measures both).

 * `boundedLoad` turns on Google's "consistent hashing with bounded loads" (Mirrokni, Thorup,
 * Zadimoghaddam 2016; Vimeo's HAProxy patch): no instance takes more than ⌈c × (in-flight + 1) / n⌉
 * calls at once (c = 1.25); a key whose instance is full walks clockwise to the next one that is not.
 * In-flight counts come from `start` / `report`.
 *
 * A pick without a key goes to a random instance (Envoy's ring hash does the same).
 */
import { systemClock, type Clock, type TimerHandle } from '../core/clock.js';
import { hash32 } from '../core/hash.js';
import { HashRing, type RingBuild } from '../core/hash-ring.js';
import { clockOption, finite, fn, integer, options as checkOptions } from '../core/validate.js';
import type { ServiceInstance } from '../registry/types.js';
import type { CallOutcome, ExcludeSet, Picker } from './types.js';
import { InstanceTable, sliceLists, allowedCount, instanceWeight, noInstance, nthAllowed, type Entry } from './instance-table.js';
import { RingSize } from './ring-size.js';

/** RingHashOptions configures a RingHash. */
export interface RingHashOptions {
  /** Virtual nodes per unit of weight, ≥ 1 (fewer when the ring would pass `maxRingSize`). Defaults to 1 280 (measured; see the module comment). */
  replicas?: number;
  /** The ring grows past `replicas` per unit of weight while it has fewer points than this (Envoy's `minimum_ring_size`). Defaults to 1 024. */
  minRingSize?: number;
  /** The most points on the ring (Envoy's `maximum_ring_size`); 8 bytes each. Defaults to 1 048 576. */
  maxRingSize?: number;
  /** Bound each instance's load to `loadFactor` × the mean (Google's bounded loads). Defaults to false. */
  boundedLoad?: boolean;
  /** The bound c for `boundedLoad`, > 1. Defaults to 1.25 (the paper's and Vimeo's choice). */
  loadFactor?: number;
  /** Uniform random numbers in [0, 1), for picks without a key. Defaults to `Math.random`. */
  random?: () => number;
  /**
   * The most ring work an update does at once, in units (a point kept, sorted or merged is one, a point
   * hashed eight); a larger update is built in slices of this size, one per timer turn. With
   * `sliceLists` it bounds the list work too (an instance compared is one unit, looked up 8, new or
   * changed 32). Defaults to 262 144 (about 1–2 ms).
   */
  sliceSize?: number;
  /** Sets the timers that run a sliced rebuild. Defaults to `systemClock`. */
  clock?: Clock;
  /** Take a list differing from the last in thousands of instances in in slices on `clock`'s timer turns: until then picks answer from the previous list (an instance may no longer be listed). The Balancer turns it on. Defaults to false. */
  sliceLists?: boolean;
}

/** Defaults for RingHashOptions. */
export const ringHashDefaults = Object.freeze({ replicas: 1280, minRingSize: 1024, maxRingSize: 1 << 20, boundedLoad: false, loadFactor: 1.25, sliceSize: 1 << 18 });

interface RingEntry extends Entry {
  /** Calls in flight (started, not yet reported). */
  load: number;
  weight: number;
}

/** RingStats is what `RingHash.stats()` answers. */
export interface RingStats {
  /** Instances in the list. */
  instances: number;
  /** Virtual nodes on the ring, absent instances' included. */
  points: number;
  /** Virtual nodes of instances no longer in the list (skipped by picks until dropped). */
  absentPoints: number;
  /** Virtual nodes per unit of weight now. */
  pointsPerWeight: number;
  /** Calls in flight (counted with `boundedLoad`'s start / report). */
  inFlight: number;
  /** A new ring is being built in slices (picks use the previous one meanwhile). */
  rebuilding: boolean;
  /** Rebuilds run in slices so far. */
  rebuilds: number;
  /** A list differing in thousands of instances is being taken in in slices (picks use the previous list meanwhile). */
  listPending: boolean;
}

/** Job is a ring being rebuilt in slices. */
interface Job {
  readonly build: RingBuild;
  timer: TimerHandle | undefined;
  /** Ids that left the list while it ran (the new ring may hold them). */
  readonly left: string[];
}

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
  private declare readonly table: InstanceTable<RingEntry>;
  /** bySlot[s] is the entry of the ring member in slot s, or undefined while that member is absent. */
  private bySlot: (RingEntry | undefined)[] = [];
  /** Ring members not in the list, with their points. */
  private readonly absent = new Map<string, number>();
  private absentPoints = 0;
  /** Points per unit of weight, and the total the list wants at that scale. */
  private readonly size: RingSize;
  private totalLoad = 0;

  constructor(options?: RingHashOptions) {
    const o = checkOptions('RingHash', options);
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
    this.table = new InstanceTable<RingEntry>((instance, prev) => {
      if (prev === undefined) return { instance, seen: 0, index: 0, load: 0, weight: instanceWeight(instance) };
      prev.instance = instance;
      return prev;
    }, { clock: sliceLists('RingHash', o.sliceLists) ? this.clock : undefined, sliceSize: this.sliceSize });
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
    this.table.close();
    const job = this.job;
    if (job === undefined) return;
    this.clock.clearTimeout(job.timer);
    while (!job.build.step());
    this.job = undefined;
    this.finish(job.build.ring, job.left);
  }

  /** [Symbol.asyncDispose] closes the picker (`await using p = new RingHash(…)`). */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * sync applies what changed in the list: presence at once (absent instances are skipped by picks),
   * and the ring work as `plan` decides — unless a rebuild runs, which reconciles when it completes.
   */
  private sync(instances: readonly ServiceInstance[]): RingEntry[] {
    const t = this.table;
    const entries = t.sync(instances);
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
    return entries;
  }

  /**
   * plan applies `changes` (and a change of scale or the dropping of absent points, if due) to the
   * ring: at once when the work fits one slice, else by starting a sliced rebuild.
   */
  private plan(entries: readonly RingEntry[], changes: [string, number][]): void {
    const ring = this.current;
    const rescaled = this.size.rescale(entries);
    // Absent instances' points go once they are half the ring (a pick then walks past one on average).
    const compact = rescaled || this.absentPoints * 2 > ring.pointCount;
    let target: Iterable<readonly [string, number]> = changes;
    let work = compact ? ring.pointCount : 0;
    if (rescaled) {
      // Every instance's count changes: the list of them is made lazily, in the rebuild's steps.
      target = this.counts(entries, [...this.absent.keys()]);
      work += 8 * this.size.present;
    } else {
      if (compact) for (const id of this.absent.keys()) changes.push([id, 0]);
      if (changes.length === 0) return;
      for (const [id, count] of changes) {
        const had = ring.pointsOf(id);
        work += count > had ? 8 * (count - had) : had - count;
      }
    }
    if (work > this.sliceSize && !this.closed) {
      const job: Job = { build: ring.rebuild(target, this.sliceSize), timer: undefined, left: [] };
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

  /** counts lists every instance's points at the current scale, then `gone` with none. */
  private *counts(entries: readonly RingEntry[], gone: readonly string[]): Generator<readonly [string, number]> {
    for (const e of entries) yield [e.instance.id, this.size.pointsFor(e.weight)];
    for (const id of gone) yield [id, 0];
  }

  /** schedule runs the next slice of `job` on the next timer turn. */
  private schedule(job: Job): void {
    job.timer = this.clock.setTimeout(() => {
      if (this.job !== job) return;
      if (!job.build.step()) return this.schedule(job);
      this.job = undefined;
      this.finish(job.build.ring, job.left);
    }, 0);
    job.timer.unref();
  }

  /**
   * finish swaps in a rebuilt ring and reconciles it with the list as it is now: presence, and the
   * points of instances that joined or changed weight while it was built (`left`: the ids that left
   * the list meanwhile) — applied by `plan`, in slices again if that is much work.
   */
  private finish(ring: HashRing, left: readonly string[]): void {
    this.current = ring;
    const t = this.table;
    const absent = new Map<string, number>();
    let absentPoints = 0;
    for (const id of [...this.absent.keys(), ...left]) {
      const pts = ring.pointsOf(id);
      if (pts === 0 || t.get(id) !== undefined || absent.has(id)) continue;
      absent.set(id, pts);
      absentPoints += pts;
    }
    this.absent.clear();
    for (const [id, pts] of absent) this.absent.set(id, pts);
    this.absentPoints = absentPoints;
    const bySlot: (RingEntry | undefined)[] = [];
    const changes: [string, number][] = [];
    const entries = t.entries;
    for (const e of entries) {
      const id = e.instance.id;
      const slot = ring.slotOf(id);
      if (slot >= 0) bySlot[slot] = e;
      const want = this.size.pointsFor(e.weight);
      if ((slot < 0 ? 0 : ring.pointsOf(id)) !== want) changes.push([id, want]);
    }
    this.bySlot = bySlot;
    this.interim = ring.size === this.absent.size;
    this.plan(entries, changes);
  }
}

/**
 * jump is jump consistent hashing (Lamping & Veach, "A Fast, Minimal Memory, Consistent Hash
 * Algorithm", 2014) with a 32-bit xorshift stream seeded by `h`: a bucket in [0, n) for the key hash
 * `h`; when n grows by one, only 1/(n + 1) of the keys move (to the new bucket). O(log n), no memory.
 */
function jump(h: number, n: number): number {
  let b = 0;
  let x = h >>> 0 || 0x9e3779b9;
  for (let j = 0; j < n; ) {
    b = j;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    j = Math.floor((b + 1) * (4294967296 / (x + 1)));
  }
  return b;
}
