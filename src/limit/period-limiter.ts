/**
 * PeriodLimiter allows `quota` calls per key per `periodMs` (go-zero `PeriodLimit`): `answer(key)`
 * answers `allowed`, `hit-quota` (the last call allowed in this window) or `over-quota`.
 *
 * Two windows:
 * - `fixed` (go-zero's): a key's window opens at its first call, or with `align` at multiples of
 *   `periodMs` on the clock (plus `alignOffsetMs`: a day in a timezone). Simple and exact, but a burst
 *   at the end of one window and another at the start of the next admit 2 × quota within `periodMs`.
 * - `sliding` (the sliding-window counter): windows aligned to multiples of `periodMs`; a call counts
 *   the current window plus the previous one weighted by how much of it still lies within the last
 *   `periodMs`. Within any `periodMs` it admits at most about quota (never 2 ×), at two numbers per key.
 *
 * Keys are bounded like KeyedLimiter's: at most `maxKeys`, least recently used evicted first.
 */
import { systemClock, type Clock, wallClock } from '../core/clock.js';
import { LruCache } from '../core/lru-cache.js';
import { clockOption, finite, integer, options as optionsOf, positive, type OptionKeys } from '../core/validate.js';
import { limitRefusedChannel, publishRefusal } from '../core/diagnostics.js';
import type { KeyedRateLimiter, LimitDecision, PeriodAnswer, PeriodWindow } from './types.js';
import { checkKey } from './keys.js';
import type { MetricsDescription } from '../core/metrics-description.js';
import { describeLocalLimiter } from './limiter-metrics.js';

/** The keys of PeriodLimiterOptions, all of them: any other is refused (see `options`). */
const PERIOD_LIMITER_KEYS = {
  periodMs: true, quota: true, window: true, align: true, alignOffsetMs: true, maxKeys: true, clock: true,
} as const satisfies OptionKeys<PeriodLimiterOptions>;

/** PeriodLimiterOptions configures a PeriodLimiter. */
export interface PeriodLimiterOptions {
  /** The window's length in milliseconds. Required. */
  periodMs: number;
  /** Calls allowed per key per window, an integer ≥ 1. Required. */
  quota: number;
  /** `fixed` (go-zero's) or `sliding` (sliding-window counter). Defaults to 'fixed'. */
  window?: PeriodWindow;
  /**
   * Fixed windows start at multiples of `periodMs` on the clock instead of at a key's first call.
   * Without a `clock`, aligned windows use wall time (`Date.now()`, UTC). Defaults to false.
   */
  align?: boolean;
  /** Shifts aligned windows: e.g. 8 × 3 600 000 for days in UTC+8. Defaults to 0. */
  alignOffsetMs?: number;
  /** The most keys kept at once; least recently used evicted first. Defaults to 10 000. */
  maxKeys?: number;
  /** The time source. Defaults to the monotonic system clock (wall time with `align`). */
  clock?: Clock;
}

/** Defaults for PeriodLimiterOptions. */
export const periodLimiterDefaults = Object.freeze({ window: 'fixed' as const, align: false, alignOffsetMs: 0, maxKeys: 10_000 });

/** One key's windows. */
class Window {
  constructor(
    /** Start of the current window. */
    public start: number,
    /** Calls counted in the current window. */
    public count: number,
    /** Calls counted in the previous window (sliding only). */
    public prev: number,
  ) {}
}

/** PeriodLimiter is a quota per key per period, fixed or sliding window. */
export class PeriodLimiter implements KeyedRateLimiter {
  readonly periodMs: number;
  readonly quota: number;
  readonly window: PeriodWindow;
  readonly align: boolean;
  private readonly offset: number;
  private readonly clock: Clock;
  /** The keys' windows, least recently used evicted first: an LruCache counting each key as 1 byte of `maxKeys`. */
  private readonly windows: LruCache<Window>;

  /** Decisions since the limiter was made that allowed / refused (`stats().allowed`, `stats().limited`). */
  private allowedCount = 0;
  private limitedCount = 0;

  constructor(options: PeriodLimiterOptions) {
    const o = optionsOf('PeriodLimiter', options, PERIOD_LIMITER_KEYS);
    this.periodMs = positive('PeriodLimiter', 'periodMs', o.periodMs);
    this.quota = integer('PeriodLimiter', 'quota', o.quota, 1);
    const w = o.window ?? periodLimiterDefaults.window;
    if (w !== 'fixed' && w !== 'sliding') throw new TypeError(`PeriodLimiter: window must be 'fixed' or 'sliding', got ${String(w)}`);
    this.window = w;
    if (o.align !== undefined && typeof o.align !== 'boolean') throw new TypeError(`PeriodLimiter: align must be a boolean, got ${typeof o.align}`);
    this.align = o.align ?? periodLimiterDefaults.align;
    this.offset = finite('PeriodLimiter', 'alignOffsetMs', o.alignOffsetMs ?? periodLimiterDefaults.alignOffsetMs);
    this.clock = clockOption('PeriodLimiter', o.clock, this.align ? wallClock : systemClock);
    const maxKeys = integer('PeriodLimiter', 'maxKeys', o.maxKeys ?? periodLimiterDefaults.maxKeys, 1, 1 << 26);
    this.windows = new LruCache<Window>({ maxBytes: maxKeys, sizeOf: oneKey, clock: this.clock });
  }

  /** answer counts one call for `key` and answers go-zero's three answers (go-zero's `Take`). */
  answer(key: string): PeriodAnswer {
    const now = this.clock.now();
    const w = this.current(key, now);
    const used = this.used(w, now);
    if (used + 1 > this.quota + 1e-9) {
      if (limitRefusedChannel.hasSubscribers) publishRefusal('PeriodLimiter', this, key, 1);
      return 'over-quota';
    }
    w.count += 1;
    return used + 2 > this.quota + 1e-9 ? 'hit-quota' : 'allowed';
  }

  /** allow counts `n` calls (default 1) for `key` when the quota has room for them. */
  allow(key: string, n = 1): boolean {
    if (!(n >= 0)) throw new RangeError(`PeriodLimiter.allow: n must be a number ≥ 0, got ${String(n)}`);
    const now = this.clock.now();
    const w = this.current(key, now);
    if (this.used(w, now) + n > this.quota + 1e-9) {
      this.limitedCount++;
      if (limitRefusedChannel.hasSubscribers) publishRefusal('PeriodLimiter', this, key, n);
      return false;
    }
    w.count += n;
    this.allowedCount++;
    return true;
  }

  /** decide is `allow` with the numbers behind the answer. */
  decide(key: string, n = 1): LimitDecision {
    if (!(n >= 0)) throw new RangeError(`PeriodLimiter.decide: n must be a number ≥ 0, got ${String(n)}`);
    const now = this.clock.now();
    const w = this.current(key, now);
    const used = this.used(w, now);
    const allowed = used + n <= this.quota + 1e-9;
    if (allowed) {
      w.count += n;
      this.allowedCount++;
    } else {
      this.limitedCount++;
      if (limitRefusedChannel.hasSubscribers) publishRefusal('PeriodLimiter', this, key, n);
    }
    const after = allowed ? used + n : used;
    const end = w.start + this.periodMs;
    let retryAfterMs = 0;
    let resetMs = end - now;
    if (this.window === 'sliding') {
      resetMs = w.count > 0 ? end + this.periodMs - now : w.prev > 0 ? resetMs : 0;
      if (!allowed) retryAfterMs = n > this.quota ? Infinity : this.slidingWait(w, n, now);
    } else if (!allowed) {
      retryAfterMs = n > this.quota ? Infinity : resetMs;
    }
    return { allowed, limit: this.quota, remaining: Math.max(0, Math.floor(this.quota - after + 1e-9)), retryAfterMs, resetMs };
  }

  /** delete forgets `key`. */
  delete(key: string): boolean {
    return this.windows.remove(key);
  }

  /** size is how many keys are kept now. */
  get size(): number {
    return this.windows.length;
  }

  /** describeMetrics answers the limiter's families (`limiter_decisions_total`, `limiter_keys`), read from its stats at scrape time. */
  describeMetrics(): MetricsDescription {
    return describeLocalLimiter(this, 'PeriodLimiter');
  }

  /** stats is a snapshot: keys kept now. */
  stats(): { readonly keys: number; readonly allowed: number; readonly limited: number } {
    return { keys: this.windows.length, allowed: this.allowedCount, limited: this.limitedCount };
  }

  /** The key's window, moved on to the one `now` falls in. */
  private current(key: string, now: number): Window {
    let w = this.windows.get(key);
    const p = this.periodMs;
    if (w === undefined) {
      checkKey('PeriodLimiter', key);
      w = new Window(this.startOf(now), 0, 0);
      this.windows.add(key, w);
      return w;
    }
    if (now - w.start >= p) {
      if (this.window === 'sliding') {
        const start = this.startOf(now);
        w.prev = start - w.start === p ? w.count : 0;
        w.start = start;
      } else {
        w.start = this.startOf(now);
      }
      w.count = 0;
    }
    return w;
  }

  private startOf(now: number): number {
    if (this.window === 'fixed' && !this.align) return now;
    const p = this.periodMs;
    const off = this.offset;
    return Math.floor((now + off) / p) * p - off;
  }

  /** Calls counted against the quota now: the window's count, plus the previous window's weighted (sliding). */
  private used(w: Window, now: number): number {
    if (this.window === 'fixed' || w.prev === 0) return w.count;
    return w.prev * (1 - (now - w.start) / this.periodMs) + w.count;
  }

  /** How long until `n` more calls fit a sliding window (n ≤ quota). */
  private slidingWait(w: Window, n: number, now: number): number {
    const p = this.periodMs;
    const room = this.quota - w.count - n;
    if (room >= 0) {
      // The previous window's weight must fall to `room`: prev × (1 − f) ≤ room.
      const f = 1 - room / w.prev;
      return Math.max(0, w.start + f * p - now);
    }
    // Only the next window can: count × (1 − f) + n ≤ quota.
    const f = 1 - (this.quota - n) / w.count;
    return Math.max(0, w.start + p + f * p - now);
  }
}

/** oneKey sizes every window as 1, so that the LruCache's byte bound is a count of keys. */
function oneKey(): number {
  return 1;
}
