/**
 * The rolling window family: counts kept per bucket over the last `windowMs` milliseconds, split into
 * `buckets` buckets (go-zero `collection.RollingWindow`). Adding is O(1) and allocates nothing: buckets
 * that time has passed are cleared lazily, on the first add or read after their time, and running totals
 * are kept so that reading a sum is O(1) too. When the whole window has passed, or every bucket holding
 * counts has (a breaker idle for longer than its window, read by a scrape every few seconds), the ring
 * is emptied in O(1): the buckets older than `validAbs` count as empty, and each is zeroed when it next
 * becomes the newest.
 *
 * `BucketRing` is the one roll loop; `RollingWindow` is the general window (any number of channels, sums
 * and a walk over the buckets). The breakers' windows (`outcome-window.ts`, `throttle-window.ts`) are
 * specialisations of the same ring that keep their totals in named fields, because their success path
 * is a handful of nanoseconds and a named field is the cheapest thing to read and bump.
 *
 * Time comes from the clock, or from a `now` the caller already read (so that a hot path reads the
 * clock once for several parts).
 */
import { systemClock, type Clock } from './clock.js';
import { clockOption, integer, options as optionsObject, positive, type OptionKeys } from './validate.js';

/** The keys of RollingWindowOptions, all of them: any other is refused (see `options`). */
const ROLLING_WINDOW_KEYS = {
  channels: true,
  clock: true,
  windowMs: true,
  buckets: true,
} as const satisfies OptionKeys<RollingWindowOptions>;

/** WindowOptions is the one shape every bucketed window's size takes in bulwark. */
export interface WindowOptions {
  /** Length of the window in milliseconds. */
  windowMs: number;
  /** Number of buckets the window is made of (each `windowMs / buckets` wide). */
  buckets: number;
}

/**
 * BucketRing is the roll logic every window shares: a ring of `buckets` buckets of `channels` numbers
 * each (`v[slot * channels + channel]`), the slot of the newest bucket and the time it ends. A
 * specialisation keeps its own totals: `expire` subtracts a bucket about to be cleared, `clearTotals`
 * zeroes them when the whole window has passed. Not exported from bulwark/core, but not marked internal either:
 * RollingWindow's published declaration extends it, so stripping it would leave that declaration dangling.
 */
export abstract class BucketRing {
  readonly buckets: number;
  readonly bucketMs: number;
  readonly windowMs: number;
  /** Numbers per bucket. */
  protected readonly channels: number;
  /**
   * The buckets, newest at `head`. A plain array, not a typed array: for the breakers' few dozen
   * small integers V8 keeps it on the heap with the object, where a typed array this size costs more.
   */
  protected readonly v: number[];
  /** Slot of the newest bucket. */
  protected head = 0;
  /** The newest bucket's absolute number (floor(now / bucketMs)). */
  protected headAbs: number;
  /** When the newest bucket ends: a time at or past this needs a roll. */
  protected headEnd: number;
  /**
   * The absolute number of the oldest bucket that holds counts: the ring was last emptied when this
   * bucket was the newest, and the buckets older than it hold stale numbers that count as 0 (they are
   * zeroed when they become the newest). Buckets from `validAbs` to `headAbs` are all live.
   */
  protected validAbs: number;
  /**
   * The newest bucket seen holding counts when it stopped being the newest (−∞: none since the ring was
   * emptied). Adds go to the newest bucket only, so no older bucket holds counts: once this one has left
   * the window, the window is empty and a roll empties it in O(1) however few buckets passed (a breaker
   * idle for a window, scraped more often than that). Kept by `roll`, not by the adds.
   */
  private countedAbs = -Infinity;

  constructor(windowMs: number, buckets: number, channels: number, now: number) {
    this.buckets = buckets;
    this.windowMs = windowMs;
    this.bucketMs = windowMs / buckets;
    this.channels = channels;
    this.v = new Array<number>(buckets * channels).fill(0);
    this.headAbs = Math.floor(now / this.bucketMs);
    this.headEnd = (this.headAbs + 1) * this.bucketMs;
    this.validAbs = this.headAbs;
  }

  /** advance moves the window to `now`, clearing the buckets time has passed. */
  advance(now: number): void {
    if (now >= this.headEnd) this.roll(now);
  }

  /** reset empties the window; its newest bucket is the one of `now`. */
  reset(now: number): void {
    this.clearTotals();
    this.empty(Math.floor(now / this.bucketMs));
    this.countedAbs = -Infinity;
  }

  /** empty makes bucket `abs` the newest and the only live one, zeroing it alone (O(channels), not O(buckets)). */
  private empty(abs: number): void {
    const c = this.channels;
    const base = this.head * c;
    for (let ch = 0; ch < c; ch++) this.v[base + ch] = 0;
    this.headAbs = this.validAbs = abs;
    this.headEnd = (abs + 1) * this.bucketMs;
  }

  /** roll clears the buckets between the newest and `now` (call only when `now >= headEnd`). */
  protected roll(now: number): void {
    const abs = Math.floor(now / this.bucketMs);
    const passed = abs - this.headAbs;
    const n = this.buckets;
    const v = this.v;
    const c = this.channels;
    const head = this.head * c;
    for (let ch = 0; ch < c; ch++) {
      if (v[head + ch] !== 0) {
        this.countedAbs = this.headAbs;
        break;
      }
    }
    if (passed >= n || this.countedAbs <= abs - n) {
      // The whole window has passed, or every bucket with counts has: nothing to expire one by one.
      this.clearTotals();
      this.empty(abs);
      return;
    }
    if (passed > 0) {
      // The bucket the i-th slot after the head held was number headAbs + i − n: live (to expire) unless
      // older than validAbs. The slot wraps by a compare rather than a division (a scrape rolls 10 000).
      const live = this.validAbs - this.headAbs + n;
      let slot = this.head;
      for (let i = 1; i <= passed; i++) {
        if (++slot === n) slot = 0;
        const base = slot * c;
        if (i >= live) this.expire(base);
        for (let ch = 0; ch < c; ch++) v[base + ch] = 0;
      }
      this.head = slot;
    }
    this.headAbs = abs;
    this.headEnd = (abs + 1) * this.bucketMs;
  }

  /** liveAge is the age of the oldest live bucket (0 = only the newest): older ones count as empty. */
  protected liveAge(): number {
    const age = this.headAbs - this.validAbs;
    return age < this.buckets ? age : this.buckets - 1;
  }

  /** slotOf answers the slot of the bucket `age` buckets older than the newest. */
  protected slotOf(age: number): number {
    const n = this.buckets;
    return (((this.head - age) % n) + n) % n;
  }

  /** expire subtracts the bucket at `v[base…]` from the totals before it is cleared. */
  protected abstract expire(base: number): void;
  /** clearTotals zeroes the totals (the whole window has passed). */
  protected abstract clearTotals(): void;
}

/** RollingWindowOptions configures a RollingWindow. */
export interface RollingWindowOptions extends Partial<WindowOptions> {
  /** Number of independent channels summed per bucket (e.g. total, failures, slow). Defaults to 1. */
  channels?: number;
  /** The time source. Defaults to the monotonic system clock. */
  clock?: Clock;
}

/** Defaults for RollingWindowOptions: 10 000 ms in 10 buckets, one channel. */
export const rollingWindowDefaults = Object.freeze({ windowMs: 10_000, buckets: 10, channels: 1 });

/** RollingWindow sums values of one or more channels over a sliding time window made of buckets. */
export class RollingWindow extends BucketRing {
  private readonly clock: Clock;
  private readonly totals: number[];

  constructor(options?: RollingWindowOptions) {
    const o = optionsObject('RollingWindow', options, ROLLING_WINDOW_KEYS);
    const d = rollingWindowDefaults;
    const windowMs = positive('RollingWindow', 'windowMs', o.windowMs ?? d.windowMs);
    const buckets = integer('RollingWindow', 'buckets', o.buckets ?? d.buckets, 1, 1 << 20);
    const channels = integer('RollingWindow', 'channels', o.channels ?? d.channels, 1, 64);
    const clock = clockOption('RollingWindow', o.clock, systemClock);
    super(windowMs, buckets, channels, clock.now());
    this.clock = clock;
    this.totals = new Array<number>(channels).fill(0);
  }

  /** add adds `value` to `channel` in the current bucket. */
  add(channel: number, value: number, now: number = this.clock.now()): void {
    if (now >= this.headEnd) this.roll(now);
    this.v[this.head * this.channels + channel]! += value;
    this.totals[channel]! += value;
  }

  /** sum is the total of `channel` over the window. */
  sum(channel: number, now: number = this.clock.now()): number {
    if (now >= this.headEnd) this.roll(now);
    return this.totals[channel]!;
  }

  /**
   * reduce calls `fn` for every bucket still in the window, oldest first, with the bucket's value for
   * `channel` and its age in buckets (0 = the current bucket).
   */
  reduce<T>(channel: number, init: T, fn: (acc: T, value: number, age: number) => T, now: number = this.clock.now()): T {
    if (now >= this.headEnd) this.roll(now);
    let acc = init;
    const c = this.channels;
    const live = this.liveAge();
    for (let age = this.buckets - 1; age >= 0; age--) acc = fn(acc, age > live ? 0 : this.v[this.slotOf(age) * c + channel]!, age);
    return acc;
  }

  /** reset empties the window. */
  override reset(now: number = this.clock.now()): void {
    super.reset(now);
  }

  protected expire(base: number): void {
    const v = this.v;
    const t = this.totals;
    for (let ch = 0; ch < this.channels; ch++) t[ch]! -= v[base + ch]!;
  }

  protected clearTotals(): void {
    this.totals.fill(0);
  }
}
