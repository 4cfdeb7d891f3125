/**
 * Retry runs a task again when it fails with a retryable error: up to `maxAttempts` attempts, waiting a
 * jittered exponential backoff between them, giving up at once when the caller's signal aborts, and
 * asking a shared `RetryBudget` before every retry so that retries can never multiply a failing
 * downstream's load (a retry storm: every caller retrying against a failing downstream multiplies its load).
 *
 * What is not retried by default (`defaultShouldRetry`): errors that mean "trying again now cannot help
 * or will hurt" — the caller gave up (`AbortedError`, or any error once the caller's signal is aborted),
 * a breaker refused (`BreakerOpenError`: it refused to protect the downstream; retrying the same breaker
 * spins and spends budget), local overload (`BulkheadRejectedError`, `RateLimitedError`,
 * `OverloadedError`: retrying adds the very load that was shed), an inner retry already gave up
 * (`RetryBudgetExhaustedError`: nested retries multiply), and `ClosedError`. Everything else, including
 * `TimeoutError` and plain errors, is retried.
 *
 * `reconfigure({ maxAttempts, backoff })` changes it live for the calls that fail from then on (a call
 * already waiting out a backoff keeps its wait); `shouldRetry`, `budget` and `clock` are fixed at
 * construction (reconfigure the budget itself).
 */
import { delay } from '../core/abort.js';
import { Backoff, type BackoffOptions } from '../core/backoff.js';
import { systemClock, type Clock } from '../core/clock.js';
import {
  AbortedError,
  BreakerOpenError,
  BulkheadRejectedError,
  BulwarkError,
  ClosedError,
  OverloadedError,
  RateLimitedError,
  RetryBudgetExhaustedError,
  withoutStack,
} from '../core/errors.js';
import { Emitter, type Disposer, type Listener } from '../core/events.js';
import { neverAborted, type ExecuteOptions, type Guard, type Task } from '../core/guard.js';
import { clockOption, fn as fnOption, integer, liveOptions, options as optionsObject, showValue, within, type OptionKeys } from '../core/validate.js';
import type { Reconfigurable } from '../core/reconfigurable.js';
import { RetryBudget } from './retry-budget.js';
import { checkCall } from './check-call.js';
import type { RetryOptions, RetryEvent } from './types.js';
import type { MetricsDescription } from '../core/metrics-description.js';

/** The keys of RetryOptions, all of them: any other is refused (see `options`). */
const RETRY_KEYS = {
  maxAttempts: true,
  backoff: true,
  shouldRetry: true,
  budget: true,
  clock: true,
} as const satisfies OptionKeys<RetryOptions>;

/** RetryLiveOptions are the options `Retry.reconfigure` changes and `options()` answers. */
export type RetryLiveOptions = Pick<RetryOptions, 'maxAttempts' | 'backoff'>;

export type { RetryOptions, RetryEvent } from './types.js';

/** noRetryCodes lists the codes of the errors `defaultShouldRetry` never retries. */
export const noRetryCodes: ReadonlySet<string> = new Set([
  AbortedError.code,
  BreakerOpenError.code,
  BulkheadRejectedError.code,
  RateLimitedError.code,
  OverloadedError.code,
  RetryBudgetExhaustedError.code,
  ClosedError.code,
]);

/** defaultShouldRetry retries every error except the coded ones in `noRetryCodes`. */
export function defaultShouldRetry(err: unknown): boolean {
  return !(err instanceof BulwarkError && noRetryCodes.has(err.code));
}

/** Defaults for RetryOptions. */
export const retryDefaults = Object.freeze({ maxAttempts: 3 });

/** Retry is a Guard that runs a task again on retryable failures. */
export class Retry implements Guard, Reconfigurable<RetryLiveOptions> {
  readonly maxAttempts: number;
  readonly budget: RetryBudget | undefined;
  private backoffOptions: BackoffOptions;
  private readonly shouldRetry: (err: unknown, attempt: number) => boolean;
  private readonly retryEvents = new Emitter<RetryEvent>();
  private readonly delayOptions: { clock: Clock };

  constructor(options?: RetryOptions) {
    const o = optionsObject('Retry', options, RETRY_KEYS);
    this.maxAttempts = integer('Retry', 'maxAttempts', o.maxAttempts ?? retryDefaults.maxAttempts, 1, 1_000);
    this.backoffOptions = checkBackoff(o.backoff);
    this.shouldRetry = o.shouldRetry === undefined ? defaultShouldRetry : fnOption('Retry', 'shouldRetry', o.shouldRetry);
    if (o.budget !== undefined && !(o.budget instanceof RetryBudget)) {
      throw new TypeError(`Retry: budget must be a RetryBudget, got ${showValue(o.budget)}`);
    }
    this.budget = o.budget;
    this.delayOptions = { clock: clockOption('Retry', o.clock, systemClock) };
  }

  /** options answers the options this policy runs now: those `reconfigure` may change, the backoff in full (its `random` left out). */
  options(): Required<RetryLiveOptions> {
    const b = within('Retry', 'backoff', 'Backoff', () => new Backoff(this.backoffOptions));
    return { maxAttempts: this.maxAttempts, backoff: { initialMs: b.initialMs, maxMs: b.maxMs, multiplier: b.multiplier, jitter: b.jitter } };
  }

  /**
   * reconfigure sets `maxAttempts` and `backoff` (laid over the backoff it runs: `{ backoff: { maxMs } }`
   * changes that key only; `backoff: undefined` goes back to the defaults), validated as the constructor validates them (the same errors; `shouldRetry`, `budget`,
   * `clock` and `backoff.random` refused: fixed at construction), both or, when it throws, neither. Calls
   * that fail from then on use them; a call already waiting keeps its wait.
   */
  reconfigure(partial: Partial<RetryLiveOptions>): void {
    const p = liveOptions('Retry', partial as RetryOptions, RETRY_KEYS, ['shouldRetry', 'budget', 'clock']);
    const maxAttempts = integer('Retry', 'maxAttempts', p.maxAttempts ?? this.maxAttempts, 1, 1_000);
    let backoffOptions = this.backoffOptions;
    if (Object.hasOwn(p, 'backoff')) {
      if (p.backoff !== null && typeof p.backoff === 'object' && Object.hasOwn(p.backoff, 'random')) {
        throw new TypeError('Retry: backoff.random cannot change on a running Retry; it is set at construction only');
      }
      const random = this.backoffOptions.random;
      if (p.backoff !== undefined) checkBackoff(p.backoff); // not an object: the constructor's error
      const laid = p.backoff === undefined ? {} : { ...this.options().backoff, ...p.backoff };
      backoffOptions = checkBackoff({ ...laid, ...(random === undefined ? {} : { random }) });
    }
    (this as { maxAttempts: number }).maxAttempts = maxAttempts;
    this.backoffOptions = backoffOptions;
  }

  /** describeMetrics answers the policy's family (`retry_retries_total`), counted from its retry events. */
  describeMetrics(): MetricsDescription {
    return {
      kind: 'Retry',
      families: [{ name: 'retry_retries_total', type: 'counter', help: 'Retries a Retry policy scheduled after a failed attempt.', labelNames: [] }],
      subscribe: (sink) => this.onRetry(() => sink.inc('retry_retries_total', {})),
      snapshot: () => ({ maxAttempts: this.maxAttempts }),
    };
  }

  /** onRetry subscribes to retries (one event before each wait); returns the disposer. */
  onRetry(listener: Listener<RetryEvent>): Disposer {
    return this.retryEvents.on(listener);
  }

  /**
   * execute runs `fn`, and again after a backoff while it fails with a retryable error, attempts are left
   * and the budget allows. It rejects with the last failure; with `RetryBudgetExhaustedError` (cause:
   * the last failure) when the budget refused; with `AbortedError` when `signal` aborts during a wait.
   */
  execute<T>(fn: Task<T>, options?: ExecuteOptions): Promise<T> {
    const bad = checkCall('Retry', fn, options);
    if (bad !== undefined) return Promise.reject(bad);
    const signal = options?.signal;
    if (signal?.aborted) return Promise.reject(new AbortedError('retry aborted', { cause: signal.reason }));
    this.budget?.recordCall();
    // The first attempt runs without an async frame: on success it costs one `then`, nothing more.
    let result: T | PromiseLike<T>;
    try {
      result = fn(signal ?? neverAborted);
    } catch (err) {
      return this.retryAfter(err, fn, signal);
    }
    if (result === null || typeof (result as PromiseLike<T>)?.then !== 'function') return Promise.resolve(result as T);
    return Promise.resolve(result).then(undefined, (err: unknown) => this.retryAfter(err, fn, signal));
  }

  /**
   * retryAfter runs attempts 2… after attempt 1 failed with `firstError`, as `execute` does (the call
   * counted in the budget already): for a caller that ran the first attempt itself (ResilientClient's
   * call, on its own promise). @internal
   */
  async retryAfter<T>(firstError: unknown, fn: Task<T>, signal: AbortSignal | undefined): Promise<T> {
    const taskSignal = signal ?? neverAborted;
    const backoff = new Backoff(this.backoffOptions);
    let err = firstError;
    for (let attempt = 1; ; attempt++) {
      if (attempt >= this.maxAttempts || signal?.aborted || !this.shouldRetry(err, attempt)) throw err;
      if (this.budget !== undefined && !this.budget.allowRetry()) {
        // Stackless: in a storm every refusal builds one, and `cause` keeps the failure's own stack.
        const cause = err;
        throw withoutStack(() => new RetryBudgetExhaustedError(`retry budget exhausted after attempt ${attempt}`, { cause }));
      }
      const delayMs = backoff.next();
      if (this.retryEvents.hasListeners) this.retryEvents.emit({ attempt, error: err, delayMs });
      if (delayMs > 0) await delay(delayMs, signal, this.delayOptions);
      try {
        return await fn(taskSignal);
      } catch (next) {
        err = next;
      }
    }
  }
}

/** checkBackoff validates Retry's `backoff` option now (not at the first failure) and answers a copy. */
function checkBackoff(backoff: unknown): BackoffOptions {
  if (backoff !== undefined && (backoff === null || typeof backoff !== 'object')) {
    throw new TypeError(`Retry: backoff must be a BackoffOptions object, got ${showValue(backoff)}`);
  }
  const copy: BackoffOptions = { ...(backoff as BackoffOptions | undefined) };
  within('Retry', 'backoff', 'Backoff', () => new Backoff(copy));
  return copy;
}
