/** The small guard interfaces bulwark/grpc's options take. */
import type { AdmissionToken, LimitDecision } from '../core/admission.js';

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
