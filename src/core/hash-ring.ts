/**
 * HashRing is consistent hashing with virtual nodes (groupcache `consistenthash`, GeeCache day 4):
 * each member is placed `replicas` times on a 32-bit ring; a key belongs to the first virtual node
 * clockwise from its hash. Adding or removing one of n members moves about 1/n of the keys.
 *
 * One ring serves both the ring-hash balancer and the cache's peer picker. Lookups are a binary search
 * over a sorted `Uint32Array` and allocate nothing.
 */
import { hash32, type HashFn } from './hash.js';
import { fn, integer } from './validate.js';

/** HashRingOptions configures a HashRing. */
export interface HashRingOptions {
  /** Virtual nodes per member. Defaults to 50 (groupcache); 160+ evens out load balancing. */
  replicas?: number;
  /** The hash for keys and virtual nodes. Defaults to `hash32` (MurmurHash3). */
  hash?: HashFn;
}

/** Member indexes are packed below hashes in one double: 2^20 members at most. */
const MEMBER_SPACE = 2 ** 20;
const MAX_MEMBERS = MEMBER_SPACE;

/** Defaults for HashRingOptions. */
export const hashRingDefaults = Object.freeze({ replicas: 50 });

/** HashRing maps keys to members. */
export class HashRing {
  readonly replicas: number;
  private readonly hash: HashFn;
  private readonly memberSet = new Set<string>();
  private memberList: string[] = [];
  /** Sorted hashes of the virtual nodes. */
  private points = new Uint32Array(0);
  /** owners[i] indexes memberList: the member of points[i]. */
  private owners = new Uint32Array(0);

  constructor(options: HashRingOptions = {}) {
    this.replicas = integer('HashRing', 'replicas', options.replicas ?? hashRingDefaults.replicas, 1, 1 << 16);
    this.hash = options.hash === undefined ? hash32 : fn('HashRing', 'hash', options.hash);
  }

  /** size is the number of members. */
  get size(): number {
    return this.memberList.length;
  }

  /** members lists the members, sorted (the index order used by `memberIndexAt`). */
  members(): readonly string[] {
    return this.memberList;
  }

  /** has tells whether `member` is on the ring. */
  has(member: string): boolean {
    return this.memberSet.has(member);
  }

  /** add puts members on the ring; members already there are ignored. */
  add(...members: string[]): void {
    let changed = false;
    for (const m of members) {
      if (typeof m !== 'string' || m.length === 0) throw new TypeError(`HashRing.add: a member must be a non-empty string, got ${String(m)}`);
      if (!this.memberSet.has(m)) {
        this.memberSet.add(m);
        changed = true;
      }
    }
    if (changed) this.rebuild();
  }

  /** remove takes members off the ring; members not there are ignored. */
  remove(...members: string[]): void {
    let changed = false;
    for (const m of members) changed = this.memberSet.delete(m) || changed;
    if (changed) this.rebuild();
  }

  /** set replaces the membership with `members` in one rebuild. */
  set(members: Iterable<string>): void {
    this.memberSet.clear();
    for (const m of members) {
      if (typeof m !== 'string' || m.length === 0) throw new TypeError(`HashRing.set: a member must be a non-empty string, got ${String(m)}`);
      this.memberSet.add(m);
    }
    this.rebuild();
  }

  /** get returns the member that owns `key`, or undefined when the ring is empty. */
  get(key: string): string | undefined {
    if (this.points.length === 0) return undefined;
    return this.memberList[this.owners[this.search(this.hash(key) >>> 0)]!];
  }

  /**
   * position returns the index of the virtual node that owns `key` (−1 when empty). Walk on with
   * `memberAt(position + i)` to visit the following virtual nodes clockwise (bounded-load hashing).
   */
  position(key: string): number {
    if (this.points.length === 0) return -1;
    return this.search(this.hash(key) >>> 0);
  }

  /** points is the number of virtual nodes on the ring. */
  get pointCount(): number {
    return this.points.length;
  }

  /** memberAt returns the member of virtual node `position` (taken modulo the ring's size). */
  memberAt(position: number): string {
    const n = this.points.length;
    return this.memberList[this.owners[((position % n) + n) % n]!]!;
  }

  /** memberIndexAt is `memberAt` as an index into `members()`, for callers that keep per-member arrays. */
  memberIndexAt(position: number): number {
    const n = this.points.length;
    return this.owners[((position % n) + n) % n]!;
  }

  /** search finds the first virtual node with hash ≥ h, wrapping to 0. */
  private search(h: number): number {
    const pts = this.points;
    let lo = 0;
    let hi = pts.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (pts[mid]! < h) lo = mid + 1;
      else hi = mid;
    }
    return lo === pts.length ? 0 : lo;
  }

  private rebuild(): void {
    const members = [...this.memberSet].sort();
    const r = this.replicas;
    const n = members.length * r;
    if (members.length > MAX_MEMBERS) throw new RangeError(`HashRing: at most ${MAX_MEMBERS} members, got ${members.length}`);
    // Each virtual node packed as hash × 2^20 + member index (exact in a double below 2^53), so one
    // native typed-array sort orders by hash and breaks ties by member name order: every node agrees.
    const packed = new Float64Array(n);
    for (let m = 0; m < members.length; m++) {
      const member = members[m]!;
      for (let i = 0; i < r; i++) packed[m * r + i] = (this.hash(`${i}-${member}`) >>> 0) * MEMBER_SPACE + m;
    }
    packed.sort();
    const points = new Uint32Array(n);
    const owners = new Uint32Array(n);
    for (let i = 0; i < n; i++) {
      const v = packed[i]!;
      const m = v % MEMBER_SPACE;
      points[i] = (v - m) / MEMBER_SPACE;
      owners[i] = m;
    }
    this.memberList = members;
    this.points = points;
    this.owners = owners;
  }
}
