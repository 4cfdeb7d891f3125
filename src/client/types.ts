/**
 * The shapes of bulwark/client: the narrow seams ResilientClient drives, so that it can be tested with
 * small fakes and so that a team can bring its own strategy or breaker (a per-service balancer: pick /
 * report / close; a breaker: admit → core's AdmissionToken), and the shapes of its tasks, attempts,
 * stats and HTTP options.
 */
import type { AdmissionToken } from '../core/admission.js';
import type { Fallback, FallbackStrategy } from '../policy/fallback.js';
import type { ServiceInstance } from '../registry/types.js';

export type { AdmissionToken } from '../core/admission.js';

/** AttemptOutcome is what one finished attempt tells the balancer. */
export interface AttemptOutcome {
  /** The attempt succeeded (for HTTP: anything but a 5xx or a network error). */
  readonly ok: boolean;
  /** How long it took, in milliseconds. */
  readonly latencyMs: number;
  /** When it ended, read from the client's clock, when the balancer runs on that clock (else undefined): see `CallOutcome.at`. */
  readonly at?: number | undefined;
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

/** InstanceTask is the work of one attempt: call `instance`, honouring `signal`. */
export type InstanceTask<T> = (instance: ServiceInstance, signal: AbortSignal) => T | PromiseLike<T>;

/** AttemptEvent describes one finished (or refused) attempt, for live views and metrics. */
export interface AttemptEvent {
  readonly service: string;
  /** The instance tried. */
  readonly instance: ServiceInstance;
  /** `ok`, `error` (the call failed), or `rejected` (its breaker refused it: the instance was not called). */
  readonly outcome: 'ok' | 'error' | 'rejected';
  /** How long the attempt took in ms (0 when rejected). */
  readonly latencyMs: number;
  /** The failure, when `outcome` is not `ok`. */
  readonly error?: unknown;
}

/**
 * ClientMeasure receives each attempt's and each call's duration as plain arguments, with no event
 * object built (see `ResilientClient.measure`). bulwark/metrics feeds its histograms from it. Not exported
 * from bulwark/client, but declared (not marked internal): the call state's published declaration names it.
 */
export interface ClientMeasure {
  /**
   * answered is handed the durations of answered calls (an attempt answered a value, which ended its
   * call as succeeded), in batches, in call order: `durations` holds `[attempt ms, call ms]` per call
   * (the call's from its first attempt's start), its first `n` numbers noted. The client notes them as
   * calls answer and hands them over when a batch is full, before an `attempt` of the same service,
   * when its measures change, and when the metrics read them (see `AnsweredBatch`). `durations` is the
   * client's: read it during the call, do not keep it.
   */
  answered(service: string, durations: Float64Array, n: number): void;
  /** attempt is called when an attempt that ran ends without a value (failed, or its error did not count), with its duration in ms. */
  attempt(service: string, failed: boolean, latencyMs: number): void;
  /**
   * call is called when a call ends without an attempt's value: answered by its fallback, or failed;
   * its duration in ms from its first attempt's start (0 when none ran) to the fallback's answer or the failure.
   */
  call(service: string, outcome: 'fallback' | 'failed', durationMs: number): void;
}

/** ClientStats is a snapshot of a ResilientClient's counters since it was made. */
export interface ClientStats {
  /** Calls made (`call` and `fetch`), each counted once however many attempts it took. */
  calls: number;
  /** Calls that answered a value from an instance. */
  succeeded: number;
  /** Calls that answered from their fallback instead. */
  fallbacks: number;
  /** Calls that failed: the caller got an error. */
  failed: number;
  /** Attempts sent to an instance (first tries and retries). */
  attempts: number;
  /** Of those, attempts that failed (errors, timeouts, HTTP 5xx). */
  failedAttempts: number;
  /** Retries sent (attempts after the first). */
  retries: number;
  /** Retries the retry budget refused. */
  retriesRefused: number;
  /** Attempts a breaker (the service's, or the picked instance's) refused without calling the instance. */
  breakerRejections: number;
  /** Calls the bulkhead refused because the service had too many in flight. */
  bulkheadRejections: number;
}

/** FetchInit is `fetch`'s init, with the client's per-call options. */
export interface FetchInit {
  /** The HTTP method. Defaults to 'GET'. */
  method?: string;
  /** Request headers. Defaults to none. */
  headers?: Record<string, string> | ReadonlyArray<readonly [string, string]>;
  /** The request body: a string or bytes (a stream cannot be sent twice, so it is not accepted). Defaults to none. */
  body?: string | Uint8Array | null;
  /** Aborts the call. Defaults to none. */
  signal?: AbortSignal;
  /** Routing key for affinity strategies (ring hash). Defaults to none. */
  key?: string;
  /** Deadline of each attempt in ms, body included; 0 for none. Defaults to the client's `timeoutMs`. */
  timeoutMs?: number;
  /** Retry on another instance: true / false / `{ maxAttempts }`. Defaults to true for idempotent methods, false for others. */
  retry?: boolean | { maxAttempts?: number };
  /** Answers when the call fails in the end (5xx, network error, open breakers …). Defaults to none. */
  fallback?: FallbackStrategy<Response> | Fallback<Response>;
}

/** HttpPoolsOptions configures the per-instance connection pools of `fetch`. */
export interface HttpPoolsOptions {
  /** Most connections per instance. Defaults to 64. */
  connectionsPerInstance?: number;
  /** Idle keep-alive sockets are closed after this many milliseconds. Defaults to 4 000 (undici's). */
  keepAliveTimeoutMs?: number;
  /** Most pools kept open at once; the least recently used is closed beyond it. Defaults to 1 024. */
  maxPools?: number;
  /** Timeout for establishing a connection, in milliseconds. Defaults to 10 000. */
  connectTimeoutMs?: number;
}
