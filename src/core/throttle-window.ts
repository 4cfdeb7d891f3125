/**
 * ThrottleWindow: the adaptive-throttling breaker's window (go-zero `googlebreaker` buckets), a
 * specialisation of the rolling window's `BucketRing` counting successes, failures and local drops
 * per bucket. Totals live in named fields and the run of failing buckets is kept up to date, so the
 * breaker's decision is O(1) and its success path bumps two numbers.
 *
 * A bucket is "failing" when it saw failures and no success; `failingBuckets` counts those since the
 * newest bucket with a success, skipping empty buckets (go-zero's `history()`).
 */
import { BucketRing } from './rolling-window.js';

/** Channel offsets within a bucket. */
const SUCCESS = 0;
const FAILURE = 1;
const DROP = 2;
const CHANNELS = 3;

/** ThrottleWindow sums successes, failures and drops over the last `windowMs` milliseconds. @internal */
export class ThrottleWindow extends BucketRing {
  /** Totals over the window. */
  successes = 0;
  failures = 0;
  drops = 0;
  /** Totals since the window was made (never aged out): what metrics export as counters. */
  failuresTotal = 0;
  dropsTotal = 0;
  /** failingBuckets computed over every bucket but the newest. */
  private olderFailing = 0;
  /** Successes that left the window (aged out or reset); kept there, not on the success path, which stays one bump. */
  private successesAged = 0;

  constructor(windowMs: number, buckets: number, now: number) {
    super(windowMs, buckets, CHANNELS, now);
  }

  addSuccess(now: number): void {
    if (now >= this.headEnd) this.roll(now);
    this.v[this.head * CHANNELS + SUCCESS]!++;
    this.successes++;
  }

  addFailure(now: number): void {
    if (now >= this.headEnd) this.roll(now);
    this.v[this.head * CHANNELS + FAILURE]!++;
    this.failures++;
    this.failuresTotal++;
  }

  addDrop(now: number): void {
    if (now >= this.headEnd) this.roll(now);
    this.v[this.head * CHANNELS + DROP]!++;
    this.drops++;
    this.dropsTotal++;
  }

  /** successesTotal is the successes since the window was made (never aged out): a counter for metrics. */
  get successesTotal(): number {
    return this.successesAged + this.successes;
  }

  /** carryTotals takes over the since-made totals of the window this one replaces (a breaker's window changed shape). */
  carryTotals(from: ThrottleWindow): void {
    this.successesAged = from.successesTotal;
    this.failuresTotal = from.failuresTotal;
    this.dropsTotal = from.dropsTotal;
  }

  /** failingBuckets is the run of failing buckets up to the newest (call after `advance`). */
  failingBuckets(): number {
    const base = this.head * CHANNELS;
    if (this.v[base + SUCCESS]! > 0) return 0;
    return this.v[base + FAILURE]! > 0 ? this.olderFailing + 1 : this.olderFailing;
  }

  /**
   * seal stops the window for good (its breaker was closed): it never rolls again and never reads as
   * free of failures, so every later admission takes the breaker's slow path, which refuses it.
   */
  seal(): void {
    this.headEnd = Infinity;
    if (this.failures === 0) this.failures = 1;
  }

  override reset(now: number): void {
    super.reset(now);
    this.olderFailing = 0;
  }

  protected override roll(now: number): void {
    super.roll(now);
    // The run of failing buckets over the older live buckets, oldest first (the new head is empty; after
    // the whole window has passed there are none).
    const v = this.v;
    const n = this.buckets;
    let run = 0;
    const oldest = this.liveAge();
    // From the oldest live bucket to the one before the head, the slot wrapping by a compare.
    let slot = this.head - oldest;
    if (slot < 0) slot += n;
    for (let age = oldest; age >= 1; age--) {
      const base = slot * CHANNELS;
      if (v[base + SUCCESS]! > 0) run = 0;
      else if (v[base + FAILURE]! > 0) run++;
      if (++slot === n) slot = 0;
    }
    this.olderFailing = run;
  }

  protected expire(base: number): void {
    const v = this.v;
    this.successesAged += v[base + SUCCESS]!;
    this.successes -= v[base + SUCCESS]!;
    this.failures -= v[base + FAILURE]!;
    this.drops -= v[base + DROP]!;
  }

  protected clearTotals(): void {
    this.successesAged += this.successes;
    this.successes = this.failures = this.drops = 0;
  }
}
