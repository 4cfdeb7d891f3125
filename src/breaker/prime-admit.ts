/**
 * The lazy warm-up of a breaker's `admit()`, so that a breaker throwing from its first calls throws cheaply.
 */
import type { AdmissionToken } from '../core/admission.js';
import type { Clock } from '../core/clock.js';
import { CoarseClock } from '../core/coarse-clock.js';

/** How many admissions `primeAdmit` makes: V8 wants about 8 normal returns of a function before it
 * gives it feedback (`--interrupt-budget-factor-for-feedback-allocation`, 8 × its bytecode size). */
const PRIME_CALLS = 32;

/**
 * primeAdmit calls `admit()` of a throwaway healthy breaker a few times, so that a breaker whose
 * `admit()` throws from its first calls still throws cheaply. Each breaker class calls it once, from
 * its first constructor call (nothing runs when the module is imported: the package has no side effects).
 *
 * Why (measured with `--trace-opt`, `--trace-turbo-inlining` and `%GetOptimizationStatus`): V8
 * charges a function's tier-up budget when it *returns* (or loops), never when it throws. It gives a
 * function the feedback vector it needs to be inlined or optimised only once that budget reaches about
 * 8 normal returns. An SreBreaker with the defaults drops calls after its 7th admission, so in a
 * process where no breaker had been healthy for long, `admit()` stayed in the interpreter for good:
 * the caller's optimised code could not inline it, and each throw unwound an interpreted frame
 * (~520 ns against ~190 ns for a throw inlined into the caller's `try`). The clock is a private
 * CoarseClock (same class as the default, so the call sites stay monomorphic), stopped at once.
 *
 * Checked again (issue 25), fresh processes whose breaker refuses from its first call, CPU time per
 * refused `admit()`, 11 interleaved rounds: an isolated CircuitBreaker throws in 474 ns primed against
 * 643 ns without (per-round ratio 1.35, range 1.28–1.42), so it stays. An SreBreaker dropping from its
 * first call showed no difference (1.04, 0.90–1.29): its force pass lets a call return now and then,
 * which warms `admit()` by itself.
 */
export function primeAdmit(make: (clock: Clock) => { admit(): AdmissionToken }): void {
  const clock = new CoarseClock();
  try {
    const b = make(clock);
    for (let i = 0; i < PRIME_CALLS; i++) b.admit().release();
  } finally {
    void clock.close();
  }
}
