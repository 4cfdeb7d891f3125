/**
 * The CircuitBreaker's windows over call outcomes: the last `size` calls (count window) or the calls
 * of the last `buckets × bucketMs` milliseconds (time window). Both keep running totals of calls,
 * failures and slow calls; recording is O(1) and allocates nothing.
 */

/** OutcomeWindow is the shape both windows share. Totals are current after `advance(now)`. */
export interface OutcomeWindow {
  calls: number;
  failures: number;
  slow: number;
  record(failed: boolean, slow: boolean, now: number): void;
  /** success records a call that neither failed nor was slow (the hot path). */
  success(now: number): void;
  advance(now: number): void;
  reset(now: number): void;
}

const FAILED = 1;
const SLOW = 2;

/** CountWindow counts the outcomes of the last `size` calls, whenever they happened. */
export class CountWindow implements OutcomeWindow {
  calls = 0;
  failures = 0;
  slow = 0;
  private readonly ring: Uint8Array;
  private at = 0;

  constructor(readonly size: number) {
    this.ring = new Uint8Array(size);
  }

  record(failed: boolean, slow: boolean, _now: number): void {
    const outcome = (failed ? FAILED : 0) | (slow ? SLOW : 0);
    const at = this.at;
    if (this.calls === this.size) {
      const old = this.ring[at]!;
      if (old & FAILED) this.failures--;
      if (old & SLOW) this.slow--;
    } else this.calls++;
    this.ring[at] = outcome;
    if (failed) this.failures++;
    if (slow) this.slow++;
    this.at = at + 1 === this.size ? 0 : at + 1;
  }

  success(_now: number): void {
    const at = this.at;
    if (this.calls === this.size) {
      const old = this.ring[at]!;
      if (old !== 0) {
        if (old & FAILED) this.failures--;
        if (old & SLOW) this.slow--;
        this.ring[at] = 0;
      }
    } else this.calls++;
    this.at = at + 1 === this.size ? 0 : at + 1;
  }

  advance(_now: number): void {}

  reset(_now: number): void {
    this.ring.fill(0);
    this.at = this.calls = this.failures = this.slow = 0;
  }
}

/** TimeWindow counts the outcomes of the last `buckets × bucketMs` milliseconds. */
export class TimeWindow implements OutcomeWindow {
  calls = 0;
  failures = 0;
  slow = 0;
  /** v[slot * 3 + 0 | 1 | 2] = calls | failures | slow of one bucket. */
  private readonly v: number[];
  private head = 0;
  private headAbs: number;
  private headEnd: number;

  constructor(
    readonly buckets: number,
    readonly bucketMs: number,
    now: number,
  ) {
    this.v = new Array<number>(buckets * 3).fill(0);
    this.headAbs = Math.floor(now / bucketMs);
    this.headEnd = (this.headAbs + 1) * bucketMs;
  }

  record(failed: boolean, slow: boolean, now: number): void {
    if (now >= this.headEnd) this.roll(now);
    const base = this.head * 3;
    this.v[base]!++;
    this.calls++;
    if (failed) {
      this.v[base + 1]!++;
      this.failures++;
    }
    if (slow) {
      this.v[base + 2]!++;
      this.slow++;
    }
  }

  success(now: number): void {
    if (now >= this.headEnd) this.roll(now);
    this.v[this.head * 3]!++;
    this.calls++;
  }

  advance(now: number): void {
    if (now >= this.headEnd) this.roll(now);
  }

  reset(now: number): void {
    this.v.fill(0);
    this.calls = this.failures = this.slow = 0;
    this.headAbs = Math.floor(now / this.bucketMs);
    this.headEnd = (this.headAbs + 1) * this.bucketMs;
  }

  private roll(now: number): void {
    const abs = Math.floor(now / this.bucketMs);
    const passed = abs - this.headAbs;
    const n = this.buckets;
    if (passed >= n) {
      this.v.fill(0);
      this.calls = this.failures = this.slow = 0;
    } else {
      const v = this.v;
      for (let i = 1; i <= passed; i++) {
        const base = ((this.head + i) % n) * 3;
        this.calls -= v[base]!;
        this.failures -= v[base + 1]!;
        this.slow -= v[base + 2]!;
        v[base] = v[base + 1] = v[base + 2] = 0;
      }
    }
    this.head = (this.head + passed) % n;
    this.headAbs = abs;
    this.headEnd = (abs + 1) * this.bucketMs;
  }
}
