/**
 * bulwark/client: `ResilientClient`, which calls a service through the whole guarded-call flow of
 * docs/architecture.md — discovery (RegistryCache) → balancer pick (P2C by default, ejected instances left
 * out) → bulkhead → breaker per service and per instance → timeout → outcome fed back to the balancer
 * and breakers → retry on another instance within a retry budget → fallback — with `call(service, fn)`
 * for any transport and `fetch('http://payments/api/x')` for HTTP over per-instance undici keep-alive pools.
 */
export {
  ResilientClient,
  resilientClientDefaults,
  type ResilientClientOptions,
  type CallOptions,
  type ServiceLiveOptions,
  type ServiceLivePartial,
} from './resilient-client.js';
export { serviceStateDefaults, defaultBreakerGroup, type ServiceStateOptions, type ServiceState } from './service-state.js';
/** The other modules' types the client takes and hands out (their classes and functions are in their own modules). */
export type { Registry, RegistryCacheOptions, ServiceInstance } from '../registry/types.js';
export type { BreakerGroup } from '../breaker/breaker-group.js';
export type { Breaker } from '../breaker/types.js';
export type { Bulkhead } from '../policy/bulkhead.js';
export type { Fallback } from '../policy/fallback.js';
export type { Retry } from '../policy/retry.js';
export type { RetryBudget } from '../policy/retry-budget.js';
export type { BulkheadOptions, FallbackStrategy, RetryBudgetOptions } from '../policy/types.js';
export type { BalancerOptions } from '../balancer/types.js';
export type { WeightOverrides } from '../balancer/weight-overrides.js';
export type { FaultInjector } from '../policy/fault.js';
export type { FaultAbort, FaultDelay, FaultOptions, FaultStats } from '../policy/types.js';
export { httpPoolsDefaults } from './http-pools.js';
export { ResultFailure } from './call-run.js';
export type {
  ServiceBalancer,
  CallBreaker,
  AdmissionToken,
  AttemptOutcome,
  AttemptEvent,
  InstanceTask,
  ClientStats,
  FetchInit,
  HttpPoolsOptions,
} from './types.js';
export {
  AbortedError,
  BreakerOpenError,
  BulkheadRejectedError,
  ClosedError,
  FaultInjectedError,
  InvalidResponseError,
  NoInstanceError,
  NotFoundError,
  PeerError,
  RetryBudgetExhaustedError,
  TimeoutError,
} from '../core/errors.js';
