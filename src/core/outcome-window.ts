/**
 * Windows over call outcomes, for a breaker that trips on a failure rate: the last `size` calls
 * (`OutcomeCountWindow`) or the calls of the last `windowMs` milliseconds (`OutcomeTimeWindow`, a
 * specialisation of the rolling window's `BucketRing`). Both keep running totals of calls, failures and
 * slow calls in named fields; recording is O(1) and allocates nothing, and `success` — the hot path —
 * bumps two numbers.
 */
import { BucketRing } from './rolling-window.js';

/** OutcomeWindow is the shape both windows share. Totals are current after `advance(now)`. @internal */
export interface OutcomeWindow {
  calls: number;
  failures: number;
  slow: number;
  /** Calls and failed calls since the window was made (never aged out, never reset). */
  callsTotal: number;
  failuresTotal: number;
  /** record counts one call. */
  record(failed: boolean, slow: boolean, now: number): void;
  /** success counts a call that neither failed nor was slow (the hot path). */
  success(now: number): void;
  /** advance forgets what is older than the window at `now`. */
  advance(now: number): void;
  /** reset empties the window. */
  reset(now: number): void;
}

const FAILED = 1;
const SLOW = 2;

/** OutcomeCountWindow counts the outcomes of the last `size` calls, whenever they happened. @internal */
export class OutcomeCountWindow implements OutcomeWindow {
  calls = 0;
  failures = 0;
  slow = 0;
  /** Calls and failed calls since the window was made (never aged out, never reset). */
  callsTotal = 0;
  failuresTotal = 0;
  private readonly ring: Uint8Array;
  private at = 0;

  constructor(readonly size: number) {
    this.ring = new Uint8Array(size);
  }

  record(failed: boolean, slow: boolean, _now: number): void {
    this.callsTotal++;
    if (failed) this.failuresTotal++;
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
    this.callsTotal++;
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

/** Channel offsets within a bucket. */
const CALLS = 0;
const FAILURES = 1;
const SLOWS = 2;

/** OutcomeTimeWindow counts the outcomes of the last `windowMs` milliseconds in `buckets` buckets. @internal */
export class OutcomeTimeWindow extends BucketRing implements OutcomeWindow {
  calls = 0;
  failures = 0;
  slow = 0;
  /** Calls and failed calls since the window was made (never aged out, never reset). */
  callsTotal = 0;
  failuresTotal = 0;

  constructor(windowMs: number, buckets: number, now: number) {
    super(windowMs, buckets, 3, now);
  }

  record(failed: boolean, slow: boolean, now: number): void {
    if (now >= this.headEnd) this.roll(now);
    this.callsTotal++;
    if (failed) this.failuresTotal++;
    const base = this.head * 3;
    this.v[base + CALLS]!++;
    this.calls++;
    if (failed) {
      this.v[base + FAILURES]!++;
      this.failures++;
    }
    if (slow) {
      this.v[base + SLOWS]!++;
      this.slow++;
    }
  }

  success(now: number): void {
    if (now >= this.headEnd) this.roll(now);
    this.callsTotal++;
    this.v[this.head * 3 + CALLS]!++;
    this.calls++;
  }

  protected expire(base: number): void {
    const v = this.v;
    this.calls -= v[base + CALLS]!;
    this.failures -= v[base + FAILURES]!;
    this.slow -= v[base + SLOWS]!;
  }

  protected clearTotals(): void {
    this.calls = this.failures = this.slow = 0;
  }
}
