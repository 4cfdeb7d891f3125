/**
 * ClientCounters: ResilientClient's plain counters (STYLE.md §16), read as a snapshot with `stats()`.
 */
import type { ClientStats } from './types.js';

export type { ClientStats } from './types.js';

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
