/**
 * BreakerGroup: breakers by name (go-zero `core/breaker/breakers.go`): one per downstream, instance or
 * method, made on first use by a factory. Names can opt out (go-zero `NoBreakerFor`). Unlike go-zero's
 * global map, the group is bounded: a breaker unused for `idleMs` is evicted when new breakers are made,
 * and the group never holds more than `maxBreakers`, so a million distinct names (a key made from user
 * input, a churning fleet) cannot grow memory without bound. No timers: eviction happens on creation.
 *
 * `get` is a bare `Map.get` plus a compare: the map holds the breakers themselves (no entry object, so
 * a lookup among 100 000 names touches one object fewer), and the group notes when it last handed a
 * breaker out in a field the breaker carries (`GROUP_USED`, declared first by both breakers so it sits
 * in the cache line a caller loads anyway; added to a breaker of your own when it joins). The mark is
 * a time slice number (a small integer, `idleMs / 16` per slice), not a time: V8 keeps an integer field
 * inside the object but a fractional time in a separate box, one more cache miss per get, and a breaker
 * is written at most once per slice. Map order approximates recency without touching the map on every
 * call: the sweep looks at the oldest insertions, evicts those idle, and moves those used since they
 * were placed (`GROUP_PLACED`) to the back. Idleness is judged in whole slices, so a breaker is evicted
 * after `idleMs` to `idleMs × 17/16` without use.
 */
import type { Clock } from '../core/clock.js';
import { ClosedError } from '../core/errors.js';
import { neverAborted, type Task } from '../core/guard.js';
import { clockOption, fn as fnOption, integer, options as optionsObject, positive, showValue, type OptionKeys } from '../core/validate.js';
import { getDefaultCoarseClock } from '../core/coarse-clock.js';
import type { MetricsContext, MetricsDescription } from '../core/metrics-description.js';
import { Emitter, type Disposer } from '../core/events.js';
import type { Reconfigurable } from '../core/reconfigurable.js';
import { describeBreakerGroup } from './breaker-metrics.js';
import type { Breaker, BreakerExecuteOptions, BreakerFleetOptions, BreakerGroupOptions, BreakerGroupStats } from './types.js';
import { GROUP_PLACED, GROUP_USED } from './group-slots.js';
import { SreBreaker } from './sre-breaker.js';

/** The keys of BreakerGroupOptions, all of them: any other is refused (see `options`). */
const BREAKER_GROUP_KEYS = {
  factory: true,
  exclude: true,
  idleMs: true,
  maxBreakers: true,
  clock: true,
  fleet: true,
} as const satisfies OptionKeys<BreakerGroupOptions>;

/** Entries a sweep may examine beyond the ones it must evict (bounds the pause). */
const SWEEP_STEPS = 64;

/** Slices per `idleMs`: the resolution of idleness (see the module comment). */
const SLICES_PER_IDLE = 16;
/** Slice numbers stay below this (V8's small integers); past it the marks are renumbered (rare: 2³⁰ slices). */
const SLICE_LIMIT = 2 ** 30;

/** Defaults for BreakerGroupOptions. */
export const breakerGroupDefaults = Object.freeze({ idleMs: 600_000, maxBreakers: 100_000 });

/** Marks is what the group keeps on each breaker it holds. */
interface Marks {
  [GROUP_USED]: number;
  [GROUP_PLACED]: number;
}

/**
 * BreakerGroupArgs is the constructor's argument: the factory may be left out only when the default
 * breaker (an SreBreaker) is a `B`, so `new BreakerGroup<CircuitBreaker>()` does not compile.
 */
export type BreakerGroupArgs<B extends Breaker> = SreBreaker extends B
  ? [options?: BreakerGroupOptions<B>]
  : [options: BreakerGroupOptions<B> & { factory: (name: string) => B }];

/** The default factory; the constructor's type lets it stand in for a factory of B only when an SreBreaker is a B. */
function sreFactory<B extends Breaker>(name: string): B {
  const b: Breaker = new SreBreaker({ name });
  return b as B;
}

/** The group's options `reconfigure` can change; the others are fixed for its life. */
const GROUP_LIVE_KEYS = ['idleMs', 'maxBreakers'] as const;

/** BreakerMade is what `onCreate` listeners hear: the name and the breaker the group just made for it. */
export interface BreakerMade<B extends Breaker = Breaker> {
  name: string;
  breaker: B;
}

/** BreakerGroup holds breakers by name; see the module comment. */
export class BreakerGroup<B extends Breaker = Breaker> implements Reconfigurable<BreakerGroupOptions<B>> {
  readonly idleMs: number;
  readonly maxBreakers: number;
  /** Typed for any Breaker, so that a BreakerGroup<B> stays a BreakerGroup<Breaker> (onCreate narrows it). */
  private readonly made$ = new Emitter<BreakerMade>();
  private readonly factory: (name: string) => B;
  private readonly fleet: BreakerFleetOptions | undefined;
  private readonly excluded: (name: string) => boolean;
  private readonly clock: Clock;
  private readonly entries = new Map<string, B & Marks>();
  private evictions = 0;
  private made = 0;
  private closed = false;
  /** Breakers made since the last sweep, and how many a sweep may make room for at once. */
  private created = 0;
  private slack: number;
  /** The current time slice (see the module comment), the time it ends, its length, and when slice 1 began. */
  private slice = 1;
  private sliceEnd: number;
  private sliceMs: number;
  /** The options given to the constructor, for reconfigure's check of the fixed ones. */
  private readonly built: BreakerGroupOptions<B>;
  private origin: number;

  constructor(...[options]: BreakerGroupArgs<B>) {
    const o: BreakerGroupOptions<B> = optionsObject('BreakerGroup', options, BREAKER_GROUP_KEYS);
    this.built = { ...o };
    this.factory = o.factory === undefined ? sreFactory : fnOption('BreakerGroup', 'factory', o.factory);
    const ex = o.exclude;
    if (ex === undefined) this.excluded = () => false;
    else if (typeof ex === 'function') this.excluded = ex;
    else if (Array.isArray(ex) && ex.every((n) => typeof n === 'string')) {
      const set = new Set(ex);
      this.excluded = (name) => set.has(name);
    } else throw new TypeError(`BreakerGroup: exclude must be an array of names or a function, got ${showValue(ex)}`);
    this.idleMs = positive('BreakerGroup', 'idleMs', o.idleMs ?? breakerGroupDefaults.idleMs);
    this.maxBreakers = integer('BreakerGroup', 'maxBreakers', o.maxBreakers ?? breakerGroupDefaults.maxBreakers, 1);
    this.clock = clockOption('BreakerGroup', o.clock, getDefaultCoarseClock());
    if (
      o.fleet !== undefined &&
      (o.fleet === null || typeof o.fleet !== 'object' || typeof (o.fleet.store as { join?: unknown } | undefined)?.join !== 'function')
    ) {
      throw new TypeError(`BreakerGroup: fleet.store must be a fleet store (bulwark/fleet), got ${showValue((o.fleet as { store?: unknown } | null)?.store)}`);
    }
    this.fleet = o.fleet;
    this.slack = Math.max(1, Math.floor(this.maxBreakers / 16));
    this.sliceMs = this.idleMs / SLICES_PER_IDLE;
    this.origin = this.clock.now();
    this.sliceEnd = this.origin + this.sliceMs;
  }

  /** options answers the group's options that `reconfigure` can change: `idleMs` and `maxBreakers`. */
  options(): Partial<BreakerGroupOptions<B>> {
    return { idleMs: this.idleMs, maxBreakers: this.maxBreakers };
  }

  /**
   * reconfigure changes the group's own options, `idleMs` and `maxBreakers`, checked as the constructor
   * checks them (a key given as undefined returns to its default), all or nothing; `factory`, `exclude`,
   * `clock` and `fleet` cannot change on a running group (a TypeError says so). A new `idleMs` restarts
   * every member's idle time; a lower `maxBreakers` evicts the least recently used members at once.
   *
   * It does not touch the members: each is a breaker of its own, reconfigured (or isolated) through
   * `get(name)` or `breakers()`, and keeps its state and options when the group's change. A breaker the
   * group makes later is the factory's: to give it options of its own as it is made, listen with
   * `onCreate` (bulwark/rules does, for a client's `<service>/<instance>` breakers).
   */
  reconfigure(partial: Partial<BreakerGroupOptions<B>>): void {
    if (partial === null || typeof partial !== 'object') throw new TypeError(`BreakerGroup: reconfigure takes an object of options, got ${showValue(partial)}`);
    const p: BreakerGroupOptions<B> = optionsObject('BreakerGroup', partial, BREAKER_GROUP_KEYS);
    for (const key of Object.keys(p) as (keyof BreakerGroupOptions<B>)[]) {
      if ((GROUP_LIVE_KEYS as readonly string[]).includes(key) || p[key] === this.built[key]) continue;
      throw new TypeError(`BreakerGroup: ${key} cannot change on a running group (reconfigure), got ${showValue(p[key])}`);
    }
    const idleMs = Object.hasOwn(p, 'idleMs') ? positive('BreakerGroup', 'idleMs', p.idleMs ?? breakerGroupDefaults.idleMs) : this.idleMs;
    const maxBreakers = Object.hasOwn(p, 'maxBreakers')
      ? integer('BreakerGroup', 'maxBreakers', p.maxBreakers ?? breakerGroupDefaults.maxBreakers, 1)
      : this.maxBreakers;
    const self = this as { -readonly [K in 'idleMs' | 'maxBreakers']: number };
    if (idleMs !== this.idleMs) {
      self.idleMs = idleMs;
      this.sliceMs = idleMs / SLICES_PER_IDLE;
      this.origin = this.clock.now();
      this.slice = 1;
      this.sliceEnd = this.origin + this.sliceMs;
      for (const b of this.entries.values()) b[GROUP_USED] = b[GROUP_PLACED] = 1;
    }
    if (maxBreakers !== this.maxBreakers) {
      self.maxBreakers = maxBreakers;
      this.slack = Math.max(1, Math.floor(maxBreakers / 16));
      if (this.entries.size >= maxBreakers) this.sweep(this.slice);
    }
  }

  /**
   * onCreate subscribes to the breakers the group makes, called with each one as it is made, before
   * `get` answers it (so options or an isolation given to it apply from its first call); returns the disposer.
   */
  onCreate(listener: (made: BreakerMade<B>) => void): Disposer {
    return this.made$.on(listener as (made: BreakerMade) => void);
  }

  /** size is the number of breakers held. */
  get size(): number {
    return this.entries.size;
  }

  /** evicted counts the breakers evicted so far. */
  get evicted(): number {
    return this.evictions;
  }

  /**
   * get answers the breaker for `name`, making it on first use; undefined when the name is excluded.
   * Throws ClosedError after `close()`, TypeError for a name that is not a string.
   */
  get(name: string): B | undefined {
    const b = this.entries.get(name);
    if (b !== undefined) {
      const now = this.clock.now();
      if (now >= this.sliceEnd) this.nextSlice(now);
      // Written once per slice: most gets dirty no cache line.
      const slice = this.slice;
      if (b[GROUP_USED] !== slice) b[GROUP_USED] = slice;
      return b;
    }
    return this.make(name);
  }

  /** has tells whether the group holds a breaker for `name` (without making one). */
  has(name: string): boolean {
    return this.entries.has(name);
  }

  /** delete drops the breaker for `name` (without closing it); the next call makes a fresh one. */
  delete(name: string): boolean {
    return this.entries.delete(name);
  }

  /** breakers iterates over the held breakers by name, without marking them used (for status pages and metrics). */
  breakers(): IterableIterator<[string, B]> {
    return this.entries.entries();
  }

  /** names lists the names the group holds breakers for. */
  names(): string[] {
    return [...this.entries.keys()];
  }

  /** clear drops every breaker (without closing them). */
  clear(): void {
    this.entries.clear();
  }

  /**
   * describeMetrics answers the group's families (`breaker_group_…`) and its members' (the breaker
   * families, each member named for its key, with `group` = the group's track name).
   */
  describeMetrics(ctx: MetricsContext): MetricsDescription {
    return describeBreakerGroup(this, ctx, () => this.closed);
  }

  /** stats answers a snapshot: breakers held, made and evicted. */
  stats(): BreakerGroupStats {
    return { size: this.entries.size, created: this.made, evicted: this.evictions };
  }

  /**
   * close closes every breaker the group holds (those that have a `close`) and drops them; later
   * `get` and `execute` calls are refused with ClosedError. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const held = [...this.entries.values()];
    this.entries.clear();
    await Promise.all(held.map((b) => b.close?.()));
  }

  /** Symbol.asyncDispose closes the group (`await using group = new BreakerGroup()`). */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** execute runs `fn` under the breaker for `name` (unguarded when the name is excluded). */
  execute<T>(name: string, fn: Task<T>, options?: BreakerExecuteOptions<T>): Promise<T> {
    let b: B | undefined;
    try {
      b = this.get(name);
    } catch (err) {
      return Promise.reject(err);
    }
    if (b !== undefined) return b.execute(fn, options);
    if (typeof fn !== 'function') return Promise.reject(new TypeError(`BreakerGroup.execute: fn must be a function, got ${showValue(fn)}`));
    try {
      return Promise.resolve(fn(options?.signal ?? neverAborted));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** make answers the breaker for a name the group does not hold yet (the cold half of `get`). */
  private make(name: string): B | undefined {
    if (this.closed) throw new ClosedError('BreakerGroup is closed');
    if (typeof name !== 'string') throw new TypeError(`BreakerGroup: name must be a string, got ${showValue(name)}`);
    if (this.excluded(name)) return undefined;
    const now = this.clock.now();
    if (now >= this.sliceEnd) this.nextSlice(now);
    const slice = this.slice;
    if (++this.created >= this.slack || this.entries.size >= this.maxBreakers) {
      this.created = 0;
      this.sweep(slice);
    }
    const breaker = this.factory(name);
    if (breaker === null || typeof breaker !== 'object' || typeof breaker.execute !== 'function') {
      throw new TypeError(`BreakerGroup: factory must return a Breaker, got ${showValue(breaker)} for ${JSON.stringify(name)}`);
    }
    if (!Object.isExtensible(breaker) && !(GROUP_USED in breaker)) {
      throw new TypeError(
        `BreakerGroup: factory must return an extensible object (the group marks its use on it), got a frozen one for ${JSON.stringify(name)}`,
      );
    }
    if (this.fleet !== undefined) {
      const join = (breaker as { joinFleet?: (f: BreakerFleetOptions) => void }).joinFleet;
      if (typeof join !== 'function')
        throw new TypeError(
          `BreakerGroup: with fleet, factory must make CircuitBreakers or SreBreakers, got ${showValue(breaker)} for ${JSON.stringify(name)}`,
        );
      const key = this.fleet.key === undefined ? name : `${this.fleet.key}/${name}`;
      join.call(breaker, { ...this.fleet, key });
    }
    // Placed now, not used since (used < placed): the next get marks it used.
    const marked = breaker as B & Marks;
    marked[GROUP_USED] = slice - 1;
    marked[GROUP_PLACED] = slice;
    this.entries.set(name, marked);
    this.made++;
    if (this.made$.hasListeners) this.made$.emit({ name, breaker: marked });
    return marked;
  }

  /** nextSlice moves to the slice the clock is in now (renumbering the marks before they outgrow small integers). */
  private nextSlice(now: number): void {
    let slice = Math.floor((now - this.origin) / this.sliceMs) + 1;
    if (slice >= SLICE_LIMIT) {
      // Renumber so the current slice becomes a small number again; marks older than any idleness test clamp to 0.
      const shift = slice - 2 * SLICES_PER_IDLE - 2;
      for (const b of this.entries.values()) {
        b[GROUP_USED] = Math.max(0, b[GROUP_USED] - shift);
        b[GROUP_PLACED] = Math.max(0, b[GROUP_PLACED] - shift);
      }
      this.origin += shift * this.sliceMs;
      slice -= shift;
    }
    if (slice > this.slice) this.slice = slice;
    this.sliceEnd = this.origin + this.slice * this.sliceMs;
  }

  /**
   * sweep makes one pass from the oldest insertions: it evicts idle breakers, and while the group is
   * at `maxBreakers` it evicts down to `maxBreakers − slack` with a second chance (CLOCK): an entry
   * used since it was placed moves to the back instead. One iterator per pass, and passes only every
   * `slack` creations or at the bound, because a fresh Map iterator walks past every deleted slot.
   * An entry is idle when a whole `idleMs` of slices lies between the slice it was last used or placed in and this one.
   */
  private sweep(slice: number): void {
    const entries = this.entries;
    const idleBefore = slice - SLICES_PER_IDLE - 1;
    const target = entries.size >= this.maxBreakers ? this.maxBreakers - this.slack : Infinity;
    let budget = 4 * this.slack + SWEEP_STEPS;
    for (const [name, b] of entries) {
      if (budget-- <= 0) break;
      const pinned = isIsolated(b);
      const placed = b[GROUP_PLACED];
      const used = b[GROUP_USED];
      if (used <= idleBefore && placed <= idleBefore && !pinned) {
        entries.delete(name);
        this.evict(b);
      } else if (entries.size > target) {
        entries.delete(name);
        if (used >= placed || pinned) this.replace(name, b, slice);
        else this.evict(b);
      } else if (placed > idleBefore) {
        break; // every later entry was placed (so used) more recently: none is idle
      } else {
        entries.delete(name); // placed long ago but used since: to the back
        this.replace(name, b, slice);
      }
    }
    while (entries.size >= this.maxBreakers) {
      const name = entries.keys().next().value as string;
      const b = entries.get(name)!;
      entries.delete(name);
      this.evict(b);
    }
  }

  /**
   * evict counts an eviction; a breaker the group joined to a fleet leaves it (its view's timer and
   * watch would otherwise outlive the group's interest; a caller still holding it keeps a plain breaker).
   */
  private evict(b: B): void {
    this.evictions++;
    if (this.fleet !== undefined) void (b as { leaveFleet?: () => Promise<void> }).leaveFleet?.();
  }

  /** replace puts an entry back at the end of the map order, not used since. */
  private replace(name: string, b: B & Marks, slice: number): void {
    b[GROUP_PLACED] = slice;
    b[GROUP_USED] = slice - 1;
    this.entries.set(name, b);
  }
}

function isIsolated(b: unknown): boolean {
  return (b as { isolated?: unknown }).isolated === true;
}

let defaultGroup: BreakerGroup | undefined;

/** getDefaultBreakerGroup answers the process-wide group, made on first use with the default options. */
export function getDefaultBreakerGroup(): BreakerGroup {
  return (defaultGroup ??= new BreakerGroup());
}

/** setDefaultBreakerGroup replaces the process-wide group (undefined: make a fresh one on next use). The old one is not closed. */
export function setDefaultBreakerGroup(group: BreakerGroup | undefined): void {
  if (group !== undefined && !(group instanceof BreakerGroup)) {
    throw new TypeError(`setDefaultBreakerGroup: group must be a BreakerGroup, got ${showValue(group)}`);
  }
  defaultGroup = group;
}
