/**
 * PeriodLimiter allows `quota` calls per key per `periodMs` (go-zero `PeriodLimit`): `answer(key)`
 * answers `allowed`, `hit-quota` (the last call allowed in this window) or `over-quota`.
 *
 * Two algorithms (`algorithm`):
 * - `fixed` (go-zero's): a key's window opens at its first call, or with `align` at multiples of
 *   `periodMs` on the clock (plus `alignOffsetMs`: a day in a timezone). Simple and exact, but a burst
 *   at the end of one window and another at the start of the next admit 2 × quota within `periodMs`.
 * - `sliding` (the sliding-window counter): windows aligned to multiples of `periodMs`; a call counts
 *   the current window plus the previous one weighted by how much of it still lies within the last
 *   `periodMs`. Within any `periodMs` it admits at most about quota (never 2 ×), at two numbers per key.
 *
 * Keys are bounded like KeyedLimiter's: at most `maxKeys`, least recently used evicted first.
 *
 * `reconfigure({ quota, periodMs, algorithm, align, alignOffsetMs })` changes it live (maxKeys and clock
 * are fixed at construction): each key keeps the calls counted in its current window; a new quota counts
 * against them at once, a new period, algorithm or alignment from each key's next window on.
 */
import { systemClock, type Clock, wallClock } from '../core/clock.js';
import { LruCache } from '../core/lru-cache.js';
import { clockOption, finite, integer, liveOptions, options as optionsOf, positive, type OptionKeys } from '../core/validate.js';
import type { Reconfigurable } from '../core/reconfigurable.js';
import { limitRefusedChannel, publishRefusal } from '../core/diagnostics.js';
import type { KeyedRateLimiter, LimitDecision, PeriodAlgorithm, PeriodAnswer } from './types.js';
import { checkKey } from './keys.js';
import type { MetricsDescription } from '../core/metrics-description.js';
import { describeLocalLimiter } from './limiter-metrics.js';

/** The keys of PeriodLimiterOptions, all of them: any other is refused (see `options`). */
const PERIOD_LIMITER_KEYS = {
  periodMs: true,
  quota: true,
  algorithm: true,
  align: true,
  alignOffsetMs: true,
  maxKeys: true,
  clock: true,
} as const satisfies OptionKeys<PeriodLimiterOptions>;
/** The options a running PeriodLimiter cannot change (see `reconfigure`). */
const PERIOD_LIMITER_FIXED = ['maxKeys', 'clock'] as const;

/** PeriodLimiterLiveOptions are the options `PeriodLimiter.reconfigure` changes and `options()` answers. */
export type PeriodLimiterLiveOptions = Omit<PeriodLimiterOptions, (typeof PERIOD_LIMITER_FIXED)[number]>;

/** PeriodLimiterOptions configures a PeriodLimiter. */
export interface PeriodLimiterOptions {
  /** The window's length in milliseconds. Required. */
  periodMs: number;
  /** Calls allowed per key per window, an integer ≥ 1. Required. */
  quota: number;
  /** How calls are counted: `fixed` windows (go-zero's) or the `sliding`-window counter. Defaults to 'fixed'. */
  algorithm?: PeriodAlgorithm;
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
export const periodLimiterDefaults = Object.freeze({ algorithm: 'fixed' as const, align: false, alignOffsetMs: 0, maxKeys: 10_000 });

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
export class PeriodLimiter implements KeyedRateLimiter, Reconfigurable<PeriodLimiterLiveOptions> {
  readonly periodMs: number;
  readonly quota: number;
  readonly algorithm: PeriodAlgorithm;
  readonly align: boolean;
  private offset: number;
  private readonly clock: Clock;
  /** The keys' windows, least recently used evicted first: an LruCache counting each key as 1 byte of `maxKeys`. */
  private readonly windows: LruCache<Window>;

  /** Decisions since the limiter was made that allowed / refused (`stats().allowed`, `stats().limited`). */
  private allowedCount = 0;
  private limitedCount = 0;

  constructor(options: PeriodLimiterOptions) {
    const o = optionsOf('PeriodLimiter', renamedWindow('PeriodLimiter', options), PERIOD_LIMITER_KEYS);
    const s = periodSettings('PeriodLimiter', o);
    this.periodMs = s.periodMs;
    this.quota = s.quota;
    this.algorithm = s.algorithm;
    this.align = s.align;
    this.offset = s.alignOffsetMs;
    this.clock = clockOption('PeriodLimiter', o.clock, this.align ? wallClock : systemClock);
    const maxKeys = integer('PeriodLimiter', 'maxKeys', o.maxKeys ?? periodLimiterDefaults.maxKeys, 1, 1 << 26);
    this.windows = new LruCache<Window>({ maxBytes: maxKeys, sizeOf: oneKey, clock: this.clock });
  }

  /** options answers the options this limiter runs now: those `reconfigure` may change. */
  options(): Required<PeriodLimiterLiveOptions> {
    return { periodMs: this.periodMs, quota: this.quota, algorithm: this.algorithm, align: this.align, alignOffsetMs: this.offset };
  }

  /**
   * reconfigure lays `partial` over `options()` and applies the result, validated as the constructor
   * validates it (the same errors; maxKeys and clock are refused: fixed at construction), all of it or,
   * when it throws, none. Each key keeps the calls counted in its current window: a new quota counts
   * against them at once; a new period, algorithm or alignment applies from each key's next window.
   */
  reconfigure(partial: Partial<PeriodLimiterLiveOptions>): void {
    const p = liveOptions('PeriodLimiter', renamedWindow('PeriodLimiter', partial), PERIOD_LIMITER_KEYS, PERIOD_LIMITER_FIXED);
    const s = periodSettings('PeriodLimiter', { ...this.options(), ...p });
    const self = this as { -readonly [K in 'periodMs' | 'quota' | 'algorithm' | 'align']: PeriodLimiter[K] };
    self.periodMs = s.periodMs;
    self.quota = s.quota;
    self.algorithm = s.algorithm;
    self.align = s.align;
    this.offset = s.alignOffsetMs;
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
    if (this.algorithm === 'sliding') {
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
      if (this.algorithm === 'sliding') {
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
    if (this.algorithm === 'fixed' && !this.align) return now;
    const p = this.periodMs;
    const off = this.offset;
    return Math.floor((now + off) / p) * p - off;
  }

  /** Calls counted against the quota now: the window's count, plus the previous window's weighted (sliding). */
  private used(w: Window, now: number): number {
    if (this.algorithm === 'fixed' || w.prev === 0) return w.count;
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

/** periodSettings validates the options the constructor and `reconfigure` share, defaults filled in. */
export function periodSettings(
  owner: string,
  o: Partial<PeriodLimiterLiveOptions>,
): { periodMs: number; quota: number; algorithm: PeriodAlgorithm; align: boolean; alignOffsetMs: number } {
  const periodMs = positive(owner, 'periodMs', o.periodMs);
  const quota = integer(owner, 'quota', o.quota, 1);
  const algorithm = o.algorithm ?? periodLimiterDefaults.algorithm;
  if (algorithm !== 'fixed' && algorithm !== 'sliding') throw new TypeError(`${owner}: algorithm must be 'fixed' or 'sliding', got ${String(algorithm)}`);
  if (o.align !== undefined && typeof o.align !== 'boolean') throw new TypeError(`${owner}: align must be a boolean, got ${typeof o.align}`);
  const align = o.align ?? periodLimiterDefaults.align;
  const alignOffsetMs = finite(owner, 'alignOffsetMs', o.alignOffsetMs ?? periodLimiterDefaults.alignOffsetMs);
  return { periodMs, quota, algorithm, align, alignOffsetMs };
}

/**
 * renamedWindow refuses the period limiters' old `window` key, which named the algorithm, not a window
 * (windows are `{ windowMs, buckets }` across the package): "renamed to algorithm".
 */
export function renamedWindow<T>(owner: string, o: T): T {
  if (o !== null && typeof o === 'object' && Object.hasOwn(o, 'window')) throw new TypeError(`${owner}: window was renamed to algorithm`);
  return o;
}

/** oneKey sizes every window as 1, so that the LruCache's byte bound is a count of keys. */
function oneKey(): number {
  return 1;
}
