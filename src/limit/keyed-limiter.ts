/**
 * KeyedLimiter keeps one limiter per key (a user, an IP, an API key) and bounds how many keys it
 * keeps: a flood of distinct keys evicts the least recently used ones instead of growing memory.
 *
 * Eviction is safe for token buckets when a key has been idle for burst / rate seconds: its bucket is
 * full again, exactly what a new bucket is. That is the default idle time; keys idle that long are
 * dropped first (lazily) and an evicted key comes back as a full bucket. Under a flood bigger than
 * `maxKeys`, active keys are evicted too (least recently used first): memory stays bounded, and such a
 * key's debt is forgiven — size `maxKeys` above the number of keys that are active at once.
 *
 * The store is lru-cache (preallocated slots, no allocation per hit).
 */
import { LRUCache } from 'lru-cache';
import { systemClock, type Clock } from '../core/clock.js';
import { clockOption, finite, fn, integer, options as optionsOf } from '../core/validate.js';
import type { KeyedRateLimiter, LimitDecision, Limiter } from './index.js';
import { checkKey } from './keys.js';
import { TokenLimiter } from './token-limiter.js';

/** KeyedLimiterOptions configures a KeyedLimiter: `rate` (+ `burst`) for a token bucket per key, or `create`. */
export interface KeyedLimiterOptions<L extends Limiter = Limiter> {
  /** Tokens per second of each key's TokenLimiter (when `create` is not given). */
  rate?: number;
  /** Each key's bucket size. Defaults to `rate` (at least 1). */
  burst?: number;
  /** Makes the limiter of a key seen for the first time (or again after eviction). Defaults to a TokenLimiter of `rate` / `burst`. */
  create?: (key: string) => L;
  /** The most keys kept at once; beyond it the least recently used key is evicted. Defaults to 10 000. */
  maxKeys?: number;
  /**
   * A key unused this long is dropped (lazily). 0 keeps keys until `maxKeys` pushes them out.
   * Defaults to burst / rate seconds with `rate` (when the bucket is full again), else 0.
   */
  idleMs?: number;
  /** The time source, handed to the TokenLimiters it makes. Defaults to the monotonic system clock. */
  clock?: Clock;
}

/** Defaults for KeyedLimiterOptions. */
export const keyedLimiterDefaults = Object.freeze({ maxKeys: 10_000 });

/** The largest maxKeys: lru-cache preallocates slots for all of them. */
const MAX_KEYS = 1 << 26;

/** KeyedLimiter is a bounded map from key to limiter, and a limit per key. */
export class KeyedLimiter<L extends Limiter = Limiter> implements KeyedRateLimiter {
  /** maxKeys is the most keys kept at once. */
  readonly maxKeys: number;
  /** idleMs is how long an unused key is kept (0: until evicted by maxKeys). */
  readonly idleMs: number;
  private readonly create: (key: string) => L;
  private readonly cache: LRUCache<string, L>;

  constructor(options: KeyedLimiterOptions<L>) {
    const o = optionsOf('KeyedLimiter', options);
    this.maxKeys = integer('KeyedLimiter', 'maxKeys', o.maxKeys ?? keyedLimiterDefaults.maxKeys, 1, MAX_KEYS);
    const clock = clockOption('KeyedLimiter', o.clock, systemClock);
    let defaultIdle = 0;
    if (o.create !== undefined) {
      this.create = fn('KeyedLimiter', 'create', o.create);
    } else {
      if (o.rate === undefined) throw new TypeError('KeyedLimiter: give rate (a token bucket per key) or create, got neither');
      // Validate once here, so that a bad rate fails at construction rather than at the first key.
      const probe = new TokenLimiter({ rate: o.rate, burst: o.burst, clock });
      const { rate, burst } = probe;
      this.create = () => new TokenLimiter({ rate, burst, clock }) as unknown as L;
      defaultIdle = Math.ceil((burst / rate) * 1000);
    }
    this.idleMs = finite('KeyedLimiter', 'idleMs', o.idleMs ?? defaultIdle, 0);
    this.cache = new LRUCache<string, L>({
      max: this.maxKeys,
      ...(this.idleMs > 0 ? { ttl: this.idleMs, updateAgeOnGet: true, ttlResolution: clock === systemClock ? 1 : 0 } : {}),
      // lru-cache reads a start time of 0 as "no TTL": shift the clock so that it never reads 0.
      perf: clock === systemClock ? clock : { now: () => clock.now() + 1 },
    });
  }

  /** get answers `key`'s limiter, making it when the key is new. Keys longer than 1 KiB throw TypeError. */
  get(key: string): L {
    let l = this.cache.get(key);
    if (l === undefined) {
      l = this.create(checkKey('KeyedLimiter', key));
      this.cache.set(key, l);
    }
    return l;
  }

  /** allow takes `n` (default 1) from `key`'s limiter and answers whether it did. */
  allow(key: string, n = 1): boolean {
    return this.get(key).allow(n);
  }

  /** decide is `allow` with the numbers behind the answer. */
  decide(key: string, n = 1): LimitDecision {
    return this.get(key).decide(n);
  }

  /** delete forgets `key` (its next call starts afresh). */
  delete(key: string): boolean {
    return this.cache.delete(key);
  }

  /** size is how many keys are kept now (idle ones not yet dropped included). */
  get size(): number {
    return this.cache.size;
  }

  /** purgeIdle drops every key idle longer than `idleMs` now and answers how many it dropped. */
  purgeIdle(): number {
    const before = this.cache.size;
    this.cache.purgeStale();
    return before - this.cache.size;
  }

  /** clear forgets every key. */
  clear(): void {
    this.cache.clear();
  }
}
