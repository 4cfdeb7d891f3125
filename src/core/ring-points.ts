/**
 * The bulk mechanics of HashRing's rebuild, over plain typed arrays: hashing many virtual nodes, and
 * sorting them by hash. Both are written to run in slices (the rebuild yields between them), so each
 * works on a range `[from, to)` and keeps its state in the arrays it is given.
 *
 * Hashing: the default virtual node name is `` `${index}-${member}` `` hashed with `hash32`; building
 * that string for each of a million points costs more than the hash itself, so `PointHasher` writes
 * the index's digits, the dash and the member's UTF-16 code units into one reused buffer and runs
 * MurmurHash3 over it: the same value `hash32` gives the string (a test checks), ~3× faster.
 *
 * Sorting: least-significant-digit radix sort of uint32 hashes in four 8-bit passes (stable, so
 * points keep the order they were generated in among equal hashes), instead of a comparator sort.
 */

/** Member slots are packed below hashes in one double while sorting new points: 2^20 members at most. */
export const MAX_MEMBERS = 2 ** 20;
/** The most virtual nodes one member may hold (`HashRing.setPoints`). */
export const MAX_POINTS_PER_MEMBER = 1 << 24;

/** defaultPointName is HashRing's default virtual node name, `` `${index}-${member}` `` (what PointHasher hashes). */
export function defaultPointName(member: string, index: number): string {
  return `${index}-${member}`;
}

/** checkMember throws a TypeError naming `owner` unless `m` is a non-empty string. */
export function checkMember(owner: string, m: unknown): asserts m is string {
  if (typeof m !== 'string' || m.length === 0) throw new TypeError(`${owner}: a member must be a non-empty string, got ${String(m)}`);
}

const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;

/** PointHasher hashes `` `${index}-${member}` `` with hash32 for many indexes of one member at a time. */
export class PointHasher {
  private buf = new Uint16Array(64);
  private member = '';
  /** Digits of the index the member's code units are placed after (0: not placed yet). */
  private placedAfter = 0;

  /** hash answers hash32(`${index}-${member}`) for an integer 0 ≤ index < 2³². */
  hash(member: string, index: number): number {
    let digits = 1;
    for (let x = index; x >= 10; x = Math.floor(x / 10)) digits++;
    const len = digits + 1 + member.length;
    if (member !== this.member || digits !== this.placedAfter) {
      if (len > this.buf.length) this.buf = new Uint16Array(len * 2);
      const b = this.buf;
      b[digits] = 45; // '-'
      for (let i = 0; i < member.length; i++) b[digits + 1 + i] = member.charCodeAt(i);
      this.member = member;
      this.placedAfter = digits;
    }
    const b = this.buf;
    for (let i = digits - 1, x = index; i >= 0; i--, x = Math.floor(x / 10)) b[i] = 48 + (x % 10);
    let h = 0;
    const pairs = len & ~1;
    for (let i = 0; i < pairs; i += 2) {
      let k = b[i]! | (b[i + 1]! << 16);
      k = Math.imul(k, C1);
      k = (k << 15) | (k >>> 17);
      k = Math.imul(k, C2);
      h ^= k;
      h = (h << 13) | (h >>> 19);
      h = (Math.imul(h, 5) + 0xe6546b64) | 0;
    }
    if (len & 1) {
      let k = b[len - 1]!;
      k = Math.imul(k, C1);
      k = (k << 15) | (k >>> 17);
      k = Math.imul(k, C2);
      h ^= k;
    }
    h ^= len * 2;
    h ^= h >>> 16;
    h = Math.imul(h, 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
    return h >>> 0;
  }
}

/**
 * RadixSort sorts `keys` (uint32) carrying `a` and `b` along, stably, in four passes of 8 bits through
 * the scratch arrays `tmpKeys`, `tmpA`, `tmpB` (same length): 256 buckets keep the scattered writes
 * within cache and TLB reach (16-bit digits, two passes, were slower for all the misses). Call
 * `count` over every range, then `pass(d, from, to)` for d = 0 … 3 over every range in order; after
 * the fourth pass `keys`, `a` and `b` hold the sorted result.
 */
export class RadixSort {
  private readonly counts = new Uint32Array(4 * 256);

  constructor(
    readonly keys: Uint32Array,
    readonly a: Uint32Array,
    readonly b: Uint32Array,
    readonly tmpKeys: Uint32Array,
    readonly tmpA: Uint32Array,
    readonly tmpB: Uint32Array,
  ) {}

  /** count tallies the four digits of keys[from … to). */
  count(from: number, to: number): void {
    const { keys, counts } = this;
    for (let i = from; i < to; i++) {
      const k = keys[i]!;
      counts[k & 0xff]!++;
      counts[256 + ((k >>> 8) & 0xff)]!++;
      counts[512 + ((k >>> 16) & 0xff)]!++;
      counts[768 + (k >>> 24)]!++;
    }
  }

  /** prefix turns the tallies into each bucket's first place (call once, after every `count`). */
  prefix(): void {
    const c = this.counts;
    for (let d = 0; d < 4; d++) {
      let sum = 0;
      for (let v = d * 256; v < d * 256 + 256; v++) {
        const n = c[v]!;
        c[v] = sum;
        sum += n;
      }
    }
  }

  /** pass moves entries [from … to) to their places by digit `d` (0 … 3), between the arrays and the scratch ones. */
  pass(d: number, from: number, to: number): void {
    const even = (d & 1) === 0;
    const sk = even ? this.keys : this.tmpKeys;
    const sa = even ? this.a : this.tmpA;
    const sb = even ? this.b : this.tmpB;
    const dk = even ? this.tmpKeys : this.keys;
    const da = even ? this.tmpA : this.a;
    const db = even ? this.tmpB : this.b;
    const c = this.counts;
    const shift = 8 * d;
    const base = 256 * d;
    for (let i = from; i < to; i++) {
      const k = sk[i]!;
      const at = c[base + ((k >>> shift) & 0xff)]!++;
      dk[at] = k;
      da[at] = sa[i]!;
      db[at] = sb[i]!;
    }
  }
}
/** Points is a ring's three parallel arrays: each point's hash, owner (member slot) and rank. */
export interface Points {
  readonly hashes: Uint32Array;
  readonly owners: Uint32Array;
  readonly ranks: Uint32Array;
}

/**
 * keepPoints copies the points of `src` in [from, to) whose rank is below `keepOf[owner]` to `dst`
 * from index `at` on, in order, and answers the index after the last one copied.
 */
export function keepPoints(src: Points, from: number, to: number, keepOf: Uint32Array, dst: Points, at: number): number {
  const { hashes, owners, ranks } = src;
  const h = dst.hashes;
  const o = dst.owners;
  const r = dst.ranks;
  for (let i = from; i < to; i++) {
    const owner = owners[i]!;
    const rank = ranks[i]!;
    if (rank >= keepOf[owner]!) continue;
    h[at] = hashes[i]!;
    o[at] = owner;
    r[at] = rank;
    at++;
  }
  return at;
}

/**
 * orderTies puts runs of equal hashes among `p`'s points [from, to) (sorted by hash) in order of
 * member name, then rank, by insertion: runs are rare and short (~k² / 2³³ pairs among k points).
 * A run that starts before `from` is ordered too.
 */
export function orderTies(p: Points, names: readonly string[], from: number, to: number): void {
  const { hashes, owners, ranks } = p;
  for (let i = Math.max(1, from); i < to; i++) {
    if (hashes[i] !== hashes[i - 1]) continue;
    for (let j = i; j > 0 && hashes[j - 1] === hashes[j]; j--) {
      const a = names[owners[j - 1]!]!;
      const b = names[owners[j]!]!;
      if (a < b || (a === b && ranks[j - 1]! < ranks[j]!)) break;
      const o = owners[j]!;
      const r = ranks[j]!;
      owners[j] = owners[j - 1]!;
      ranks[j] = ranks[j - 1]!;
      owners[j - 1] = o;
      ranks[j - 1] = r;
    }
  }
}

/**
 * MergeState is where a back-to-front merge stands: the next kept point `i` (of `into`'s front), the
 * next new point `j` (of `from`) and the next place written `w`.
 */
export interface MergeState {
  i: number;
  j: number;
  w: number;
}

/**
 * mergeBack merges sorted new points (`from`, up to `s.j`) into `into`, whose front holds sorted kept
 * points (up to `s.i`), from the back, for about `budget` moves; answers the moves made. On equal hash
 * and name a kept point goes first. Done when `s.j` < 0 (the kept points left are in place).
 */
export function mergeBack(into: Points, from: Points, names: readonly string[], s: MergeState, budget: number): number {
  const { hashes: points, owners, ranks } = into;
  const { hashes, owners: ownerOf, ranks: rankOf } = from;
  let { i, j, w } = s;
  let spent = 0;
  for (; j >= 0 && spent < budget; j--, spent++) {
    const h = hashes[j]!;
    const o = ownerOf[j]!;
    for (; i >= 0 && (points[i]! > h || (points[i] === h && names[owners[i]!]! > names[o]!)); i--, w--, spent++) {
      points[w] = points[i]!;
      owners[w] = owners[i]!;
      ranks[w] = ranks[i]!;
    }
    points[w] = h;
    owners[w] = o;
    ranks[w] = rankOf[j]!;
    w--;
  }
  s.i = i;
  s.j = j;
  s.w = w;
  return spent;
}

/**
 * hashRange writes the points `from` … `to` − 1 of member `slot` (named `name`) at `p`'s index `at` on:
 * hash (by `hasher`, or `hash` of `pointName`), owner, rank.
 */
export function hashRange(
  p: Points,
  at: number,
  slot: number,
  name: string,
  from: number,
  to: number,
  hasher: PointHasher | undefined,
  hash: (key: string) => number,
  pointName: (member: string, index: number) => string,
): void {
  const { hashes, owners, ranks } = p;
  for (let r = from; r < to; r++, at++) {
    hashes[at] = hasher !== undefined ? hasher.hash(name, r) : hash(pointName(name, r)) >>> 0;
    owners[at] = slot;
    ranks[at] = r;
  }
}
