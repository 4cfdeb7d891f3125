/**
 * bulwark/policy: the call guards besides breakers — `Retry` (with a shared `RetryBudget`), `Timeout`,
 * `Bulkhead` and `Fallback` — and `wrap()`, which nests any of them and the breakers (anything with the
 * core `Guard` shape), outermost first. Recommended order: `wrap(fallback, retry, bulkhead, breaker,
 * timeout)`; docs/policy.md says why.
 */
export { Retry, retryDefaults, defaultShouldRetry, noRetryCodes, type RetryOptions, type RetryEvent } from './retry.js';
export { RetryBudget, retryBudgetDefaults, type RetryBudgetOptions, type RetryBudgetStats } from './retry-budget.js';
export { Timeout, timeoutDefaults, type TimeoutOptions } from './timeout.js';
export { Bulkhead, bulkheadDefaults, type BulkheadOptions, type BulkheadStats } from './bulkhead.js';
export {
  Fallback,
  fallbackDefaults,
  defaultShouldFallback,
  type FallbackOptions,
  type FallbackStrategy,
  type FallbackEvent,
} from './fallback.js';
export { wrap } from './wrap.js';
export type { Wrapped, WrappedResult, GuardLike, FallbackValue } from './types.js';
export type { Guard, Task, ExecuteOptions } from '../core/guard.js';
export { AbortedError, BulkheadRejectedError, RetryBudgetExhaustedError, TimeoutError } from '../core/errors.js';
