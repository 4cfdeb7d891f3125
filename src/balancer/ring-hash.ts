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
 * instance, exactly where it would go on a ring without it). Absent instances' points are dropped in
 * one pass once they are half the ring; an ejected instance that returns first costs nothing. Only a
 * change of scale (the total weight crossing a power of two near the bound) re-places every point.
 *
 * `boundedLoad` turns on Google's "consistent hashing with bounded loads" (Mirrokni, Thorup,
 * Zadimoghaddam 2016; Vimeo's HAProxy patch): no instance takes more than ⌈c × (in-flight + 1) / n⌉
 * calls at once (c = 1.25); a key whose instance is full walks clockwise to the next one that is not.
 * In-flight counts come from `start` / `report`.
 *
 * A pick without a key goes to a random instance (Envoy's ring hash does the same).
 */
import { HashRing } from '../core/hash-ring.js';
import { finite, fn, integer, options as checkOptions } from '../core/validate.js';
import type { ServiceInstance } from '../registry/types.js';
import type { CallOutcome, ExcludeSet, Picker } from './types.js';
import { InstanceTable, allowedCount, instanceWeight, noInstance, nthAllowed, type Entry } from './instance-table.js';

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
}

/** Defaults for RingHashOptions. */
export const ringHashDefaults = Object.freeze({ replicas: 1280, minRingSize: 1024, maxRingSize: 1 << 20, boundedLoad: false, loadFactor: 1.25 });

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
}

/** RingHash is a Picker that routes a key to the same instance by consistent hashing. */
export class RingHash implements Picker {
  /** The ring of instance ids; shared semantics with the cache's peer picker. */
  readonly ring: HashRing;
  readonly replicas: number;
  readonly minRingSize: number;
  readonly maxRingSize: number;
  readonly boundedLoad: boolean;
  readonly loadFactor: number;
  private readonly random: () => number;
  private readonly table = new InstanceTable<RingEntry>((instance, prev) => {
    if (prev === undefined) return { instance, seen: 0, index: 0, load: 0, weight: instanceWeight(instance) };
    prev.instance = instance;
    return prev;
  });
  /** bySlot[s] is the entry of the ring member in slot s, or undefined while that member is absent. */
  private bySlot: (RingEntry | undefined)[] = [];
  /** Ring members not in the list, with their points. */
  private readonly absent = new Map<string, number>();
  private absentPoints = 0;
  private scale: number;
  private totalLoad = 0;

  constructor(options?: RingHashOptions) {
    const o = checkOptions('RingHash', options);
    this.replicas = integer('RingHash', 'replicas', o.replicas ?? ringHashDefaults.replicas, 1, 1 << 16);
    this.maxRingSize = integer('RingHash', 'maxRingSize', o.maxRingSize ?? ringHashDefaults.maxRingSize, 1, 1 << 24);
    this.minRingSize = integer('RingHash', 'minRingSize', o.minRingSize ?? ringHashDefaults.minRingSize, 1, this.maxRingSize);
    this.ring = new HashRing({ replicas: this.replicas });
    this.scale = this.replicas;
    this.boundedLoad = o.boundedLoad ?? ringHashDefaults.boundedLoad;
    if (typeof this.boundedLoad !== 'boolean') throw new TypeError(`RingHash: boundedLoad must be a boolean, got ${typeof this.boundedLoad}`);
    this.loadFactor = finite('RingHash', 'loadFactor', o.loadFactor ?? ringHashDefaults.loadFactor, 1.000001, 100);
    this.random = o.random === undefined ? Math.random : fn('RingHash', 'random', o.random);
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
    const ring = this.ring;
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
    const ring = this.ring;
    const points = ring.pointCount;
    for (let i = 1; i < points; i++) {
      const e = this.bySlot[ring.memberIndexAt(pos + i)];
      if (e !== undefined) return e.instance;
    }
    return this.table.entries[0]!.instance; // unreachable: every present instance has points
  }

  /** pickAllowed is `pick` over the `m` instances `exclude` lacks (0 < m < n). */
  private pickAllowed(key: string | undefined, exclude: ExcludeSet, m: number): ServiceInstance {
    const entries = this.table.entries;
    if (key === undefined) {
      const i = Math.floor(this.random() * m);
      return nthAllowed(entries, exclude, i >= 0 && i < m ? i : 0).instance;
    }
    if (typeof key !== 'string') throw new TypeError(`RingHash.pick: key must be a string, got ${typeof key}`);
    const ring = this.ring;
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
      points: this.ring.pointCount,
      absentPoints: this.absentPoints,
      pointsPerWeight: this.scale,
      inFlight: this.totalLoad,
    };
  }

  /** pointsFor is the number of virtual nodes for `weight` at scale `s`. */
  private pointsFor(weight: number, s = this.scale): number {
    return Math.min(this.maxRingSize, Math.max(1, Math.round(weight * s)));
  }

  /** sync applies what changed in the list to the ring: points for the new, absence for the gone. */
  private sync(instances: readonly ServiceInstance[]): RingEntry[] {
    const t = this.table;
    const entries = t.sync(instances);
    const ring = this.ring;
    const changes: [string, number][] = [];
    for (const e of t.removed) {
      const id = e.instance.id;
      const pts = ring.pointsOf(id);
      this.bySlot[ring.slotOf(id)] = undefined;
      this.absent.set(id, pts);
      this.absentPoints += pts;
      this.totalLoad -= e.load;
    }
    for (const e of t.added) {
      const id = e.instance.id;
      const was = this.absent.get(id);
      if (was !== undefined) {
        this.absent.delete(id);
        this.absentPoints -= was;
      }
      const want = this.pointsFor(e.weight);
      if (ring.pointsOf(id) !== want) changes.push([id, want]);
    }
    for (const e of t.updated) {
      const w = instanceWeight(e.instance);
      if (w === e.weight) continue;
      e.weight = w;
      changes.push([e.instance.id, this.pointsFor(w)]);
    }
    const rescaled = this.rescale(entries, changes);
    // Absent instances' points go once they are half the ring (a pick then walks past one on average).
    if (rescaled || this.absentPoints * 2 > ring.pointCount) {
      for (const id of this.absent.keys()) changes.push([id, 0]);
      this.absent.clear();
      this.absentPoints = 0;
    }
    if (changes.length > 0) ring.update(changes);
    for (const e of rescaled ? entries : t.added) this.bySlot[ring.slotOf(e.instance.id)] = e;
    return entries;
  }

  /**
   * rescale keeps the ring within [minRingSize, maxRingSize]: when the present instances' points leave
   * that range it picks a new number of points per unit of weight (a power of two times `replicas`),
   * replaces `changes` with every instance's new count and answers true.
   */
  private rescale(entries: readonly RingEntry[], changes: [string, number][]): boolean {
    const total = (s: number) => {
      let sum = 0;
      for (const e of entries) sum += this.pointsFor(e.weight, s);
      return sum;
    };
    let s = this.scale;
    let now = total(s);
    if (now > this.maxRingSize || (s > this.replicas && total(s / 2) >= this.minRingSize)) {
      // Too many points, or more per unit of weight than `replicas` though the minimum no longer needs them.
      while (s > 2 ** -30 && (now > this.maxRingSize || (s > this.replicas && total(s / 2) >= this.minRingSize))) now = total((s /= 2));
    } else {
      // Grow back towards `replicas` only when twice the points fit twice over (hysteresis), or while below the minimum.
      while (entries.length > 0 && ((s < this.replicas && now * 4 <= this.maxRingSize) || now < this.minRingSize)) {
        const next = total(s * 2);
        if (next > this.maxRingSize || (next * 2 > this.maxRingSize && now >= this.minRingSize)) break;
        s *= 2;
        now = next;
      }
    }
    if (s === this.scale) return false;
    this.scale = s;
    changes.length = 0;
    for (const e of entries) changes.push([e.instance.id, this.pointsFor(e.weight)]);
    return true;
  }
}
