/**
 * LruCache is a least-recently-used cache bounded by bytes (groupcache `lru`, GeeCache day 1), with an
 * optional expiry time per entry. It lives in core because two modules keep entries in it: the cache's
 * `Group` (values by bytes) and the limiters' `PeriodLimiter` (windows by count: each sized 1); the
 * package ships this one LRU, and `bulwark/cache` exports it.
 *
 * It is built the way isaacs/node-lru-cache is built, because bench/cache.bench.ts showed that a
 * `Map`-order LRU (delete + set on every hit) is slower than lru-cache in `maxSize` mode: entries live
 * in integer slots; the recency list is two `Int32Array`s of links; freed slots go on a free list; a
 * `get` allocates nothing. The arrays grow by doubling, since a byte bound says nothing about how many
 * entries fit.
 *
 * The key index is our own open-addressing table, not a `Map`: under a high miss rate (Zipf, 10 % of
 * the keys fit) the Map's get + set + delete per miss dominated. `table` is a power-of-two Int32Array of
 * slot numbers, twice the slot capacity (load ≤ ½), probed linearly from `keyHash(key) & mask`; each
 * slot keeps its hash, so a probe compares integers before strings and growing or deleting never
 * rehashes a string. Deletion shifts the probe run back (no tombstones), so churn never degrades it.
 */
import { randomBytes } from 'node:crypto';
import { systemClock, type Clock } from './clock.js';
import { clockOption, fn, integer, options as checkOptions, showValue, type OptionKeys } from './validate.js';

/** The keys of LruCacheOptions, all of them: any other is refused (see `options`). */
const LRU_CACHE_KEYS = { maxBytes: true, sizeOf: true, onEvict: true, clock: true, trackAddedAt: true } as const satisfies OptionKeys<LruCacheOptions<unknown>>;

/** LruCacheOptions configures an LruCache. */
export interface LruCacheOptions<V> {
  /** The most bytes the entries may take, as measured by `sizeOf`. Required. */
  maxBytes: number;
  /** Measures an entry in bytes. Defaults to the key's length plus the value's `length` (0 for values without one). */
  sizeOf?: (key: string, value: V) => number;
  /** Called with each entry removed to make room, by `removeOldest`, or because it expired; not on `remove` or replacement. Defaults to none. */
  onEvict?: (key: string, value: V) => void;
  /** The clock expiry times are read against (and add times, with `trackAddedAt`). Defaults to `systemClock`. */
  clock?: Clock;
  /** Records when each entry was added or last replaced, on the clock, for `addedAt`: a clock read per `add`. Defaults to false. */
  trackAddedAt?: boolean;
}

/** Defaults for LruCacheOptions. */
export const lruCacheDefaults = Object.freeze({ initialSlots: 16 });

const NONE = -1;

/**
 * SEED is drawn once per process, as V8 seeds its own Map hashing: keys arrive from peers, and a fixed
 * hash would let whoever chooses keys precompute collisions that turn every lookup into a long probe.
 */
const SEED = randomBytes(4).readInt32LE(0);

/**
 * keyHash is seeded FNV-1a over the key's UTF-16 units taken two at a time (a 32-bit word a step: half
 * the multiplications of one unit a step, and each step still a bijection of the state for a given
 * word), the length, and a murmur3 finalizer (cheap for short keys; the low bits index the table). Exported for
 * tests only.
 */
export function keyHash(key: string): number {
  let h = (0x811c9dc5 ^ SEED) | 0;
  const n = key.length;
  let i = 0;
  for (; i + 1 < n; i += 2) h = Math.imul(h ^ (key.charCodeAt(i) | (key.charCodeAt(i + 1) << 16)), 0x01000193);
  if (i < n) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  h ^= n; // "a" and "a\0" fold to one word: the length tells them apart
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return h;
}

function defaultSizeOf(key: string, value: unknown): number {
  const len = (value as { length?: unknown } | null | undefined)?.length;
  return key.length + (typeof len === 'number' ? len : 0);
}

/** LruCache maps string keys to values, evicting the least recently used when over its byte budget. */
export class LruCache<V> {
  /** The byte budget. */
  readonly maxBytes: number;
  private readonly sizeOf: (key: string, value: V) => number;
  private readonly onEvict: ((key: string, value: V) => void) | undefined;
  private readonly clock: Clock;
  /** table[p] is a slot number or NONE; length is a power of two, 2 × the slot capacity. */
  private table: Int32Array;
  private mask: number;
  /** hashes[i] is keyHash(keys[i]). */
  private hashes: Int32Array;
  private count = 0;
  /**
   * The key of the last get that missed and its hash: the add that usually follows hashes it once. Only
   * a miss notes it and only add reads it, so a hit compares no strings.
   */
  private missKey: string | undefined = undefined;
  private missHash = 0;
  private keys: (string | undefined)[] = [];
  private vals: (V | undefined)[] = [];
  /** links[2i] is slot i's previous (more recent) slot, links[2i + 1] its next; side by side, one cache line. */
  private links: Int32Array;
  private sizes: Float64Array;
  /** expiresAt per slot (0 = never); allocated on the first entry that expires. */
  private expires: Float64Array | undefined;
  /** addedAt per slot (clock time of its last add), with trackAddedAt; else undefined. */
  private added: Float64Array | undefined;
  private free: number[] = [];
  private used = 0;
  private head = NONE; // most recent
  private tail = NONE; // least recent
  private total = 0;

  constructor(options: LruCacheOptions<V>) {
    const o = checkOptions('LruCache', options, LRU_CACHE_KEYS);
    this.maxBytes = integer('LruCache', 'maxBytes', o.maxBytes, 0);
    this.sizeOf = o.sizeOf === undefined ? defaultSizeOf : fn<(key: string, value: V) => number>('LruCache', 'sizeOf', o.sizeOf);
    this.onEvict = o.onEvict === undefined ? undefined : fn<(key: string, value: V) => void>('LruCache', 'onEvict', o.onEvict);
    this.clock = clockOption('LruCache', o.clock, systemClock);
    const n = lruCacheDefaults.initialSlots;
    if (o.trackAddedAt !== undefined && typeof o.trackAddedAt !== 'boolean')
      throw new TypeError(`LruCache: trackAddedAt must be a boolean, got ${showValue(o.trackAddedAt)}`);
    if (o.trackAddedAt === true) this.added = new Float64Array(n);
    this.links = new Int32Array(2 * n);
    this.sizes = new Float64Array(n);
    this.hashes = new Int32Array(n);
    this.table = new Int32Array(2 * n).fill(NONE);
    this.mask = 2 * n - 1;
  }

  /** length is the number of entries (expired ones included until they are touched or evicted). */
  get length(): number {
    return this.count;
  }

  /** bytes is the sum of the entries' sizes; never more than `maxBytes`. */
  get bytes(): number {
    return this.total;
  }

  /** has tells whether `key` has an unexpired entry, without touching its recency. */
  has(key: string): boolean {
    const i = this.find(key, keyHash(key));
    return i !== undefined && !this.expired(i);
  }

  /** get returns the value for `key` and marks it most recently used; undefined when absent or expired. */
  get(key: string): V | undefined {
    const h = keyHash(key);
    const i = this.find(key, h);
    if (i === undefined) {
      this.missKey = key;
      this.missHash = h;
      return undefined;
    }
    if (this.expires !== undefined && this.expired(i)) {
      this.evict(i);
      return undefined;
    }
    if (i !== this.head) this.moveToHead(i);
    return this.vals[i];
  }

  /** expiresAt returns when `key`'s entry expires on the cache's clock: 0 for never, undefined when absent. */
  expiresAt(key: string): number | undefined {
    const i = this.find(key, keyHash(key));
    if (i === undefined) return undefined;
    return this.expires === undefined ? 0 : this.expires[i]!;
  }

  /**
   * addedAt answers when `key`'s entry was added or last replaced, on the cache's clock; undefined when
   * absent, or when the cache was made without `trackAddedAt`. Like `expiresAt`, it neither touches
   * recency nor checks expiry (an expired entry not yet touched still answers): read it after a `get`.
   */
  addedAt(key: string): number | undefined {
    if (this.added === undefined) return undefined;
    const i = this.find(key, keyHash(key));
    return i === undefined ? undefined : this.added[i];
  }

  /**
   * add puts `value` under `key` as the most recently used entry, replacing any entry there, then evicts
   * the least recently used entries until the cache fits its budget. `expiresAt` (clock time, 0 = never)
   * makes the entry vanish at that time. An entry larger than `maxBytes` is not stored: add answers false.
   */
  add(key: string, value: V, expiresAt = 0): boolean {
    const size = this.sizeOf(key, value);
    if (!(size >= 0) || size > this.maxBytes) {
      this.remove(key);
      return false;
    }
    const h = key === this.missKey ? this.missHash : keyHash(key);
    let i = this.find(key, h);
    if (i !== undefined) {
      this.total += size - this.sizes[i]!;
      this.vals[i] = value;
      this.sizes[i] = size;
      if (i !== this.head) this.moveToHead(i);
    } else {
      i = this.allocate();
      this.keys[i] = key;
      this.vals[i] = value;
      this.sizes[i] = size;
      this.insert(i, h);
      this.total += size;
      this.linkHead(i);
    }
    if (expiresAt !== 0 || this.expires !== undefined) {
      if (this.expires === undefined) this.expires = new Float64Array(this.sizes.length);
      this.expires[i] = expiresAt;
    }
    if (this.added !== undefined) this.added[i] = this.clock.now();
    while (this.total > this.maxBytes && this.tail !== i) this.evict(this.tail);
    return true;
  }

  /** remove deletes `key`'s entry, if any, without calling `onEvict`; answers whether there was one. */
  remove(key: string): boolean {
    const i = this.find(key, keyHash(key));
    if (i === undefined) return false;
    this.drop(i);
    return true;
  }

  /** removeOldest evicts the least recently used entry (calling `onEvict`) and answers its key. */
  removeOldest(): string | undefined {
    if (this.tail === NONE) return undefined;
    const key = this.keys[this.tail];
    this.evict(this.tail);
    return key;
  }

  /** clear deletes every entry without calling `onEvict`. */
  clear(): void {
    this.table.fill(NONE);
    this.count = 0;
    this.keys = [];
    this.vals = [];
    this.free = [];
    this.used = 0;
    this.head = this.tail = NONE;
    this.total = 0;
    this.expires = undefined;
  }

  /** keysByRecency lists the keys from most to least recently used (for tests and debugging). */
  keysByRecency(): string[] {
    const out: string[] = [];
    for (let i = this.head; i !== NONE; i = this.links[2 * i + 1]!) out.push(this.keys[i]!);
    return out;
  }

  /** find answers the slot of `key`, whose hash is `h`, or undefined. */
  private find(key: string, h: number): number | undefined {
    const t = this.table;
    const mask = this.mask;
    for (let p = h & mask; ; p = (p + 1) & mask) {
      const s = t[p]!;
      if (s === NONE) return undefined;
      if (this.hashes[s] === h && this.keys[s] === key) return s;
    }
  }

  /** insert indexes slot `i` (not yet indexed) under hash `h`. */
  private insert(i: number, h: number): void {
    this.hashes[i] = h;
    const t = this.table;
    const mask = this.mask;
    let p = h & mask;
    while (t[p] !== NONE) p = (p + 1) & mask;
    t[p] = i;
    this.count++;
  }

  /** unindex removes slot `i` from the table, shifting later members of its probe run back into the gap. */
  private unindex(i: number): void {
    const t = this.table;
    const mask = this.mask;
    const hashes = this.hashes;
    let gap = hashes[i]! & mask;
    while (t[gap] !== i) gap = (gap + 1) & mask;
    for (let j = (gap + 1) & mask; ; j = (j + 1) & mask) {
      const s = t[j]!;
      if (s === NONE) break;
      // s may fill the gap unless its home lies cyclically in (gap, j].
      const home = hashes[s]! & mask;
      if (((j - home) & mask) >= ((j - gap) & mask)) {
        t[gap] = s;
        gap = j;
      }
    }
    t[gap] = NONE;
    this.count--;
  }

  private expired(i: number): boolean {
    if (this.expires === undefined) return false;
    const at = this.expires[i]!;
    return at !== 0 && this.clock.now() >= at;
  }

  private evict(i: number): void {
    const key = this.keys[i]!;
    const value = this.vals[i] as V;
    this.drop(i);
    this.onEvict?.(key, value);
  }

  private drop(i: number): void {
    this.unindex(i);
    this.total -= this.sizes[i]!;
    this.unlink(i);
    this.keys[i] = undefined;
    this.vals[i] = undefined;
    if (this.expires !== undefined) this.expires[i] = 0;
    this.free.push(i);
  }

  private allocate(): number {
    if (this.free.length > 0) return this.free.pop()!;
    if (this.used === this.sizes.length) this.grow();
    return this.used++;
  }

  private grow(): void {
    const n = this.sizes.length * 2;
    const grow = <T extends Int32Array | Float64Array>(a: T, make: (n: number) => T): T => {
      const b = make(n);
      b.set(a);
      return b;
    };
    const links = new Int32Array(2 * n);
    links.set(this.links);
    this.links = links;
    this.sizes = grow(this.sizes, (k) => new Float64Array(k));
    this.hashes = grow(this.hashes, (k) => new Int32Array(k));
    this.rebuildTable(2 * n);
    if (this.expires !== undefined) this.expires = grow(this.expires, (k) => new Float64Array(k));
    if (this.added !== undefined) this.added = grow(this.added, (k) => new Float64Array(k));
  }

  /** rebuildTable indexes every live slot in a fresh table of `size` positions. */
  private rebuildTable(size: number): void {
    const t = new Int32Array(size).fill(NONE);
    const mask = size - 1;
    for (let i = this.head; i !== NONE; i = this.links[2 * i + 1]!) {
      let p = this.hashes[i]! & mask;
      while (t[p] !== NONE) p = (p + 1) & mask;
      t[p] = i;
    }
    this.table = t;
    this.mask = mask;
  }

  private linkHead(i: number): void {
    const l = this.links;
    l[2 * i] = NONE;
    l[2 * i + 1] = this.head;
    if (this.head !== NONE) l[2 * this.head] = i;
    this.head = i;
    if (this.tail === NONE) this.tail = i;
  }

  private unlink(i: number): void {
    const l = this.links;
    const p = l[2 * i]!;
    const n = l[2 * i + 1]!;
    if (p !== NONE) l[2 * p + 1] = n;
    else this.head = n;
    if (n !== NONE) l[2 * n] = p;
    else this.tail = p;
  }

  private moveToHead(i: number): void {
    this.unlink(i);
    this.linkHead(i);
  }
}
