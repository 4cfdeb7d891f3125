/**
 * Retries on another instance of attempts that failed UNAVAILABLE before any response (the instance
 * refused the call, or its connection dropped: a killed server), bounded by a `RetryBudget` per service.
 *
 * Where the retry lives, and why there:
 * - The retrying is grpc-js's own (the `retryPolicy` of the service config our resolver hands it,
 *   retrying UNAVAILABLE only). grpc-js's retrying call already buffers the request messages, commits a
 *   call as soon as response headers or a message arrive (so nothing that got an answer is sent again),
 *   makes its transparent retries of attempts that never left the client, and, above all, runs every
 *   attempt through the load-balancing pick again: the bulwark policy sees each retry and steers it. A
 *   retrying interceptor of our own would redo all of that, for unary calls only, and could not tell the
 *   policy which instance to avoid.
 * - The bound is ours, not grpc-js's `retryThrottling`: that is a token bucket per channel refilled by
 *   successes, where bulwark bounds retries with one Finagle `RetryBudget` per downstream service, shared
 *   by every channel of the discovery (retries ≤ 20 % of calls + 10 per second by default). The policy
 *   deposits on every first attempt and withdraws on every retry attempt (grpc-js marks those with the
 *   `grpc-previous-rpc-attempts` header); a retry the budget refuses fails at once with UNAVAILABLE and
 *   `ERR_RETRY_BUDGET_EXHAUSTED`, without a channel call.
 * - A retry attempt avoids the instances whose last attempt failed within the last second (the one that
 *   just refused it among them), unless that leaves none.
 *
 * Retrying UNAVAILABLE is gRPC's convention (the code says "transient, retry with backoff"), but a call
 * whose connection dropped after the server received it may run twice: turn `retry` off for methods that
 * must not, or make them idempotent.
 */
import type { BackoffOptions } from '../core/backoff.js';
import { RetryBudgetExhaustedError } from '../core/errors.js';
import { finite, integer, options as checkOptions, type OptionKeys } from '../core/validate.js';
import { RetryBudget, type RetryBudgetOptions } from '../policy/retry-budget.js';
import { Status } from './adapter.js';
import { refusal } from './status.js';

/** The keys of GrpcRetryOptions, all of them: any other is refused (see `options`). */
const RETRY_KEYS = { maxAttempts: true, backoff: true, budget: true } as const satisfies OptionKeys<GrpcRetryOptions>;
/** The keys of GrpcDiscovery.retry.backoff's options, all of them: any other is refused (see `options`). */
const BACKOFF_KEYS = {
  initialMs: true,
  maxMs: true,
  multiplier: true,
} as const satisfies OptionKeys<Pick<BackoffOptions, 'initialMs' | 'maxMs' | 'multiplier'>>;
/** The keys of RetryBudgetOptions, all of them: any other is refused (see `options`). */
const BUDGET_KEYS = {
  windowMs: true,
  buckets: true,
  percentCanRetry: true,
  minRetriesPerSec: true,
  clock: true,
} as const satisfies OptionKeys<RetryBudgetOptions>;

/** GrpcRetryOptions configures the retries of GrpcDiscovery's channels. */
export interface GrpcRetryOptions {
  /** Attempts per call, the first included, in [2, 5] (grpc-js allows at most 5). Defaults to 3. */
  maxAttempts?: number;
  /**
   * The delay before a retry: grpc-js draws it at random below `min(initialMs × multiplier^n, maxMs)`
   * (full jitter, the only kind it has). Defaults to `{ initialMs: 10, maxMs: 100, multiplier: 2 }`.
   */
  backoff?: Pick<BackoffOptions, 'initialMs' | 'maxMs' | 'multiplier'>;
  /** The retry budget: one shared by every service, or the options of one budget per service. Defaults to `{}` (RetryBudget's defaults, per service). */
  budget?: RetryBudget | RetryBudgetOptions;
}

/** Defaults for GrpcRetryOptions. */
export const grpcRetryDefaults = Object.freeze({
  maxAttempts: 3,
  backoff: Object.freeze({ initialMs: 10, maxMs: 100, multiplier: 2 }),
});

/** The header grpc-js puts on retry attempts (gRFC A6). */
export const PREVIOUS_ATTEMPTS_HEADER = 'grpc-previous-rpc-attempts';

/** How long an instance whose attempt failed is avoided by retry attempts, in ms. */
export const AVOID_FAILED_MS = 1_000;

/** RetryConfig is a checked GrpcRetryOptions: grpc-js's method config, and the budget of each service. */
export class RetryConfig {
  /** The `methodConfig` entry (every method) grpc-js's service config takes. */
  readonly methodConfig: object;
  private readonly shared: RetryBudget | undefined;
  private readonly budgetOptions: RetryBudgetOptions;
  private readonly budgets = new Map<string, RetryBudget>();

  constructor(options: GrpcRetryOptions | undefined, clock: RetryBudgetOptions['clock']) {
    const o = checkOptions('GrpcDiscovery.retry', options, RETRY_KEYS);
    const maxAttempts = integer('GrpcDiscovery.retry', 'maxAttempts', o.maxAttempts ?? grpcRetryDefaults.maxAttempts, 2, 5);
    const b = checkOptions('GrpcDiscovery.retry.backoff', o.backoff, BACKOFF_KEYS);
    const d = grpcRetryDefaults.backoff;
    const initialMs = finite('GrpcDiscovery.retry.backoff', 'initialMs', b.initialMs ?? d.initialMs, 1, 3_600_000);
    const maxMs = finite('GrpcDiscovery.retry.backoff', 'maxMs', b.maxMs ?? Math.max(d.maxMs, initialMs), initialMs, 3_600_000);
    const multiplier = finite('GrpcDiscovery.retry.backoff', 'multiplier', b.multiplier ?? d.multiplier, 1, 100);
    if (o.budget instanceof RetryBudget) {
      this.shared = o.budget;
      this.budgetOptions = {};
    } else {
      this.budgetOptions = { clock, ...checkOptions('GrpcDiscovery.retry.budget', o.budget, BUDGET_KEYS) };
      new RetryBudget(this.budgetOptions); // throws on bad options, naming them
    }
    this.methodConfig = {
      name: [{}],
      retryPolicy: {
        maxAttempts,
        initialBackoff: seconds(initialMs),
        maxBackoff: seconds(maxMs),
        backoffMultiplier: multiplier,
        retryableStatusCodes: ['UNAVAILABLE'],
      },
    };
  }

  /** budget answers the retry budget of `service` (made on first use). */
  budget(service: string): RetryBudget {
    if (this.shared !== undefined) return this.shared;
    let b = this.budgets.get(service);
    if (b === undefined) this.budgets.set(service, (b = new RetryBudget(this.budgetOptions)));
    return b;
  }
}

/** seconds writes milliseconds as a protobuf JSON duration (`"0.010000s"`). */
function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(6)}s`;
}

/** budgetRefusal is the status of a retry attempt the budget refused. */
export function budgetRefusal(service: string) {
  return refusal(
    Status.UNAVAILABLE,
    RetryBudgetExhaustedError.code,
    `bulwark:///${service}: an attempt failed UNAVAILABLE and the retry budget of the service is spent`,
  );
}
