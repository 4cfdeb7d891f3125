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
import { coarseClock } from './coarse-clock.js';
import type { Breaker, BreakerExecuteOptions } from './index.js';
import { SreBreaker } from './sre-breaker.js';

/** How many entries one creation may examine while sweeping (bounds the pause). */
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
  /** The time source. Defaults to the shared `coarseClock`. */
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
    this.clock = clockOption('BreakerGroup', o.clock, coarseClock);
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
    this.sweep(now);
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

  /** sweep evicts idle breakers among the oldest insertions, then enforces `maxBreakers`. */
  private sweep(now: number): void {
    const entries = this.entries;
    let steps = SWEEP_STEPS;
    const idleBefore = now - this.idleMs;
    for (const [name, e] of entries) {
      if (steps-- <= 0 || e.placed > idleBefore) break; // every later entry was placed (so used) more recently
      entries.delete(name);
      if (e.used > idleBefore || isIsolated(e.breaker)) {
        e.placed = now; // in use (or pinned by an operator): move to the back
        entries.set(name, e);
      } else this.evictions++;
    }
    while (entries.size >= this.maxBreakers) {
      const first = entries.keys().next();
      if (first.done === true) break;
      entries.delete(first.value);
      this.evictions++;
    }
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
