/**
 * Clock: the one source of time for every time-based part of bulwark.
 * Milliseconds everywhere; the default clock is monotonic (`performance.now()`), so a wall-clock
 * jump never opens a breaker or refills a bucket.
 */
import { performance } from 'node:perf_hooks';

/** Clock answers the current time in milliseconds. Only differences between readings matter. */
export interface Clock {
  now(): number;
}

/** systemClock is the default clock: monotonic milliseconds since process start. */
export const systemClock: Clock = Object.freeze({
  now: () => performance.now(),
});

/** ManualClock is a clock that moves only when told to; tests drive time with it instead of sleeping. */
export class ManualClock implements Clock {
  private t: number;

  /** ManualClock starts at `start` milliseconds. Defaults to 0. */
  constructor(start = 0) {
    if (!Number.isFinite(start)) throw new RangeError(`ManualClock: start must be a finite number, got ${String(start)}`);
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  /** advance moves time forward by `ms` (≥ 0) and returns the new time. */
  advance(ms: number): number {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`ManualClock.advance: ms must be a finite number ≥ 0, got ${String(ms)}`);
    this.t += ms;
    return this.t;
  }

  /** set moves time to `ms`, which may not be earlier than now (clocks here are monotonic). */
  set(ms: number): void {
    if (!Number.isFinite(ms) || ms < this.t) throw new RangeError(`ManualClock.set: ms must be finite and ≥ now (${this.t}), got ${String(ms)}`);
    this.t = ms;
  }
}
