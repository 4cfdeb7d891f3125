/**
 * RingHash is consistent hashing on the core `HashRing` (the ring the cache's peer picker uses too):
 * a key goes to the first virtual node clockwise from its MurmurHash3, so the same key keeps reaching
 * the same instance (and its local cache), and a membership change moves only about 1/n of the keys.
 *
 * Virtual nodes per instance default to 1 280, chosen by measurement (docs/balancer.md): over 300
 * random 10-member sets, the busiest member's share of the ring was, at p95 / worst, 1.22 / 1.27 × the
 * mean with 160 replicas, 1.15 / 1.22 with 320, 1.10 / 1.14 with 640, 1.08 / 1.10 with 1 024 and
 * 1.07 / 1.09 with 1 280 (the spread falls as 1/√replicas). Lookups stay one binary search (14 steps
 * for 10 members); a rebuild (list or health change) takes ~3 ms for 10 members, ~25 ms for 100.
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
import type { CallOutcome, ExcludeSet, Picker } from './index.js';
import { InstanceTable, allowedCount, noInstance, nthAllowed } from './instance-table.js';

/** RingHashOptions configures a RingHash. */
export interface RingHashOptions {
  /** Virtual nodes per instance, ≥ 1. Defaults to 1 280 (measured; see the module comment). */
  replicas?: number;
  /** Bound each instance's load to `loadFactor` × the mean (Google's bounded loads). Defaults to false. */
  boundedLoad?: boolean;
  /** The bound c for `boundedLoad`, > 1. Defaults to 1.25 (the paper's and Vimeo's choice). */
  loadFactor?: number;
  /** Uniform random numbers in [0, 1), for picks without a key. Defaults to `Math.random`. */
  random?: () => number;
}

/** Defaults for RingHashOptions. */
export const ringHashDefaults = Object.freeze({ replicas: 1280, boundedLoad: false, loadFactor: 1.25 });

interface RingEntry {
  instance: ServiceInstance;
  /** Calls in flight (started, not yet reported). */
  load: number;
}

/** RingHash is a Picker that routes a key to the same instance by consistent hashing. */
export class RingHash implements Picker {
  /** The ring of instance ids; shared semantics with the cache's peer picker. */
  readonly ring: HashRing;
  readonly boundedLoad: boolean;
  readonly loadFactor: number;
  private readonly random: () => number;
  private readonly table = new InstanceTable<RingEntry>((instance, prev) => {
    if (prev === undefined) return { instance, load: 0 };
    prev.instance = instance;
    return prev;
  });
  /** byMember[i] is the entry of `ring.members()[i]`. */
  private byMember: RingEntry[] = [];
  private totalLoad = 0;

  constructor(options?: RingHashOptions) {
    const o = checkOptions('RingHash', options);
    const replicas = integer('RingHash', 'replicas', o.replicas ?? ringHashDefaults.replicas, 1, 1 << 16);
    this.ring = new HashRing({ replicas });
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
    if (!this.boundedLoad) return this.byMember[ring.memberIndexAt(pos)]!.instance;
    const cap = Math.ceil((this.loadFactor * (this.totalLoad + 1)) / n);
    // Σ caps ≥ c × (total + 1) > total, so some instance is under its cap and the walk ends.
    const points = ring.pointCount;
    for (let i = 0; i < points; i++) {
      const e = this.byMember[ring.memberIndexAt(pos + i)]!;
      if (e.load < cap) return e.instance;
    }
    return this.byMember[ring.memberIndexAt(pos)]!.instance;
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
      const e = this.byMember[ring.memberIndexAt(pos + i)]!;
      if (exclude.has(e.instance.id)) continue;
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

  private sync(instances: readonly ServiceInstance[]): RingEntry[] {
    const entries = this.table.sync(instances);
    const ring = this.ring;
    let same = ring.size === entries.length;
    for (let i = 0; same && i < entries.length; i++) same = ring.has(entries[i]!.instance.id);
    if (!same) ring.set(entries.map((e) => e.instance.id));
    const members = ring.members();
    this.byMember = members.map((id) => this.table.get(id)!);
    let total = 0;
    for (const e of entries) total += e.load;
    this.totalLoad = total;
    return entries;
  }
}
