/**
 * The shapes of bulwark/policy: each guard's options, stats and events, and what `wrap` accepts and
 * answers. Nothing but types; the guards themselves sit beside this file.
 */
import type { BackoffOptions } from '../core/backoff.js';
import type { Clock } from '../core/clock.js';
import type { ExecuteOptions, Guard, Task } from '../core/guard.js';
import type { Fallback } from './fallback.js';
import type { RetryBudget } from './retry-budget.js';

/**
 * GuardLike is what `wrap` accepts: anything with an `execute(fn, { signal })` method — every Guard,
 * and a `Fallback<R>`, which guards tasks answering `R`s.
 */
export type GuardLike = Guard | Fallback<unknown>;

/** FallbackValue is the union of the value types of the Fallbacks among `G` (never when there are none). */
export type FallbackValue<G> = G extends Fallback<infer R> ? R : never;

/** WrappedResult is the result type a wrap may guard: anything without a Fallback, an `R` with a Fallback<R> inside. */
export type WrappedResult<R> = [R] extends [never] ? unknown : R;

/**
 * Wrapped is what `wrap` returns: a guard whose result is the task's, widened by the value type `R` of
 * any Fallback inside (a plain Guard when there is none). With a Fallback<R> inside, tasks must answer
 * `R`s, as that Fallback requires. `guards` lists what it composes, outermost first.
 */
export interface Wrapped<R = never> {
  execute<T extends WrappedResult<R>>(fn: Task<T>, options?: ExecuteOptions): Promise<T | R>;
  readonly guards: readonly GuardLike[];
}

/** RetryEvent describes one retry about to happen. */
export interface RetryEvent {
  /** The attempt that failed (1 = the first call). */
  attempt: number;
  /** Why it failed. */
  error: unknown;
  /** How long Retry waits before the next attempt, in milliseconds. */
  delayMs: number;
}

/** RetryOptions configures a Retry. */
export interface RetryOptions {
  /** Attempts in all, the first call included (1 = never retry). Defaults to 3. */
  maxAttempts?: number;
  /** Waits between attempts (core Backoff: exponential, capped, jittered). Defaults to 100 ms doubling up to 10 000 ms with full jitter. */
  backoff?: BackoffOptions;
  /** Whether the failure of attempt `attempt` (1-based) is worth another attempt. Defaults to `defaultShouldRetry`. */
  shouldRetry?: (err: unknown, attempt: number) => boolean;
  /** The budget every retry must be allowed by; share one per downstream. Defaults to none (attempts are the only cap). */
  budget?: RetryBudget;
  /** The clock whose timers wait out the backoff between attempts. Defaults to `systemClock`. */
  clock?: Clock;
}

/** RetryBudgetOptions configures a RetryBudget. */
export interface RetryBudgetOptions {
  /** How long a call's deposit counts (Finagle `ttl`), in milliseconds. Defaults to 10 000. */
  windowMs?: number;
  /** Buckets the window is counted in; more is finer and costs a little more memory. Defaults to 10. */
  buckets?: number;
  /** Retries allowed per call, as a fraction (0.2 = 20 %; Finagle `percentCanRetry`, may exceed 1). Defaults to 0.2. */
  percentCanRetry?: number;
  /** Retries per second always allowed, whatever the call count (Finagle `minRetriesPerSec`). Defaults to 10. */
  minRetriesPerSec?: number;
  /** The time source. Defaults to the monotonic system clock. */
  clock?: Clock;
}

/** RetryBudgetStats is a snapshot of a budget over its current window. */
export interface RetryBudgetStats {
  /** Calls counted in the window. */
  calls: number;
  /** Retries allowed in the window. */
  retries: number;
  /** Retries that would be allowed right now. */
  balance: number;
  /** Retries refused since the budget was made. */
  refused: number;
}

/** TimeoutOptions configures a Timeout. */
export interface TimeoutOptions {
  /** The deadline, in milliseconds from the start of `execute`. Defaults to 10 000. */
  timeoutMs?: number;
  /** Time source and timers of the deadlines (shared or per call). Defaults to `systemClock`. */
  clock?: Clock;
}

/** TimeoutStats is a snapshot of a Timeout's counters since it was made. */
export interface TimeoutStats {
  /** Calls `execute` started (bad arguments not counted). */
  calls: number;
  /** Calls that ended in TimeoutError. */
  timeouts: number;
}

/** BulkheadOptions configures a Bulkhead. */
export interface BulkheadOptions {
  /** Calls that may run at once. Defaults to 10. */
  maxConcurrent?: number;
  /** Calls that may wait for a slot; 0 rejects as soon as every slot is taken. Defaults to 0. */
  maxQueued?: number;
}

/** BulkheadStats is a snapshot of a bulkhead's counters. */
export interface BulkheadStats {
  /** Calls running now. */
  active: number;
  /** Calls waiting for a slot now. */
  queued: number;
  /** Calls rejected because every slot and queue place was taken, since the bulkhead was made. */
  rejected: number;
}

/** FallbackStrategy answers in place of a failed call, or throws (rejects) to pass to the next one. */
export type FallbackStrategy<R> = (err: unknown, signal: AbortSignal) => R | PromiseLike<R>;

/** FallbackOptions configures a Fallback. */
export interface FallbackOptions<R> {
  /** The value answered when nothing before it did. Defaults to none (the original error is rethrown). */
  value?: R;
  /** Remember the last successful result and answer it; `{ maxAgeMs }` only while younger than that. Defaults to false. */
  lastGood?: boolean | { maxAgeMs?: number };
  /** Strategies tried in turn after the last good value and before `value`. Defaults to none. */
  chain?: readonly FallbackStrategy<R>[];
  /** Which errors fall back. Defaults to every error except `AbortedError`. */
  shouldFallback?: (err: unknown) => boolean;
  /** The time source for `lastGood.maxAgeMs`. Defaults to the monotonic system clock. */
  clock?: Clock;
}

/** FallbackEvent describes a call that fell back. */
export interface FallbackEvent {
  /** The error the call failed with. */
  error: unknown;
  /** What answered: `'last-good'`, `'chain'` (with `index`), `'value'`, or `'none'` (the error was rethrown). */
  source: 'last-good' | 'chain' | 'value' | 'none';
  /** The chain strategy that answered, when `source` is `'chain'`. */
  index?: number;
}

/** FaultDelay delays `percent` % of calls by `ms` before they run. */
export interface FaultDelay {
  /** The delay added, in ms (at most 2 147 483 647). Required. */
  ms: number;
  /** The share of calls delayed, in percent [0, 100]. Required. */
  percent: number;
}

/** FaultAbort fails `percent` % of calls with a FaultInjectedError, without running them. */
export interface FaultAbort {
  /** The share of calls failed, in percent [0, 100]. Required. */
  percent: number;
  /** The HTTP status the failure answers with (an `HttpGuard` route's response; the error's `status`), in [200, 599]. Defaults to 503. */
  status?: number;
  /** The failure's message. Defaults to 'fault injected'. */
  error?: string;
}

/** FaultOptions configures a FaultInjector (Envoy's / Istio's HTTP fault injection: delay, then abort). */
export interface FaultOptions {
  /** Delay some calls. Defaults to none. */
  delay?: FaultDelay | undefined;
  /** Fail some calls. Defaults to none. */
  abort?: FaultAbort | undefined;
  /** The fault ends by itself this long after it was configured (or reconfigured), in ms, at most 24 h. Defaults to 600 000 (10 min). */
  ttlMs?: number;
  /** Time source and timers (the delays, the expiry). Defaults to `systemClock`. */
  clock?: Clock;
  /** Uniform random numbers in [0, 1), to choose the calls delayed and failed. Defaults to `Math.random`. */
  random?: () => number;
}

/** FaultStats is a snapshot of a FaultInjector's counters since it was made. */
export interface FaultStats {
  /** Calls `execute` saw while the fault was active (bad arguments not counted). */
  calls: number;
  /** Of those, calls delayed. */
  delayed: number;
  /** Of those, calls failed with FaultInjectedError. */
  aborted: number;
  /** True once the fault has expired (its ttlMs since it was last configured passed): calls pass straight through. */
  expired: boolean;
  /** Milliseconds left before it expires (0 once expired). */
  remainingMs: number;
}
