/**
 * The narrow seams ResilientClient drives, so that it can be tested with small fakes and so that a
 * team can bring its own strategy or breaker: a per-service balancer (pick / report / close) and a
 * breaker (admit → core's AdmissionToken).
 */
import type { AdmissionToken } from '../core/admission.js';
import type { ServiceInstance } from '../registry/types.js';

export type { AdmissionToken } from '../core/admission.js';

/** AttemptOutcome is what one finished attempt tells the balancer. */
export interface AttemptOutcome {
  /** The attempt succeeded (for HTTP: anything but a 5xx or a network error). */
  readonly ok: boolean;
  /** How long it took, in milliseconds. */
  readonly latencyMs: number;
}

/**
 * ServiceBalancer chooses instances of one service. `pick` answers from memory (throwing
 * `NoInstanceError` when there is nothing to pick); every pick is followed by exactly one `report`,
 * which feeds latency, in-flight counts and passive health.
 */
export interface ServiceBalancer {
  /** pick chooses an instance, avoiding those `exclude` has while any other is available. */
  pick(key?: string, exclude?: { has(id: string): boolean }): ServiceInstance;
  report(instance: ServiceInstance, outcome: AttemptOutcome): void;
  /**
   * release ends a pick whose call was never made (its breaker refused it, or it failed before the
   * call), teaching latency and health nothing. Optional: without it, a pick refused by its breaker is
   * reported as a 0 ms failure, any other unmade pick as a 0 ms success.
   */
  release?(instance: ServiceInstance): void;
  /** ejected tells whether health checks have taken `instance` out of rotation. Optional. */
  isEjected?(instance: ServiceInstance): boolean;
  close(): Promise<void>;
}

/** CallBreaker admits a call (returning its token) or throws `BreakerOpenError`. */
export interface CallBreaker {
  admit(): AdmissionToken;
}
