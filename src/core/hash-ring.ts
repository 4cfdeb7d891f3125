/**
 * HashRing is consistent hashing with virtual nodes (groupcache `consistenthash`, GeeCache day 4):
 * each member is placed `replicas` times on a 32-bit ring (virtual node i of member m at
 * `hash("i-m")`); a key belongs to the first virtual node clockwise from its hash. Adding or removing
 * one of n members moves about 1/n of the keys. Hash ties are broken by member name, so every node
 * that holds the same members builds the same ring whatever order they came in.
 *
 * One ring serves both the ring-hash balancer and the cache's peer picker. Lookups are a binary search
 * over a sorted `Uint32Array` and allocate nothing. Changes are incremental: adding a member hashes
 * and sorts only its own points and merges them in (one binary search and one block move per point),
 * removing one moves the blocks between its points out; neither re-sorts the ring. A member may hold
 * any number of points (`setPoints`, for weights); its i-th point is the same whatever the count, so
 * changing a count adds or drops only the difference.
 *
 * `rebuild` builds a changed ring beside this one in bounded steps; its work lives in ring-rebuild.ts
 * (the steps) and ring-points.ts (bulk hashing and sorting of points), which HashRing alone uses.
 */
import { hash32, type HashFn } from './hash.js';
import { MAX_MEMBERS, MAX_POINTS_PER_MEMBER, checkMember, defaultPointName } from './ring-points.js';
import { RADIX_FROM, rebuildSteps, type RingState } from './ring-rebuild.js';
import { fn, integer, options as checkOptions, type OptionKeys } from './validate.js';

/** The keys of HashRingOptions, all of them: any other is refused (see `options`). */
const HASH_RING_KEYS = { replicas: true, hash: true, pointName: true } as const satisfies OptionKeys<HashRingOptions>;

/** HashRingOptions configures a HashRing. */
export interface HashRingOptions {
  /** Virtual nodes per member added with `add` / `set`. Defaults to 50 (groupcache); 160+ evens out load balancing. */
  replicas?: number;
  /** The hash for keys and virtual nodes. Defaults to `hash32` (MurmurHash3). */
  hash?: HashFn;
  /**
   * The string hashed for virtual node `index` of `member`. Defaults to `` `${index}-${member}` ``;
   * golang/groupcache's `consistenthash` uses `` `${index}${member}` `` (with crc32 as the hash).
   */
  pointName?: (member: string, index: number) => string;
}

/** New points merged at once: packed below their hash in one double while sorting. */
const ADD_CHUNK = 2 ** 21;

/** Defaults for HashRingOptions. */
export const hashRingDefaults = Object.freeze({ replicas: 50 });

/**
 * RingBuild is a ring being built by `HashRing.rebuild`: `step()` does one slice of the work and
 * answers true once `ring` is complete (and on every call after).
 */
export interface RingBuild {
  /** The new ring; empty until the build completes. */
  readonly ring: HashRing;
  /** step does about `stepSize` units of work; true when the build is complete. */
  step(): boolean;
}

/** HashRing maps keys to members. */
export class HashRing {
  readonly replicas: number;
  private readonly hash: HashFn;
  private readonly pointName: (member: string, index: number) => string;
  /** Slot of each member; slots are reused after removal. */
  private slots = new Map<string, number>();
  /** names[slot] and counts[slot] (virtual nodes) of each slot; '' and 0 when free. */
  private names: string[] = [];
  private counts: number[] = [];
  private free: number[] = [];
  /** The members sorted, built when asked after a change. */
  private sorted: string[] | undefined = [];
  /** Sorted hashes of the virtual nodes in [0, length); capacity beyond. */
  private points = new Uint32Array(0);
  /** owners[i] is the slot of the member of points[i]. */
  private owners = new Uint32Array(0);
  /** ranks[i] is which of its member's points points[i] is (its i in `hash("i-m")`). */
  private ranks = new Uint32Array(0);
  private length = 0;
  /** Counts the changes, so that a rebuild notices its source ring changing under it. */
  private version = 0;

  constructor(options: HashRingOptions = {}) {
    checkOptions('HashRing', options, HASH_RING_KEYS);
    this.replicas = integer('HashRing', 'replicas', options.replicas ?? hashRingDefaults.replicas, 1, 1 << 16);
    this.hash = options.hash === undefined ? hash32 : fn('HashRing', 'hash', options.hash);
    this.pointName = options.pointName === undefined ? defaultPointName : fn('HashRing', 'pointName', options.pointName);
  }

  /** size is the number of members. */
  get size(): number {
    return this.slots.size;
  }

  /** members lists the members, sorted by name. */
  members(): readonly string[] {
    return (this.sorted ??= [...this.slots.keys()].sort());
  }

  /** has tells whether `member` is on the ring. */
  has(member: string): boolean {
    return this.slots.has(member);
  }

  /** add puts members on the ring with `replicas` virtual nodes each; members already there are ignored. */
  add(...members: string[]): void {
    const fresh: [string, number][] = [];
    for (const m of members) {
      checkMember('HashRing.add', m);
      if (!this.slots.has(m)) fresh.push([m, this.replicas]);
    }
    this.apply(fresh);
  }

  /** remove takes members off the ring; members not there are ignored. */
  remove(...members: string[]): void {
    const gone: [string, number][] = [];
    for (const m of members) if (this.slots.has(m)) gone.push([m, 0]);
    this.apply(gone);
  }

  /** set makes the membership exactly `members` (`replicas` virtual nodes each): only the difference moves. */
  set(members: Iterable<string>): void {
    const want = new Set<string>();
    for (const m of members) {
      checkMember('HashRing.set', m);
      want.add(m);
    }
    const changes: [string, number][] = [];
    for (const m of this.slots.keys()) if (!want.has(m)) changes.push([m, 0]);
    for (const m of want) if (this.counts[this.slots.get(m) ?? -1] !== this.replicas) changes.push([m, this.replicas]);
    this.apply(changes);
  }

  /**
   * setPoints gives `member` exactly `count` virtual nodes (its points 0 … count − 1), adding it when
   * new; 0 removes it. For weighted rings: a member's share of the keys follows its share of points.
   */
  setPoints(member: string, count: number): void {
    checkMember('HashRing.setPoints', member);
    integer('HashRing.setPoints', 'count', count, 0, MAX_POINTS_PER_MEMBER);
    this.apply([[member, count]]);
  }

  /**
   * update applies several `[member, count]` changes at once (count 0 removes; a member listed twice:
   * the last count wins): one pass over the ring for all the points removed and one merge for all the
   * points added.
   */
  update(changes: Iterable<readonly [string, number]>): void {
    const last = new Map<string, number>(); // a member listed twice: the last count wins
    for (const [m, c] of changes) {
      checkMember('HashRing.update', m);
      last.set(m, integer('HashRing.update', 'count', c, 0, MAX_POINTS_PER_MEMBER));
    }
    this.apply([...last]);
  }

  /**
   * rebuild builds, beside this ring, a new one holding this ring's members with `changes` applied (as
   * `update` applies them; a member listed twice: the last wins), a slice at a time: each `step()` of
   * the answer does about `stepSize` units of work (a point kept, sorted or merged is one, a point
   * hashed eight, an element of fresh memory three, a member's map work 64–256; a unit is ~5 ns) so that a large change — a first million points, every member's count halving or
   * doubling — need not block the event loop. This ring keeps answering lookups meanwhile and must
   * not change until the build completes (a step then throws). The new ring owns every key as one
   * built by `update` would: the points kept are filtered from this ring in order, the new ones hashed
   * (without building their names, for the default hash and names), radix-sorted and merged in.
   * `changes` is read in the steps too (a lazy iterable costs nothing up front), so a bad member or
   * count throws from the step that reads it. `stepSize` defaults to Infinity (one step).
   */
  rebuild(changes: Iterable<readonly [string, number]>, stepSize = Infinity): RingBuild {
    if (!(stepSize >= 1)) throw new RangeError(`HashRing.rebuild: stepSize must be ≥ 1, got ${String(stepSize)}`);
    const next = new HashRing({ replicas: this.replicas, hash: this.hash, pointName: this.pointName });
    const steps = rebuildSteps(
      () => this.state(),
      () => this.version,
      this.hash,
      this.pointName,
      changes[Symbol.iterator](),
      stepSize,
    );
    let done = false;
    return {
      ring: next,
      step: () => {
        if (done) return true;
        const r = steps.next();
        if (r.done !== true) return false;
        done = true;
        // A step that threw ends the generator: later steps answer done with no state to install.
        if (r.value !== undefined) next.install(r.value);
        return true;
      },
    };
  }

  /** pointsOf answers how many virtual nodes `member` holds (0 when it is not on the ring). */
  pointsOf(member: string): number {
    const s = this.slots.get(member);
    return s === undefined ? 0 : this.counts[s]!;
  }

  /** pointsAt answers how many virtual nodes the member in `slot` (see `slotOf`) holds; 0 for a free slot. */
  pointsAt(slot: number): number {
    return this.counts[slot] ?? 0;
  }

  /** get returns the member that owns `key`, or undefined when the ring is empty. */
  get(key: string): string | undefined {
    if (this.length === 0) return undefined;
    return this.names[this.owners[this.search(this.hash(key) >>> 0)]!];
  }

  /**
   * position returns the index of the virtual node that owns `key` (−1 when empty). Walk on with
   * `memberAt(position + i)` to visit the following virtual nodes clockwise (bounded-load hashing).
   */
  position(key: string): number {
    if (this.length === 0) return -1;
    return this.search(this.hash(key) >>> 0);
  }

  /** pointCount is the number of virtual nodes on the ring. */
  get pointCount(): number {
    return this.length;
  }

  /** memberAt returns the member of virtual node `position` (taken modulo the ring's size). */
  memberAt(position: number): string {
    return this.names[this.memberIndexAt(position)]!;
  }

  /**
   * memberIndexAt is `memberAt` as the member's slot: a small integer, stable while the member stays
   * on the ring (`slotOf` answers it too), for callers that keep per-member arrays.
   */
  memberIndexAt(position: number): number {
    const n = this.length;
    if (position >= 0 && position < n) return this.owners[position]!;
    return this.owners[((position % n) + n) % n]!;
  }

  /** slotOf answers the slot of `member` (see `memberIndexAt`), or −1 when it is not on the ring. */
  slotOf(member: string): number {
    return this.slots.get(member) ?? -1;
  }

  /**
   * shares answers each member's share of the hash space (the arcs that end at its points), summing
   * to 1: how evenly the ring spreads uniformly hashed keys, measured exactly instead of by sampling.
   */
  shares(): Map<string, number> {
    const out = new Map<string, number>();
    const n = this.length;
    for (let i = 0; i < n; i++) {
      const arc = i === 0 ? this.points[0]! + 2 ** 32 - this.points[n - 1]! : this.points[i]! - this.points[i - 1]!;
      const m = this.names[this.owners[i]!]!;
      out.set(m, (out.get(m) ?? 0) + arc / 2 ** 32);
    }
    return out;
  }

  /** search finds the first virtual node with hash ≥ h, wrapping to 0. */
  private search(h: number): number {
    const i = this.lowerBound(h);
    return i === this.length ? 0 : i;
  }

  /** apply sets each listed member's count: the points dropped go out in one pass, the new ones merge in. */
  private apply(changes: [string, number][]): void {
    if (changes.length === 0) return;
    if (this.length === 0 && changes.length > 1) {
      // A first build: hashing without names and a radix sort beat hashing names and merging.
      let total = 0;
      for (const [, c] of changes) total += c;
      if (total >= RADIX_FROM) return this.adopt(this.rebuild(changes));
    }
    const drop = new Map<number, [keep: number, had: number]>();
    const grow: [slot: number, from: number, to: number][] = [];
    let removed = 0;
    for (const [m, count] of changes) {
      let slot = this.slots.get(m);
      const had = slot === undefined ? 0 : this.counts[slot]!;
      if (count === had) continue;
      if (slot === undefined) {
        if (this.slots.size >= MAX_MEMBERS) throw new RangeError(`HashRing: at most ${MAX_MEMBERS} members`);
        slot = this.free.pop() ?? this.names.length;
        this.slots.set(m, slot);
        this.names[slot] = m;
        this.sorted = undefined;
      }
      this.counts[slot] = count;
      this.version++;
      if (count < had) {
        drop.set(slot, [count, had]);
        removed += had - count;
      } else grow.push([slot, had, count]);
    }
    if (removed > 0) this.dropPoints(drop, removed);
    if (grow.length > 0) this.addPoints(grow);
    for (const [slot, [keep]] of drop) {
      if (keep > 0) continue;
      this.slots.delete(this.names[slot]!);
      this.names[slot] = '';
      this.free.push(slot);
      this.sorted = undefined;
    }
  }

  /**
   * dropPoints removes, for each slot in `drop`, its points `keep … had − 1`. A few points are found
   * by their (recomputed) hashes and the blocks between them move down; many go in one filtering pass
   * that reads each point's replica index (no hashing: halving every member's points at 2²⁰ points
   * takes one pass over the arrays).
   */
  private dropPoints(drop: Map<number, [keep: number, had: number]>, removed: number): void {
    const { points, owners, ranks } = this;
    const n = this.length;
    if (removed * 16 < n) {
      const at: number[] = [];
      for (const [slot, [keep, had]] of drop) {
        const name = this.names[slot]!;
        for (let r = keep; r < had; r++) {
          const h = this.hash(this.pointName(name, r)) >>> 0;
          for (let i = this.lowerBound(h); i < n && points[i] === h; i++) {
            if (owners[i] === slot && ranks[i] === r) {
              at.push(i);
              break;
            }
          }
        }
      }
      at.sort((a, b) => a - b);
      let w = at[0]!;
      for (let i = 0; i < at.length; i++) {
        const from = at[i]! + 1;
        const to = i + 1 < at.length ? at[i + 1]! : n;
        points.copyWithin(w, from, to);
        owners.copyWithin(w, from, to);
        ranks.copyWithin(w, from, to);
        w += to - from;
      }
      this.length = w;
    } else {
      // keepOf[slot]: how many points the slot keeps; members not changing keep all.
      const keepOf = new Uint32Array(this.names.length).fill(MAX_POINTS_PER_MEMBER);
      for (const [slot, [keep]] of drop) keepOf[slot] = keep;
      let w = 0;
      for (let i = 0; i < n; i++) {
        const o = owners[i]!;
        const r = ranks[i]!;
        if (r >= keepOf[o]!) continue;
        points[w] = points[i]!;
        owners[w] = o;
        ranks[w] = r;
        w++;
      }
      this.length = w;
    }
    if (this.points.length > 1024 && this.length * 4 < this.points.length) this.resize(this.length * 2);
  }

  /** lowerBound is the first index whose hash is ≥ h (the ring's length when none is). */
  private lowerBound(h: number): number {
    const pts = this.points;
    let lo = 0;
    let hi = this.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (pts[mid]! < h) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /**
   * addPoints hashes the new points of each (slot, from, to), sorts them, and merges them in from the
   * back. Each new point is packed as hash × 2²¹ + its index in a list ordered by member name then
   * replica, so one native sort of doubles orders them by (hash, name) and the index gives back its
   * member and replica; more than 2²¹ new points go in several merges.
   */
  private addPoints(grow: [slot: number, from: number, to: number][]): void {
    const names = this.names;
    grow.sort((a, b) => (names[a[0]]! < names[b[0]]! ? -1 : names[a[0]]! > names[b[0]]! ? 1 : 0));
    let chunk: [slot: number, from: number, to: number][] = [];
    let k = 0;
    for (const [slot, from, to] of grow) {
      for (let f = from; f < to;) {
        const t = Math.min(to, f + (ADD_CHUNK - k));
        chunk.push([slot, f, t]);
        k += t - f;
        f = t;
        if (k === ADD_CHUNK) {
          this.mergePoints(chunk, k);
          chunk = [];
          k = 0;
        }
      }
    }
    if (k > 0) this.mergePoints(chunk, k);
  }

  /** mergePoints merges `k` ≤ 2²¹ new points, given in (name, replica) order, into the ring. */
  private mergePoints(grow: [slot: number, from: number, to: number][], k: number): void {
    const names = this.names;
    const packed = new Float64Array(k);
    const slotOf = new Uint32Array(k);
    const replicaOf = new Uint32Array(k);
    let p = 0;
    for (const [slot, from, to] of grow) {
      const name = names[slot]!;
      for (let r = from; r < to; r++) {
        slotOf[p] = slot;
        replicaOf[p] = r;
        packed[p] = (this.hash(this.pointName(name, r)) >>> 0) * ADD_CHUNK + p;
        p++;
      }
    }
    packed.sort();
    const n = this.length;
    if (n + k > this.points.length) this.resize(Math.max(Math.ceil((n + k) * 1.25), 64)); // headroom: growth reallocates rarely
    const { points, owners, ranks } = this;
    // Merge from the back: each new point finds its place among the old ones not yet placed by binary
    // search, and the old block above that place moves up in one copy.
    let i = n;
    let w = n + k;
    for (let j = k - 1; j >= 0; j--) {
      const v = packed[j]!;
      const at = v % ADD_CHUNK;
      const h = (v - at) / ADD_CHUNK;
      const slot = slotOf[at]!;
      const name = names[slot]!;
      let lo = 0;
      let hi = i;
      if (i > 0 && (points[i - 1]! < h || (points[i - 1] === h && names[owners[i - 1]!]! <= name))) lo = i; // common at the top
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        const ph = points[mid]!;
        if (ph < h || (ph === h && names[owners[mid]!]! <= name)) lo = mid + 1;
        else hi = mid;
      }
      const moved = i - lo;
      if (moved > 0) {
        points.copyWithin(w - moved, lo, i);
        owners.copyWithin(w - moved, lo, i);
        ranks.copyWithin(w - moved, lo, i);
        w -= moved;
        i = lo;
      }
      w--;
      points[w] = h;
      owners[w] = slot;
      ranks[w] = replicaOf[at]!;
    }
    this.length = n + k;
  }

  /** adopt takes the ring `build` makes (running all its steps) as this ring's state. */
  private adopt(build: RingBuild): void {
    while (!build.step());
    this.install(build.ring.state());
    this.version++;
  }

  /** state is this ring's state as the rebuild reads it (the arrays themselves, not copies). */
  private state(): RingState {
    const { slots, names, counts, free, points, owners, ranks, length } = this;
    return { slots, names, counts, free, points, owners, ranks, length };
  }

  /** install makes `s` this ring's state (a completed rebuild's). */
  private install(s: RingState): void {
    this.slots = s.slots;
    this.names = s.names;
    this.counts = s.counts;
    this.free = s.free;
    this.sorted = undefined;
    this.points = s.points;
    this.owners = s.owners;
    this.ranks = s.ranks;
    this.length = s.length;
  }

  private resize(capacity: number): void {
    const points = new Uint32Array(capacity);
    const owners = new Uint32Array(capacity);
    const ranks = new Uint32Array(capacity);
    points.set(this.points.subarray(0, this.length));
    owners.set(this.owners.subarray(0, this.length));
    ranks.set(this.ranks.subarray(0, this.length));
    this.points = points;
    this.owners = owners;
    this.ranks = ranks;
  }
}
