/**
 * KeyedLimiter keeps one limiter per key (a user, an IP, an API key) and bounds how many keys it
 * keeps: a flood of distinct keys evicts old keys instead of growing memory.
 *
 * Which key goes: the oldest, unless its limiter is busy. A TokenLimiter is idle once its bucket is
 * full again — exactly the state a new bucket starts in — so evicting an idle key loses nothing. A
 * busy oldest key gets a second chance (it moves to the young end) and the next oldest is looked at,
 * up to 8 of them; if all are busy, the oldest goes anyway (its debt is forgiven). So memory stays
 * bounded under any flood, idle keys go first, and an insertion stays O(1). Size `maxKeys` above the
 * number of keys busy at once.
 *
 * A hit is one Map lookup: no reordering, no clock read besides the limiter's own. Age order is a
 * FIFO of keys beside the Map (a Map's own order cannot serve: V8 iterates past every deleted entry,
 * so evicting from its front costs O(evictions) each time). Limiters made by `create` without an
 * `idle()` method are evicted oldest first.
 *
 * `reconfigure({ rate, burst, maxKeys })` changes it live: every key's bucket keeps its tokens (at most
 * the new burst) and refills at the new rate; a smaller `maxKeys` evicts at once, as a flood would, down to
 * the new bound. `create` and `clock` are fixed at construction (and with `create`, so are rate and burst).
 */
import { systemClock, type Clock } from '../core/clock.js';
import { limitRefusedChannel, publishRefusal } from '../core/diagnostics.js';
import { clockOption, fn, integer, liveOptions, options as optionsOf, within, type OptionKeys } from '../core/validate.js';
import type { Reconfigurable } from '../core/reconfigurable.js';
import type { KeyedRateLimiter, LimitDecision, Limiter } from './types.js';
import { checkKey } from './keys.js';
import { OWNED, TokenLimiter } from './token-limiter.js';
import type { MetricsDescription } from '../core/metrics-description.js';
import { describeLocalLimiter } from './limiter-metrics.js';

/** The keys of KeyedLimiterOptions, all of them: any other is refused (see `options`). */
const KEYED_LIMITER_KEYS = {
  rate: true,
  burst: true,
  create: true,
  maxKeys: true,
  clock: true,
} as const satisfies OptionKeys<KeyedLimiterOptions>;

/** KeyedLimiterLiveOptions are the options `KeyedLimiter.reconfigure` changes and `options()` answers. */
export type KeyedLimiterLiveOptions = Pick<KeyedLimiterOptions, 'rate' | 'burst' | 'maxKeys'>;

/** KeyedLimiterOptions configures a KeyedLimiter: `rate` (+ `burst`) for a token bucket per key, or `create`. */
export interface KeyedLimiterOptions {
  /** Tokens per second of each key's TokenLimiter (when `create` is not given). */
  rate?: number;
  /** Each key's bucket size. Defaults to `rate` (at least 1). */
  burst?: number;
  /** Makes the limiter of a key seen for the first time (or again after eviction). Defaults to a TokenLimiter of `rate` / `burst`. */
  create?: (key: string) => Limiter;
  /** The most keys kept at once. Defaults to 10 000. */
  maxKeys?: number;
  /** The time source, handed to the TokenLimiters it makes. Defaults to the monotonic system clock. */
  clock?: Clock;
}

/** Defaults for KeyedLimiterOptions. */
export const keyedLimiterDefaults = Object.freeze({ maxKeys: 10_000 });

/** The most keys a KeyedLimiter may keep (a Map holds at most 2^24 entries). */
const MAX_KEYS = 1 << 24;
/** Busy keys given a second chance per eviction, at most: keeps an insertion O(1). */
const SECOND_CHANCES = 8;

/**
 * KeyedLimiter is a bounded map from key to limiter, and a limit per key. Its limiters are typed as
 * `Limiter` (what `create` answers, or a TokenLimiter), which is what they are.
 */
export class KeyedLimiter implements KeyedRateLimiter, Reconfigurable<KeyedLimiterLiveOptions> {
  /** maxKeys is the most keys kept at once. */
  readonly maxKeys: number;
  private create: (key: string) => Limiter;
  /** The buckets' rate and burst, when the limiter makes TokenLimiters (no `create` given). */
  private bucket: { rate: number; burst: number } | undefined;
  private readonly clock: Clock;
  private readonly limiters = new Map<string, Limiter>();
  /** Keys oldest first, from `head` on; may hold stale keys (deleted, or queued twice), skipped when met. */
  private queue: (string | undefined)[] = [];
  private head = 0;

  /** Decisions since the limiter was made that allowed / refused (`stats().allowed`, `stats().limited`). */
  private allowedCount = 0;
  private limitedCount = 0;

  constructor(options: KeyedLimiterOptions) {
    const o = optionsOf('KeyedLimiter', options, KEYED_LIMITER_KEYS);
    this.maxKeys = integer('KeyedLimiter', 'maxKeys', o.maxKeys ?? keyedLimiterDefaults.maxKeys, 1, MAX_KEYS);
    const clock = clockOption('KeyedLimiter', o.clock, systemClock);
    this.clock = clock;
    if (o.create !== undefined) {
      this.create = fn<(key: string) => Limiter>('KeyedLimiter', 'create', o.create);
    } else {
      if (o.rate === undefined) throw new TypeError('KeyedLimiter: give rate (a token bucket per key) or create, got neither');
      this.bucket = this.checkBucket(o.rate, o.burst);
      this.create = this.makeBucket(this.bucket);
    }
  }

  /** options answers the options this limiter runs now: those `reconfigure` may change (rate and burst only without `create`). */
  options(): KeyedLimiterLiveOptions {
    return this.bucket === undefined ? { maxKeys: this.maxKeys } : { rate: this.bucket.rate, burst: this.bucket.burst, maxKeys: this.maxKeys };
  }

  /**
   * reconfigure sets `rate`, `burst` and `maxKeys`, validated as the constructor validates them (the same
   * errors; `create` and `clock` refused, and rate and burst when the limiter was made with `create`: fixed
   * at construction), all or, when it throws, none. Every key's bucket keeps its tokens (at most the new
   * burst) and refills at the new rate from now; a smaller `maxKeys` evicts keys at once (idle first, as
   * a flood would) down to the new bound. O(keys) when rate or burst change.
   */
  reconfigure(partial: Partial<KeyedLimiterLiveOptions>): void {
    const fixed = this.bucket === undefined ? ['create', 'clock', 'rate', 'burst'] : ['create', 'clock'];
    const p = liveOptions('KeyedLimiter', partial as KeyedLimiterOptions, KEYED_LIMITER_KEYS, fixed);
    const maxKeys = integer('KeyedLimiter', 'maxKeys', p.maxKeys ?? this.maxKeys, 1, MAX_KEYS);
    let bucket = this.bucket;
    if (bucket !== undefined && (p.rate !== undefined || Object.hasOwn(p, 'burst'))) {
      bucket = this.checkBucket(p.rate ?? bucket.rate, Object.hasOwn(p, 'burst') ? p.burst : bucket.burst);
    }
    (this as { maxKeys: number }).maxKeys = maxKeys;
    if (bucket !== this.bucket && bucket !== undefined) {
      this.bucket = bucket;
      this.create = this.makeBucket(bucket);
      for (const l of this.limiters.values()) if (l instanceof TokenLimiter) l.reconfigure(bucket);
    }
    while (this.limiters.size > maxKeys) {
      const before = this.limiters.size;
      this.evict();
      if (this.limiters.size === before) this.rebuildQueue(); // only stale entries were left: start again from the Map
    }
  }

  /** checkBucket validates a bucket's rate and burst as TokenLimiter does, named as this limiter's options. */
  private checkBucket(rate: number, burst: number | undefined): { rate: number; burst: number } {
    // Validate once here, so that a bad rate fails at construction rather than at the first key.
    const clock = this.clock;
    const l = within('KeyedLimiter', '', 'TokenLimiter', () => new TokenLimiter({ rate, burst, clock }));
    return { rate: l.rate, burst: l.burst };
  }

  private makeBucket({ rate, burst }: { rate: number; burst: number }): (key: string) => Limiter {
    const clock = this.clock;
    return () => new TokenLimiter({ rate, burst, clock });
  }

  /** get answers `key`'s limiter, making it when the key is new. Keys longer than 1 KiB throw TypeError. */
  get(key: string): Limiter {
    let l = this.limiters.get(key);
    if (l === undefined) {
      checkKey('KeyedLimiter', key);
      if (this.limiters.size >= this.maxKeys) this.evict();
      l = this.create(key);
      if (l instanceof TokenLimiter) l[OWNED] = true; // its refusals are published here, with the key
      this.limiters.set(key, l);
      this.enqueue(key);
    }
    return l;
  }

  /** allow takes `n` (default 1) from `key`'s limiter and answers whether it did. */
  allow(key: string, n = 1): boolean {
    if (this.get(key).allow(n)) {
      this.allowedCount++;
      return true;
    }
    this.limitedCount++;
    if (limitRefusedChannel.hasSubscribers) publishRefusal('KeyedLimiter', this, key, n);
    return false;
  }

  /** decide is `allow` with the numbers behind the answer. */
  decide(key: string, n = 1): LimitDecision {
    const d = this.get(key).decide(n);
    if (d.allowed) this.allowedCount++;
    else {
      this.limitedCount++;
      if (limitRefusedChannel.hasSubscribers) publishRefusal('KeyedLimiter', this, key, n);
    }
    return d;
  }

  /** delete forgets `key` (its next call starts afresh). */
  delete(key: string): boolean {
    return this.limiters.delete(key);
  }

  /** size is how many keys are kept now. */
  get size(): number {
    return this.limiters.size;
  }

  /** describeMetrics answers the limiter's families (`limiter_decisions_total`, `limiter_keys`), read from its stats at scrape time. */
  describeMetrics(): MetricsDescription {
    return describeLocalLimiter(this, 'KeyedLimiter');
  }

  /** stats is a snapshot: keys kept now and the bound. */
  stats(): { readonly keys: number; readonly maxKeys: number; readonly allowed: number; readonly limited: number } {
    return { keys: this.limiters.size, maxKeys: this.maxKeys, allowed: this.allowedCount, limited: this.limitedCount };
  }

  /** purgeIdle drops every key whose limiter is idle (a full bucket) and answers how many it dropped. O(size). */
  purgeIdle(): number {
    let dropped = 0;
    for (const [key, l] of this.limiters) {
      if (l.idle?.() === true) {
        this.limiters.delete(key);
        dropped++;
      }
    }
    return dropped;
  }

  /** clear forgets every key. */
  clear(): void {
    this.limiters.clear();
    this.queue = [];
    this.head = 0;
  }

  /** Drops one key: the oldest idle one among the oldest few, else the oldest. */
  private evict(): void {
    const m = this.limiters;
    const q = this.queue;
    let chances = 0;
    while (this.head < q.length) {
      const key = q[this.head]!;
      q[this.head++] = undefined;
      const l = m.get(key);
      if (l === undefined) continue; // deleted since: a stale entry
      if (chances < SECOND_CHANCES && l.idle?.() === false) {
        chances++;
        q.push(key); // busy: a second chance at the young end
        continue;
      }
      m.delete(key);
      break;
    }
    this.compact();
  }

  private enqueue(key: string): void {
    this.queue.push(key);
    // Stale entries (deleted or purged keys) are bounded: past 2 × maxKeys, rebuild from the Map.
    if (this.queue.length - this.head > 2 * this.maxKeys) {
      this.queue = [...this.limiters.keys()];
      this.head = 0;
    }
  }

  private rebuildQueue(): void {
    this.queue = [...this.limiters.keys()];
    this.head = 0;
  }

  private compact(): void {
    if (this.head > 4096 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
  }
}
