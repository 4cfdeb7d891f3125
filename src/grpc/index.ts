/**
 * bulwark/grpc: go-zero's zrpc guards for `@grpc/grpc-js` (an optional peer dependency, `~1.14`; every
 * constructor checks the installed version and throws `UnsupportedVersionError` naming the range).
 *
 * Client side:
 * - `GrpcClientGuard`: an interceptor with a breaker per target + method (go-zero's failure codes), a
 *   default deadline, and call counts; a refusing breaker answers UNAVAILABLE locally.
 * - `GrpcDiscovery`: `bulwark:///<service>` targets resolved through a registry watch, and the `bulwark`
 *   load-balancing policy: P2C (or any balancer strategy) per attempt, a CircuitBreaker per instance,
 *   outlier ejection on consecutive failed attempts, grpc.health.v1 checks (NOT_SERVING leaves
 *   rotation), and UNAVAILABLE attempts retried on another instance within a RetryBudget per service.
 *
 * Server side:
 * - `GrpcServerGuard`: an interceptor refusing before the handler: shedder and limiter →
 *   RESOURCE_EXHAUSTED (with retry info), breaker per method → UNAVAILABLE.
 * - `GrpcHealth`: grpc.health.v1 Check and Watch; `announceGrpc()`: register, and at SIGTERM turn
 *   NOT_SERVING, deregister, then drain.
 *
 * Metrics: every guard has `stats()` and `describeMetrics()`; finished calls are published on the
 * `bulwark:grpc:call` diagnostics channel while it has subscribers.
 */
export { BreakerOpenError, OverloadedError, RateLimitedError, RetryBudgetExhaustedError, UnsupportedVersionError, ClosedError } from '../core/errors.js';
export { GrpcClientGuard, grpcClientGuardDefaults, type GrpcClientGuardOptions } from './client-guard.js';
export { GrpcServerGuard, grpcServerGuardDefaults, type GrpcServerGuardOptions, type LimitBy } from './server-guard.js';
export { GrpcDiscovery, grpcDiscoveryDefaults, SCHEME, type GrpcDiscoveryOptions, type GrpcDiscoveryStats, type GrpcInstanceStats } from './discovery.js';
export { healthCheckDefaults, type HealthCheckOptions } from './health-prober.js';
export { grpcRetryDefaults, type GrpcRetryOptions, type RetryConfig } from './retry.js';
export { GrpcHealth, healthServiceDefinition, type GrpcHealthOptions, type HealthStatus, type HealthCheckRequest, type HealthCheckResponse } from './health.js';
export { announceGrpc, grpcAnnounceDefaults, type GrpcAnnounceOptions, type GrpcAnnouncement } from './announce.js';
export { defaultFailureCodes, encodeRetryStatus, CODE_HEADER, RETRY_AFTER_HEADER } from './status.js';
export { grpcCallChannel, codeName, type GrpcCallStats, type MethodCodeStats } from './stats.js';
export { SUPPORTED_GRPC_JS, checkGrpcJsVersion } from './version.js';
export type { GrpcBreaker, GrpcBreakerSource, GrpcLimiter, GrpcShedder } from './types.js';
export type { Labels, MetricsDescription, MetricFamilySpec, MetricsSink } from '../core/metrics-description.js';
/** The other modules' types the guards and discovery take and hand out. */
export type { CircuitBreakerOptions, BreakerState } from '../breaker/types.js';
export type { OutlierOptions } from '../balancer/health/outlier.js';
export type { Picker } from '../balancer/types.js';
export type { StrategyOption } from '../balancer/strategies.js';
export type { Registry, ServiceInstance, AnnouncementStats } from '../registry/types.js';
export type { RetryBudget } from '../policy/retry-budget.js';
export type { RetryBudgetOptions, RetryBudgetStats } from '../policy/types.js';
