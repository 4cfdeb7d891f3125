/**
 * BreakerGroup: breakers by name (go-zero `breakers.go`): one per downstream, instance or method, made
 * on first use by a factory. Names can opt out (go-zero `NoBreakerFor`). Unlike go-zero's global map,
 * the group is bounded: a breaker unused for `idleMs` is evicted when new breakers are made, and the
 * group never holds more than `maxBreakers`, so a million distinct names (a key made from user input,
 * a churning fleet) cannot grow memory without bound. No timers: eviction happens on creation.
 *
 * Map order approximates recency without touching the map on every call: each entry records when it
 * was last used and when it was (re)inserted; the sweep looks at the oldest insertions, evicts those
 * idle, and moves those used since to the back.
 */
import type { Clock } from '../core/clock.js';
import { neverAborted, type Task } from '../core/guard.js';
import { clockOption, fn as fnOption, integer, options as optionsObject, positive, showValue } from '../core/validate.js';
import { getDefaultCoarseClock } from '../core/coarse-clock.js';
import type { Breaker, BreakerExecuteOptions } from './index.js';
import { SreBreaker } from './sre-breaker.js';

/** Entries a sweep may examine beyond the ones it must evict (bounds the pause). */
const SWEEP_STEPS = 64;

/** BreakerGroupOptions configures a BreakerGroup. */
export interface BreakerGroupOptions<B extends Breaker = Breaker> {
  /** Makes the breaker for a name. Defaults to `(name) => new SreBreaker({ name })` (go-zero). */
  factory?: (name: string) => B;
  /** Names that get no breaker: their calls run unguarded. A list or a predicate. Defaults to none. */
  exclude?: readonly string[] | ((name: string) => boolean);
  /** A breaker unused for this many milliseconds may be evicted (isolated breakers never are). Defaults to 600 000. */
  idleMs?: number;
  /** The most breakers the group holds; the least recently used goes first. Defaults to 100 000. */
  maxBreakers?: number;
  /** The time source. Defaults to the process-wide coarse clock (`getDefaultCoarseClock()`). */
  clock?: Clock;
}

/** Defaults for BreakerGroupOptions. */
export const breakerGroupDefaults = Object.freeze({ idleMs: 600_000, maxBreakers: 100_000 });

interface Entry<B> {
  breaker: B;
  used: number;
  placed: number;
}

/** BreakerGroup holds breakers by name; see the module comment. */
export class BreakerGroup<B extends Breaker = Breaker> {
  readonly idleMs: number;
  readonly maxBreakers: number;
  private readonly factory: (name: string) => B;
  private readonly excluded: (name: string) => boolean;
  private readonly clock: Clock;
  private readonly entries = new Map<string, Entry<B>>();
  private evictions = 0;
  /** Breakers made since the last sweep, and how many a sweep may make room for at once. */
  private created = 0;
  private readonly slack: number;

  constructor(options?: BreakerGroupOptions<B>) {
    const o = optionsObject('BreakerGroup', options);
    this.factory = o.factory === undefined ? (name) => new SreBreaker({ name }) as unknown as B : fnOption('BreakerGroup', 'factory', o.factory);
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
    this.slack = Math.max(1, Math.floor(this.maxBreakers / 16));
  }

  /** size is the number of breakers held. */
  get size(): number {
    return this.entries.size;
  }

  /** evicted counts the breakers evicted so far. */
  get evicted(): number {
    return this.evictions;
  }

  /** get answers the breaker for `name`, making it on first use; undefined when the name is excluded. */
  get(name: string): B | undefined {
    const now = this.clock.now();
    const e = this.entries.get(name);
    if (e !== undefined) {
      e.used = now;
      return e.breaker;
    }
    if (typeof name !== 'string') throw new TypeError(`BreakerGroup: name must be a string, got ${showValue(name)}`);
    if (this.excluded(name)) return undefined;
    if (++this.created >= this.slack || this.entries.size >= this.maxBreakers) {
      this.created = 0;
      this.sweep(now);
    }
    const breaker = this.factory(name);
    if (breaker === null || typeof breaker !== 'object' || typeof breaker.execute !== 'function') {
      throw new TypeError(`BreakerGroup: factory must return a Breaker, got ${showValue(breaker)} for ${JSON.stringify(name)}`);
    }
    this.entries.set(name, { breaker, used: now, placed: now });
    return breaker;
  }

  /** has tells whether the group holds a breaker for `name` (without making one). */
  has(name: string): boolean {
    return this.entries.has(name);
  }

  /** delete drops the breaker for `name`; the next call makes a fresh one. */
  delete(name: string): boolean {
    return this.entries.delete(name);
  }

  /** names lists the names the group holds breakers for. */
  names(): string[] {
    return [...this.entries.keys()];
  }

  /** clear drops every breaker. */
  clear(): void {
    this.entries.clear();
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
    try {
      return Promise.resolve(fn(options?.signal ?? neverAborted));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * sweep makes one pass from the oldest insertions: it evicts idle breakers, and while the group is
   * at `maxBreakers` it evicts down to `maxBreakers − slack` with a second chance (CLOCK): an entry
   * used since it was placed moves to the back instead. One iterator per pass, and passes only every
   * `slack` creations or at the bound, because a fresh Map iterator walks past every deleted slot.
   */
  private sweep(now: number): void {
    const entries = this.entries;
    const idleBefore = now - this.idleMs;
    const target = entries.size >= this.maxBreakers ? this.maxBreakers - this.slack : Infinity;
    let budget = 4 * this.slack + SWEEP_STEPS;
    for (const [name, e] of entries) {
      if (budget-- <= 0) break;
      const pinned = isIsolated(e.breaker);
      if (e.used <= idleBefore && !pinned) {
        entries.delete(name);
        this.evictions++;
      } else if (entries.size > target) {
        entries.delete(name);
        if (e.used > e.placed || pinned) this.replace(name, e, now);
        else this.evictions++;
      } else if (e.placed > idleBefore) {
        break; // every later entry was placed (so used) more recently: none is idle
      } else {
        entries.delete(name); // placed long ago but used since: to the back
        this.replace(name, e, now);
      }
    }
    while (entries.size >= this.maxBreakers) {
      entries.delete(entries.keys().next().value as string);
      this.evictions++;
    }
  }

  /** replace puts an entry back at the end of the map order. */
  private replace(name: string, e: Entry<B>, now: number): void {
    e.placed = now;
    e.used = now;
    this.entries.set(name, e);
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

/** setDefaultBreakerGroup replaces the process-wide group (undefined: make a fresh one on next use). */
export function setDefaultBreakerGroup(group: BreakerGroup | undefined): void {
  if (group !== undefined && !(group instanceof BreakerGroup)) {
    throw new TypeError(`setDefaultBreakerGroup: group must be a BreakerGroup, got ${showValue(group)}`);
  }
  defaultGroup = group;
}
