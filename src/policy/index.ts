/**
 * bulwark/policy: the call guards besides breakers — `Retry` (with a shared `RetryBudget`), `Timeout`,
 * `Bulkhead` and `Fallback`, `FaultInjector` (rehearsing an outage) — and `wrap()`, which nests any of them and the breakers (anything with the
 * core `Guard` shape), outermost first. Recommended order: `wrap(fallback, retry, bulkhead, breaker,
 * timeout)`; docs/policy.md says why.
 */
export { Retry, retryDefaults, defaultShouldRetry, noRetryCodes, type RetryLiveOptions } from './retry.js';
export { RetryBudget, retryBudgetDefaults } from './retry-budget.js';
export { Timeout, timeoutDefaults } from './timeout.js';
export { Bulkhead, bulkheadDefaults } from './bulkhead.js';
export { Fallback, fallbackDefaults, defaultShouldFallback } from './fallback.js';
export { wrap } from './wrap.js';
export { FaultInjector, faultDefaults } from './fault.js';
export type {
  RetryOptions,
  RetryEvent,
  RetryBudgetOptions,
  RetryBudgetStats,
  TimeoutOptions,
  TimeoutStats,
  BulkheadOptions,
  BulkheadStats,
  FallbackOptions,
  FallbackStrategy,
  FallbackEvent,
  Wrapped,
  WrappedResult,
  GuardLike,
  FallbackValue,
  FaultOptions,
  FaultDelay,
  FaultAbort,
  FaultStats,
} from './types.js';
export type { Guard, Task, ExecuteOptions } from '../core/guard.js';
export { AbortedError, BulkheadRejectedError, ClosedError, FaultInjectedError, RetryBudgetExhaustedError, TimeoutError } from '../core/errors.js';
