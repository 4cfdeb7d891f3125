/**
 * ClientCounters: ResilientClient's plain counters (STYLE.md §16), read as a snapshot with `stats`.
 */

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

/** ClientCounters holds the live counters; `snapshot` copies them. */
export class ClientCounters implements ClientStats {
  calls = 0;
  succeeded = 0;
  fallbacks = 0;
  failed = 0;
  attempts = 0;
  failedAttempts = 0;
  retries = 0;
  retriesRefused = 0;
  breakerRejections = 0;
  bulkheadRejections = 0;

  /** snapshot returns a copy of the counters. */
  snapshot(): ClientStats {
    return {
      calls: this.calls,
      succeeded: this.succeeded,
      fallbacks: this.fallbacks,
      failed: this.failed,
      attempts: this.attempts,
      failedAttempts: this.failedAttempts,
      retries: this.retries,
      retriesRefused: this.retriesRefused,
      breakerRejections: this.breakerRejections,
      bulkheadRejections: this.bulkheadRejections,
    };
  }
}
