/**
 * RollingWindow keeps per-bucket sums of one or more channels over the last `buckets × bucketMs`
 * milliseconds (go-zero `collection.RollingWindow`). `add` is O(1) and allocates nothing: buckets that
 * time has passed are cleared lazily, and running totals are kept so that `sum` is O(1) too.
 *
 * Time comes from the clock, or from a `now` the caller already read (so that a hot path reads the
 * clock once for several parts).
 */
import { systemClock, type Clock } from './clock.js';
import { clockOption, integer, positive } from './validate.js';

/** RollingWindowOptions configures a RollingWindow. */
export interface RollingWindowOptions {
  /** Number of buckets. Defaults to 10. */
  buckets?: number;
  /** Width of one bucket in milliseconds. Defaults to 1 000. */
  bucketMs?: number;
  /** Number of independent channels summed per bucket (e.g. total, failures, slow). Defaults to 1. */
  channels?: number;
  /** The time source. Defaults to the monotonic system clock. */
  clock?: Clock;
}

/** Defaults for RollingWindowOptions. */
export const rollingWindowDefaults = Object.freeze({ buckets: 10, bucketMs: 1_000, channels: 1 });

/** RollingWindow sums values over a sliding time window made of buckets. */
export class RollingWindow {
  readonly buckets: number;
  readonly bucketMs: number;
  readonly channels: number;
  private readonly clock: Clock;
  /** values[bucket * channels + channel] */
  private readonly values: Float64Array;
  private readonly totals: Float64Array;
  /** The absolute bucket number (floor(now / bucketMs)) the newest bucket stands for. */
  private head: number;

  constructor(options: RollingWindowOptions = {}) {
    this.buckets = integer('RollingWindow', 'buckets', options.buckets ?? rollingWindowDefaults.buckets, 1, 1 << 20);
    this.bucketMs = positive('RollingWindow', 'bucketMs', options.bucketMs ?? rollingWindowDefaults.bucketMs);
    this.channels = integer('RollingWindow', 'channels', options.channels ?? rollingWindowDefaults.channels, 1, 64);
    this.clock = clockOption('RollingWindow', options.clock, systemClock);
    this.values = new Float64Array(this.buckets * this.channels);
    this.totals = new Float64Array(this.channels);
    this.head = Math.floor(this.clock.now() / this.bucketMs);
  }

  /** add adds `value` to `channel` in the current bucket. */
  add(channel: number, value: number, now: number = this.clock.now()): void {
    const bucket = this.advance(now);
    this.values[bucket * this.channels + channel]! += value;
    this.totals[channel]! += value;
  }

  /** sum is the total of `channel` over the window. */
  sum(channel: number, now: number = this.clock.now()): number {
    this.advance(now);
    return this.totals[channel]!;
  }

  /**
   * reduce calls `fn` for every bucket still in the window, oldest first, with the bucket's values
   * for `channel`, and its age in buckets (0 = the current bucket).
   */
  reduce<T>(channel: number, init: T, fn: (acc: T, value: number, age: number) => T, now: number = this.clock.now()): T {
    this.advance(now);
    let acc = init;
    const n = this.buckets;
    for (let age = n - 1; age >= 0; age--) {
      const bucket = mod(this.head - age, n);
      acc = fn(acc, this.values[bucket * this.channels + channel]!, age);
    }
    return acc;
  }

  /** reset empties the window. */
  reset(now: number = this.clock.now()): void {
    this.values.fill(0);
    this.totals.fill(0);
    this.head = Math.floor(now / this.bucketMs);
  }

  /** advance clears the buckets time has passed and returns the slot of the current bucket. */
  private advance(now: number): number {
    const abs = Math.floor(now / this.bucketMs);
    const passed = abs - this.head;
    if (passed > 0) {
      const n = this.buckets;
      if (passed >= n) {
        this.values.fill(0);
        this.totals.fill(0);
      } else {
        const c = this.channels;
        for (let i = 1; i <= passed; i++) {
          const base = mod(this.head + i, n) * c;
          for (let ch = 0; ch < c; ch++) {
            this.totals[ch]! -= this.values[base + ch]!;
            this.values[base + ch] = 0;
          }
        }
      }
      this.head = abs;
    }
    return mod(this.head, this.buckets);
  }
}

function mod(a: number, n: number): number {
  const r = a % n;
  return r < 0 ? r + n : r;
}
