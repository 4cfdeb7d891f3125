/**
 * SreWindow: the SRE breaker's rolling window of buckets, each counting successes, failures and local
 * rejections (go-zero `googlebreaker` buckets). Adding is O(1) and allocates nothing; the totals and
 * the run of failing buckets are kept up to date, so the breaker's decision is O(1) too.
 *
 * A bucket is "failing" when it saw failures and no success; `failingBuckets` counts those since the
 * newest bucket with a success, skipping empty buckets (go-zero's `history()`).
 */

/** Channel offsets within a bucket. */
const SUCCESS = 0;
const FAILURE = 1;
const DROP = 2;
const CHANNELS = 3;

/** SreWindow sums successes, failures and drops over the last `buckets × bucketMs` milliseconds. */
export class SreWindow {
  readonly buckets: number;
  readonly bucketMs: number;
  /** Totals over the window. */
  successes = 0;
  failures = 0;
  drops = 0;
  /** A plain array of small integers: V8 allocates it on the heap, unlike a typed array this size. */
  private readonly v: number[];
  /** Slot of the newest bucket, its absolute number (floor(now / bucketMs)), and when it ends. */
  private head = 0;
  private headAbs: number;
  private headEnd: number;
  /** failingBuckets computed over every bucket but the newest. */
  private olderFailing = 0;

  constructor(buckets: number, bucketMs: number, now: number) {
    this.buckets = buckets;
    this.bucketMs = bucketMs;
    this.v = new Array<number>(buckets * CHANNELS).fill(0);
    this.headAbs = Math.floor(now / bucketMs);
    this.headEnd = (this.headAbs + 1) * bucketMs;
  }

  /** advance moves the window to `now`, clearing the buckets time has passed. */
  advance(now: number): void {
    if (now >= this.headEnd) this.roll(now);
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
  }

  addDrop(now: number): void {
    if (now >= this.headEnd) this.roll(now);
    this.v[this.head * CHANNELS + DROP]!++;
    this.drops++;
  }

  /** failingBuckets is the run of failing buckets up to the newest (call after `advance`). */
  failingBuckets(): number {
    const base = this.head * CHANNELS;
    if (this.v[base + SUCCESS]! > 0) return 0;
    return this.v[base + FAILURE]! > 0 ? this.olderFailing + 1 : this.olderFailing;
  }

  /** reset empties the window. */
  reset(now: number): void {
    this.v.fill(0);
    this.successes = this.failures = this.drops = 0;
    this.olderFailing = 0;
    this.headAbs = Math.floor(now / this.bucketMs);
    this.headEnd = (this.headAbs + 1) * this.bucketMs;
  }

  private roll(now: number): void {
    const abs = Math.floor(now / this.bucketMs);
    const passed = abs - this.headAbs;
    const n = this.buckets;
    const v = this.v;
    if (passed >= n) {
      v.fill(0);
      this.successes = this.failures = this.drops = 0;
    } else {
      for (let i = 1; i <= passed; i++) {
        const base = ((this.head + i) % n) * CHANNELS;
        this.successes -= v[base + SUCCESS]!;
        this.failures -= v[base + FAILURE]!;
        this.drops -= v[base + DROP]!;
        v[base + SUCCESS] = v[base + FAILURE] = v[base + DROP] = 0;
      }
    }
    this.head = (this.head + Math.max(0, passed)) % n;
    this.headAbs = abs;
    this.headEnd = (abs + 1) * this.bucketMs;
    // The run of failing buckets over the older buckets, oldest first (the new head is empty).
    let run = 0;
    for (let age = n - 1; age >= 1; age--) {
      const base = ((this.head - age + n) % n) * CHANNELS;
      if (v[base + SUCCESS]! > 0) run = 0;
      else if (v[base + FAILURE]! > 0) run++;
    }
    this.olderFailing = run;
  }
}
