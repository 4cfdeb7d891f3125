/** Test fixtures of core's time: not part of the package (excluded from its build). */
import type { Clock, ManualClock } from './clock.js';

/**
 * LateClock reads `manual`'s time plus `lateMs`: its timers run on time by `manual`, late by its own
 * `now`, as in a process that was busy past a deadline (a GC pause, synchronous work).
 */
export function lateClock(manual: ManualClock): Clock & { lateMs: number } {
  return {
    lateMs: 0,
    now() {
      return manual.now() + this.lateMs;
    },
    setTimeout: (fn, ms) => manual.setTimeout(fn, ms),
    setInterval: (fn, ms) => manual.setInterval(fn, ms),
    clearTimeout: (handle) => manual.clearTimeout(handle),
  };
}
