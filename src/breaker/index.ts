/**
 * bulwark/breaker: breakers that stop calling a dependency that is failing, and let it back in as it
 * recovers.
 *
 * - `SreBreaker`: Google SRE adaptive throttling as go-zero builds it (reference 002): no states, a drop
 *   probability that rises with the failure share of a 10 s window and falls as the dependency answers.
 * - `CircuitBreaker`: the three-state breaker (closed / open / half-open) of reference 004, tripping on
 *   the failure rate and on the slow-call rate.
 * - `BreakerGroup`: breakers by name (one per downstream, instance or method), idle ones evicted.
 *
 * Both breakers offer two levels (STYLE.md §6): `admit()` returns a token to mark the call's outcome
 * (or throws `BreakerOpenError`), and `execute(fn, options)` runs a task under the breaker. Both
 * implement the core `Guard` shape, so `wrap()` can nest them with the policies.
 */
import type { ExecuteOptions, Guard, Task } from '../core/guard.js';
import type { BreakerOpenError } from '../core/errors.js';

/**
 * BreakerToken marks the outcome of one call a breaker admitted: call exactly one of `success`,
 * `failure` or `release`. Only the first report counts; later ones are ignored.
 */
export interface BreakerToken {
  /** success reports that the call worked. */
  success(): void;
  /** failure reports that the call failed; `err` becomes one of the reasons a later rejection lists. */
  failure(err?: unknown): void;
  /**
   * release gives the admission back without counting the call as a success or a failure: for a call
   * that never ran (a later guard refused it, the request went away first) or that the caller itself
   * cancelled, which says nothing about the dependency. A half-open CircuitBreaker frees the probe's
   * permit at once, so another call can probe; an SreBreaker simply counts nothing.
   */
  release(): void;
}

/** BreakerExecuteOptions are the per-call options of a breaker's `execute`. */
export interface BreakerExecuteOptions<T = unknown> extends ExecuteOptions {
  /**
   * isFailure decides whether an error the task threw counts against the dependency (go-zero's
   * "acceptable"): return false for errors that are the caller's fault (a 404, a validation error), which
   * then count as successes. The error is still passed on to the caller. Defaults to every error counting.
   */
  isFailure?: ((err: unknown) => boolean) | undefined;
  /**
   * fallback answers instead of the `BreakerOpenError` when the breaker rejects the call (go-zero
   * `DoWithFallback`). It is not called when the task itself fails: use the policy module's fallback
   * for that. Defaults to none: the rejection reaches the caller.
   */
  fallback?: ((err: BreakerOpenError) => T | PromiseLike<T>) | undefined;
}

/** BreakerState is the state of a three-state breaker. */
export type BreakerState = 'closed' | 'open' | 'half-open';

/** Breaker is what both breakers offer; a BreakerGroup holds any kind of Breaker. */
export interface Breaker extends Guard {
  /** The breaker's name, used in its errors and events. */
  readonly name: string;
  /** admit lets in one call and returns the token to report its outcome, or throws `BreakerOpenError`. */
  admit(): BreakerToken;
  /** execute runs `fn` under the breaker: rejects with `BreakerOpenError` (or answers `fallback`) when it rejects the call. */
  execute<T>(fn: Task<T>, options?: BreakerExecuteOptions<T>): Promise<T>;
}

export { SreBreaker, sreBreakerDefaults, type SreBreakerOptions, type SreBreakerStats } from './sre-breaker.js';
export {
  CircuitBreaker,
  circuitBreakerDefaults,
  type CircuitBreakerOptions,
  type CircuitBreakerStats,
  type CircuitWindow,
  type OpenBackoff,
  type StateChange,
} from './circuit-breaker.js';
export {
  BreakerGroup,
  breakerGroupDefaults,
  getDefaultBreakerGroup,
  setDefaultBreakerGroup,
  type BreakerGroupOptions,
} from './breaker-group.js';
