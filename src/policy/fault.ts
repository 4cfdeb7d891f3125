/**
 * FaultInjector delays and fails calls on purpose, to rehearse an outage and watch the guards and
 * fallbacks react: Envoy's and Istio's HTTP fault injection. Each call is delayed with probability
 * `delay.percent` % (by `delay.ms`), then, delayed or not, failed with probability `abort.percent` %
 * with a FaultInjectedError (`status`, message `error`) without running; the others run as usual.
 * The two draws are independent, and the delay comes first, as in Envoy.
 *
 * A fault always ends by itself: `ttlMs` (default 10 min, at most 24 h) after it was configured or
 * reconfigured, a timer on `clock` expires it, and from then on calls pass straight through (stats say
 * `expired`) until a `reconfigure` starts it again. A forgotten rehearsal cannot outlive its ttl.
 *
 * Where it sits: innermost, around the call itself (what Envoy's fault filter does to a request before
 * it leaves the caller), so that everything outside sees the injected delays and failures as the
 * dependency's own — a timeout fires during a delay longer than it, a breaker counts the failures,
 * `Retry` retries them (FaultInjectedError is retryable by default), a fallback answers. A
 * ResilientClient injects per attempt, under its per-attempt timeout; an HttpGuard per request, after
 * its own admission.
 *
 * `reconfigure(partial)` (core's Reconfigurable) lays `partial` over the options it runs now (a key
 * present as `undefined` removes a delay or abort), validates the result as the constructor does, and
 * applies it whole; it keeps the counters and starts the ttl again. `clock` and `random` cannot change.
 */
import { delay as wait } from '../core/abort.js';
import { MAX_TIMER_MS, systemClock, type Clock, type TimerHandle } from '../core/clock.js';
import { ClosedError, FaultInjectedError } from '../core/errors.js';
import { neverAborted, type ExecuteOptions, type Guard, type Task } from '../core/guard.js';
import type { MetricsDescription } from '../core/metrics-description.js';
import type { Reconfigurable } from '../core/reconfigurable.js';
import { clockOption, finite, fn, integer, options as optionsObject, showValue, type OptionKeys } from '../core/validate.js';
import { checkCall } from './check-call.js';
import type { FaultAbort, FaultDelay, FaultOptions, FaultStats } from './types.js';

export type { FaultAbort, FaultDelay, FaultOptions, FaultStats } from './types.js';

/** The keys of FaultOptions, all of them: any other is refused (see `options`). */
const FAULT_KEYS = { delay: true, abort: true, ttlMs: true, clock: true, random: true } as const satisfies OptionKeys<FaultOptions>;
const FAULT_DELAY_KEYS = { ms: true, percent: true } as const satisfies OptionKeys<FaultDelay>;
const FAULT_ABORT_KEYS = { percent: true, status: true, error: true } as const satisfies OptionKeys<FaultAbort>;

/** The longest ttlMs: a day (issue 27: a fault rule must end by itself within 24 h). */
const MAX_TTL_MS = 86_400_000;

/** Defaults for FaultOptions (and an abort's status and message). */
export const faultDefaults = Object.freeze({ ttlMs: 600_000, status: 503, error: 'fault injected' });

/** runTask runs a Task (what `execute` hands `run`: no closure per call). */
function runTask<T>(task: Task<T>, signal: AbortSignal): T | PromiseLike<T> {
  return task(signal);
}

/** FaultSettings are checked FaultOptions, without clock and random. */
interface FaultSettings {
  readonly delay: Readonly<FaultDelay> | undefined;
  readonly abort: Readonly<Required<FaultAbort>> | undefined;
  readonly ttlMs: number;
}

/** checkFault validates the reconfigurable part of FaultOptions as `owner` (the constructor's checks). */
function checkFault(owner: string, o: Partial<FaultOptions>): FaultSettings {
  let delay: FaultDelay | undefined;
  if (o.delay !== undefined) {
    const d = optionsObject(`${owner}: delay`, o.delay, FAULT_DELAY_KEYS);
    delay = Object.freeze({
      ms: finite(owner, 'delay.ms', d.ms, 0, MAX_TIMER_MS),
      percent: finite(owner, 'delay.percent', d.percent, 0, 100),
    });
  }
  let abort: Required<FaultAbort> | undefined;
  if (o.abort !== undefined) {
    const a = optionsObject(`${owner}: abort`, o.abort, FAULT_ABORT_KEYS);
    if (a.error !== undefined && typeof a.error !== 'string') throw new TypeError(`${owner}: abort.error must be a string, got ${showValue(a.error)}`);
    abort = Object.freeze({
      percent: finite(owner, 'abort.percent', a.percent, 0, 100),
      status: integer(owner, 'abort.status', a.status ?? faultDefaults.status, 200, 599),
      error: a.error ?? faultDefaults.error,
    });
  }
  return { delay, abort, ttlMs: finite(owner, 'ttlMs', o.ttlMs ?? faultDefaults.ttlMs, 1, MAX_TTL_MS) };
}

/** FaultInjector is a Guard that delays and fails calls on purpose until its ttl ends (see the module comment). */
export class FaultInjector implements Guard, Reconfigurable<FaultOptions> {
  private readonly clock: Clock;
  private readonly random: () => number;
  private settings: FaultSettings;
  /** Delay and abort chances as fractions of 1 (0 when none), read per call. */
  private delayP = 0;
  private abortP = 0;
  private expiresAt = 0;
  private timer: TimerHandle | undefined;
  private expired = false;
  private closed = false;
  private calls = 0;
  private delayed = 0;
  private aborted = 0;

  constructor(options?: FaultOptions) {
    const o = optionsObject('FaultInjector', options, FAULT_KEYS);
    this.clock = clockOption('FaultInjector', o.clock, systemClock);
    this.random = o.random === undefined ? Math.random : fn<() => number>('FaultInjector', 'random', o.random);
    this.settings = checkFault('FaultInjector', o);
    this.start();
  }

  /**
   * active is true while the fault applies: not expired, not closed, and some delay or abort has a
   * chance above 0. A caller may skip the injector while it is false: calls would pass straight through.
   */
  get active(): boolean {
    return !this.expired && !this.closed && (this.delayP > 0 || this.abortP > 0);
  }

  /**
   * execute runs `fn` after the injected delay (when drawn), or fails with FaultInjectedError (when
   * drawn) without running it; expired, it runs `fn` straight away. `signal` aborts the delay: the call
   * rejects with AbortedError and `fn` does not run. Rejects with ClosedError after `close()`.
   */
  execute<T>(task: Task<T>, options?: ExecuteOptions): Promise<T> {
    const bad = checkCall('FaultInjector', task, options);
    if (bad !== undefined) return Promise.reject(bad);
    if (this.closed) return Promise.reject(new ClosedError('FaultInjector is closed'));
    const signal = options?.signal ?? neverAborted;
    try {
      return Promise.resolve(this.run(runTask, task, signal));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * run is `execute` of `fn(arg, signal)` for callers that take a plain value or a promise
   * (ResilientClient's attempts): no promise or closure is made for a call that passes straight
   * through, and a drawn abort throws synchronously. @internal
   */
  run<A, T>(fn: (arg: A, signal: AbortSignal) => T | PromiseLike<T>, arg: A, signal: AbortSignal): T | PromiseLike<T> {
    if (this.expired || this.closed) return fn(arg, signal);
    const ms = this.drawDelay();
    if (ms >= 0) return this.wait(ms, signal).then(() => this.afterDelay(fn, arg, signal));
    return this.afterDelay(fn, arg, signal);
  }

  /** afterDelay draws the abort, else runs the call. */
  private afterDelay<A, T>(fn: (arg: A, signal: AbortSignal) => T | PromiseLike<T>, arg: A, signal: AbortSignal): T | PromiseLike<T> {
    const err = this.drawAbort();
    if (err !== undefined) throw err;
    return fn(arg, signal);
  }

  /**
   * drawDelay counts one call of an active fault and draws its delay: the ms to wait, or −1 for none.
   * With `drawAbort` and `wait`, the steps of `run` for a caller that answers by itself (HttpGuard).
   * @internal
   */
  drawDelay(): number {
    this.calls++;
    if (this.delayP > 0 && this.random() < this.delayP) {
      this.delayed++;
      return this.settings.delay!.ms;
    }
    return -1;
  }

  /** drawAbort draws the abort of a call `drawDelay` counted: the error to fail it with, or undefined. @internal */
  drawAbort(): FaultInjectedError | undefined {
    if (this.abortP > 0 && this.random() < this.abortP) {
      this.aborted++;
      const a = this.settings.abort!;
      return new FaultInjectedError(a.error, { status: a.status });
    }
    return undefined;
  }

  /** wait resolves after `ms` of the injector's clock, or rejects with AbortedError when `signal` aborts first. @internal */
  wait(ms: number, signal: AbortSignal): Promise<void> {
    return wait(ms, signal === neverAborted ? undefined : signal, { clock: this.clock });
  }

  /**
   * reconfigure lays `partial` over the options it runs now (`delay: undefined` / `abort: undefined`
   * remove them), validates the result as the constructor does and applies all of it, or throws and
   * changes nothing; the counters stay, the ttl starts again (an expired fault applies again). `clock`
   * and `random` cannot change (TypeError).
   */
  reconfigure(partial: Partial<FaultOptions>): void {
    const p = optionsObject('FaultInjector', partial, FAULT_KEYS);
    for (const key of ['clock', 'random'] as const) {
      if (Object.hasOwn(p, key)) throw new TypeError(`FaultInjector: ${key} cannot change on a running FaultInjector`);
    }
    const next = checkFault('FaultInjector', { ...this.options(), ...p });
    if (this.closed) return;
    this.settings = next;
    this.start();
  }

  /**
   * options answers the options it runs now as plain JSON data: `delay` and `abort` always present
   * (`percent: 0` when none), so `reconfigure(options())` taken earlier returns to them.
   */
  options(): FaultOptions {
    const { delay, abort, ttlMs } = this.settings;
    return {
      delay: delay === undefined ? { ms: 0, percent: 0 } : { ms: delay.ms, percent: delay.percent },
      abort: abort === undefined ? { percent: 0, status: faultDefaults.status, error: faultDefaults.error } : { ...abort },
      ttlMs,
    };
  }

  /** stats answers a fresh snapshot of the counters, and whether (and when) the fault expires. */
  stats(): FaultStats {
    return {
      calls: this.calls,
      delayed: this.delayed,
      aborted: this.aborted,
      expired: this.expired,
      remainingMs: this.expired || this.closed ? 0 : Math.max(0, this.expiresAt - this.clock.now()),
    };
  }

  /**
   * describeMetrics answers the injector's families (`fault_calls_total`, `fault_delayed_total`,
   * `fault_aborted_total`, `fault_active`), read from its stats at scrape time.
   */
  describeMetrics(): MetricsDescription {
    return {
      kind: 'FaultInjector',
      families: [
        { name: 'fault_calls_total', type: 'counter', help: 'Calls a FaultInjector saw while its fault was active.', labelNames: [] },
        { name: 'fault_delayed_total', type: 'counter', help: 'Calls a FaultInjector delayed on purpose.', labelNames: [] },
        { name: 'fault_aborted_total', type: 'counter', help: 'Calls a FaultInjector failed on purpose (FaultInjectedError).', labelNames: [] },
        { name: 'fault_active', type: 'gauge', help: '1 while a FaultInjector injects (configured and not expired).', labelNames: [] },
      ],
      collect: (emit) => {
        const s = this.stats();
        emit('fault_calls_total', {}, s.calls);
        emit('fault_delayed_total', {}, s.delayed);
        emit('fault_aborted_total', {}, s.aborted);
        emit('fault_active', {}, this.active ? 1 : 0);
      },
      snapshot: () => ({ ...this.options(), ...this.stats() }),
      closed: () => this.closed,
    };
  }

  /** close stops the expiry timer; later calls reject with ClosedError (delays under way finish). Idempotent. */
  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
      this.timer = undefined;
    }
    return Promise.resolve();
  }

  /** [Symbol.asyncDispose] closes the injector (`await using f = new FaultInjector(…)`). */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** start applies the settings and (re)starts the ttl. */
  private start(): void {
    const s = this.settings;
    this.delayP = s.delay === undefined ? 0 : s.delay.percent / 100;
    this.abortP = s.abort === undefined ? 0 : s.abort.percent / 100;
    this.expired = false;
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.expiresAt = this.clock.now() + s.ttlMs;
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      this.expired = true;
    }, s.ttlMs);
    this.timer.unref();
  }
}
