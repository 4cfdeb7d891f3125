/**
 * Fallback answers in place of a failed call (graceful degradation): a strategy that is worse than the
 * real answer but better than an error. The strategies, in the order they are tried:
 *
 * 1. the last good value (the "cache" fallback), optionally only while younger than `maxAgeMs`;
 * 2. each strategy of `chain` in turn (a degraded service, a cache lookup …); a strategy throws or
 *    rejects to pass to the next one;
 * 3. the default `value`.
 *
 * When nothing answers, the call's original error is rethrown (callers still branch on its code).
 * Which errors fall back is decided by `shouldFallback`; by default every error does except the caller's
 * own cancellation (`AbortedError`, or any error once the caller's signal is aborted): a caller who gave
 * up wants no answer.
 *
 * A fallback's dependencies must not share the fate of the main path: a fallback cache on the machine
 * that died with the service answers nothing.
 */
import { systemClock, type Clock } from '../core/clock.js';
import { AbortedError } from '../core/errors.js';
import { Emitter, type Disposer, type Listener } from '../core/events.js';
import { neverAborted, type ExecuteOptions, type Task } from '../core/guard.js';
import { clockOption, fn as fnOption, finite, options as optionsObject, showValue, type OptionKeys } from '../core/validate.js';
import { checkCall } from './check-call.js';
import type { FallbackOptions, FallbackEvent, FallbackStrategy } from './types.js';
import type { MetricsDescription } from '../core/metrics-description.js';

/** The keys of FallbackOptions, all of them: any other is refused (see `options`). */
const FALLBACK_KEYS = {
  value: true,
  lastGood: true,
  chain: true,
  shouldFallback: true,
  clock: true,
} as const satisfies OptionKeys<FallbackOptions<unknown>>;

export type { FallbackOptions, FallbackEvent, FallbackStrategy } from './types.js';

/** Defaults for FallbackOptions. */
export const fallbackDefaults = Object.freeze({ lastGood: false, maxAgeMs: Infinity });

/** defaultShouldFallback falls back on every error except the caller's cancellation (`AbortedError`). */
export function defaultShouldFallback(err: unknown): boolean {
  return !(err instanceof AbortedError);
}

/**
 * Fallback answers a replacement value of type `R` when the call fails. It has the Guard shape for tasks
 * whose results are `R`s (`execute<T extends R>`): the last good value it may answer is an earlier
 * task's result, so every task it guards must answer the type it answers. For a default of another
 * type, say so in `R`: `new Fallback<Profile | null>({ value: null })`.
 */
export class Fallback<R = unknown> {
  private readonly hasValue: boolean;
  private readonly value: R | undefined;
  private readonly keepLastGood: boolean;
  private readonly maxAgeMs: number;
  private readonly chain: readonly FallbackStrategy<R>[];
  private readonly shouldFallback: (err: unknown) => boolean;
  private readonly clock: Clock;
  private readonly events = new Emitter<FallbackEvent>();
  private hasLastGood = false;
  private lastGood: R | undefined;
  private lastGoodAt = 0;

  constructor(options?: FallbackOptions<R>) {
    const o = optionsObject('Fallback', options, FALLBACK_KEYS);
    this.hasValue = 'value' in o;
    this.value = o.value;
    const lg = o.lastGood ?? fallbackDefaults.lastGood;
    if (typeof lg === 'boolean') {
      this.keepLastGood = lg;
      this.maxAgeMs = Infinity;
    } else if (lg !== null && typeof lg === 'object') {
      this.keepLastGood = true;
      this.maxAgeMs = lg.maxAgeMs === undefined ? Infinity : maxAge(lg.maxAgeMs);
    } else {
      throw new TypeError(`Fallback: lastGood must be a boolean or { maxAgeMs }, got ${showValue(lg)}`);
    }
    const chain = o.chain ?? [];
    if (!Array.isArray(chain)) throw new TypeError(`Fallback: chain must be an array of functions, got ${showValue(chain)}`);
    chain.forEach((s, i) => fnOption('Fallback', `chain[${i}]`, s));
    this.chain = [...chain];
    this.shouldFallback = o.shouldFallback === undefined ? defaultShouldFallback : fnOption('Fallback', 'shouldFallback', o.shouldFallback);
    this.clock = clockOption('Fallback', o.clock, systemClock);
  }

  /** describeMetrics answers the policy's family (`fallback_calls_total` by source), counted from its fallback events. */
  describeMetrics(): MetricsDescription {
    return {
      kind: 'Fallback',
      families: [
        {
          name: 'fallback_calls_total',
          type: 'counter',
          help: 'Failed calls a Fallback handled, by what answered: last_good, chain, value or none (rethrown).',
          labelNames: ['source'],
        },
      ],
      subscribe: (sink) => this.onFallback((e) => sink.inc('fallback_calls_total', { source: String(e.source).replace('-', '_') })),
      snapshot: () => ({}),
    };
  }

  /** onFallback subscribes to calls that fell back; returns the disposer. */
  onFallback(listener: Listener<FallbackEvent>): Disposer {
    return this.events.on(listener);
  }

  /** lastGoodValue is the remembered last good result (regardless of age), or undefined. */
  get lastGoodValue(): R | undefined {
    return this.lastGood;
  }

  /**
   * execute runs `fn`; when it fails with an error `shouldFallback` accepts, answers the last good
   * value, the first chain strategy that answers, or the default value — else rethrows the error.
   */
  execute<T extends R>(fn: Task<T>, options?: ExecuteOptions): Promise<T | R> {
    const bad = checkCall('Fallback', fn, options);
    if (bad !== undefined) return Promise.reject(bad);
    const given = options?.signal;
    const signal = given === neverAborted ? undefined : given; // it never aborts: nothing to watch
    let result: T | PromiseLike<T>;
    try {
      result = fn(signal ?? neverAborted);
    } catch (err) {
      return this.recover(err, signal);
    }
    if (result === null || typeof (result as PromiseLike<T>)?.then !== 'function') {
      if (this.keepLastGood) this.remember(result as T);
      return Promise.resolve(result as T);
    }
    const p: Promise<R> = Promise.resolve(result);
    const ok = this.keepLastGood ? this.rememberValue : undefined;
    const onErr = signal === undefined ? this.recoverNoSignal : (err: unknown) => this.recover(err, signal);
    return p.then(ok, onErr);
  }

  /**
   * rememberValue keeps a result and passes it on. Typed as a method (checked bivariantly), so that a
   * Fallback<R> still widens to Fallback<unknown>, which is how `wrap` holds it.
   */
  private readonly rememberValue: { method(value: R): R }['method'] = (value) => {
    this.remember(value);
    return value;
  };

  private readonly recoverNoSignal = (err: unknown): Promise<R> => this.recover(err, undefined);

  private remember(value: R): void {
    this.hasLastGood = true;
    this.lastGood = value;
    if (this.maxAgeMs !== Infinity) this.lastGoodAt = this.clock.now();
  }

  private async recover(err: unknown, signal: AbortSignal | undefined): Promise<R> {
    if (signal?.aborted || !this.shouldFallback(err)) throw err;
    if (this.hasLastGood && (this.maxAgeMs === Infinity || this.clock.now() - this.lastGoodAt <= this.maxAgeMs)) {
      this.emit(err, 'last-good');
      return this.lastGood as R;
    }
    for (let i = 0; i < this.chain.length; i++) {
      if (signal?.aborted) break;
      try {
        const value = await untilAborted(this.chain[i]!(err, signal ?? neverAborted), signal);
        this.emit(err, 'chain', i);
        return value;
      } catch {
        // this strategy could not answer (or the caller left while it tried): try the next one
      }
    }
    if (this.hasValue && !signal?.aborted) {
      this.emit(err, 'value');
      return this.value as R;
    }
    this.emit(err, 'none');
    throw err;
  }

  private emit(error: unknown, source: FallbackEvent['source'], index?: number): void {
    if (!this.events.hasListeners) return;
    this.events.emit(index === undefined ? { error, source } : { error, source, index });
  }
}

/**
 * untilAborted settles with `value`, or rejects with `AbortedError` as soon as `signal` aborts, so that a
 * strategy that never answers cannot hold a caller who has given up.
 */
function untilAborted<R>(value: R | PromiseLike<R>, signal: AbortSignal | undefined): R | PromiseLike<R> {
  if (signal === undefined || value === null || typeof (value as PromiseLike<R>)?.then !== 'function') return value;
  return new Promise<R>((resolve, reject) => {
    const onAbort = () => reject(new AbortedError('fallback: aborted by caller', { cause: signal.reason }));
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    (value as PromiseLike<R>).then(
      (v) => (signal.removeEventListener('abort', onAbort), resolve(v)),
      (e: unknown) => (signal.removeEventListener('abort', onAbort), reject(e)),
    );
  });
}

function maxAge(value: unknown): number {
  if (value === Infinity) return Infinity;
  return finite('Fallback', 'lastGood.maxAgeMs', value, 0);
}
