/**
 * The shapes bulwark/grpc shares: the metrics description its guards offer (the same structure
 * `BulwarkMetrics.track()` accepts, declared here so bulwark/grpc does not depend on bulwark/metrics),
 * and the small guard interfaces its options take.
 */
import type { AdmissionToken, LimitDecision } from '../core/admission.js';

/** MetricFamilySpec is one metric family a component exposes (the registry adds its prefix). */
export interface MetricFamilySpec {
  name: string;
  type: 'counter' | 'gauge' | 'histogram';
  help: string;
  labelNames: readonly string[];
  /** Histogram buckets, in seconds. */
  buckets?: readonly number[];
}

/** Labels are a metric's label values. */
export type Labels = Record<string, string | number>;

/** MetricsSink receives event-driven counter increments and histogram observations. */
export interface MetricsSink {
  inc(family: string, labels: Labels, by?: number): void;
  observe(family: string, labels: Labels, value: number): void;
}

/** MetricsDescription is what `describeMetrics()` answers. */
export interface MetricsDescription {
  families: readonly MetricFamilySpec[];
  collect?(emit: (family: string, labels: Labels, value: number) => void): void;
  subscribe?(sink: MetricsSink): () => void;
  snapshot?(): unknown;
}

/** GrpcBreaker is what a breaker option takes: anything with `admit()` (SreBreaker, CircuitBreaker). */
export interface GrpcBreaker {
  admit(): AdmissionToken;
}

/** GrpcBreakerSource answers the breaker of a name (a BreakerGroup is one). */
export interface GrpcBreakerSource {
  get(name: string): GrpcBreaker | undefined;
}

/** GrpcShedder is what the server's shedder option takes (an AdaptiveShedder is one). */
export interface GrpcShedder {
  admit(): AdmissionToken;
}

/**
 * GrpcLimiter is what the server's limiter option takes: a keyed synchronous limiter (a KeyedLimiter;
 * with `limitBy: 'global'` every call uses the one key `global`).
 */
export interface GrpcLimiter {
  decide(key: string): LimitDecision;
}
