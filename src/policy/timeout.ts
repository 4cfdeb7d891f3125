/**
 * Timeout gives a task a deadline. The returned promise settles at the deadline even if the task
 * ignores its signal, so a caller is never held (much) longer than `timeoutMs`; a task that ignores its
 * signal keeps running after the deadline, only the wait ends. Hand the signal on (fetch, undici, etcd3
 * and ioredis calls all take one).
 *
 * Without a caller signal (none, or `neverAborted`), calls share deadlines (core `Deadlines`): calls
 * that start within 1 % of the timeout (at least 1 ms) share one AbortSignal and one timer, because
 * making an AbortSignal costs several µs on Node 20 — more than the rest of the call. The price: the
 * signal (and the TimeoutError) may come up to 1 % (or 1 ms) late, and the signal may abort after the
 * task has finished (a call of its granule was still running), so a task must not use its signal past
 * its own call. The task always gets a real signal, whatever its declared parameters.
 *
 * With a caller signal, the task gets a signal of its own, linked to the caller's: it aborts (reason:
 * the `TimeoutError`) exactly at the deadline, or (reason: the caller's) when the caller aborts, and
 * the call rejects with `AbortedError`. Whatever settles first wins; the timer and the listener on the
 * caller's signal are removed as soon as it settles.
 *
 * Either way, a deadline whose timer runs late because the process itself was busy (a GC pause,
 * synchronous work) waits one more timer turn, after an I/O poll, before it fires: a task whose answer
 * arrived during the stall settles first, instead of timing out for the process's own pause (core
 * DeadlineTimer).
 *
 * `reconfigure({ timeoutMs })` changes the deadline of calls that start from then on; a call under way
 * keeps the deadline it started with.
 */
import { AbortedError, TimeoutError, withoutStack } from '../core/errors.js';
import { MAX_TIMER_MS, systemClock, type Clock } from '../core/clock.js';
import { Deadlines } from '../core/deadline.js';
import { DeadlineTimer } from '../core/deadline-timer.js';
import { neverAborted, type ExecuteOptions, type Guard, type Task } from '../core/guard.js';
import { clockOption, finite, liveOptions, options as optionsObject, type OptionKeys } from '../core/validate.js';
import type { Reconfigurable } from '../core/reconfigurable.js';
import { checkCall } from './check-call.js';
import type { TimeoutOptions, TimeoutStats } from './types.js';
import type { MetricsDescription } from '../core/metrics-description.js';

/** The keys of TimeoutOptions, all of them: any other is refused (see `options`). */
const TIMEOUT_KEYS = { timeoutMs: true, clock: true } as const satisfies OptionKeys<TimeoutOptions>;

export type { TimeoutOptions, TimeoutStats } from './types.js';

/** Defaults for TimeoutOptions. */
export const timeoutDefaults = Object.freeze({ timeoutMs: 10_000 });

/** Timeout is a Guard that aborts a task and rejects with `TimeoutError` at its deadline. */
export class Timeout implements Guard, Reconfigurable<Omit<TimeoutOptions, 'clock'>> {
  readonly timeoutMs: number;
  private deadlines: Deadlines;
  private readonly clock: Clock;
  private calls = 0;
  private timeouts = 0;

  constructor(options?: TimeoutOptions) {
    const o = optionsObject('Timeout', options, TIMEOUT_KEYS);
    this.timeoutMs = finite('Timeout', 'timeoutMs', o.timeoutMs ?? timeoutDefaults.timeoutMs, 1, MAX_TIMER_MS);
    this.clock = clockOption('Timeout', o.clock, systemClock);
    this.deadlines = new Deadlines({ timeoutMs: this.timeoutMs, clock: this.clock });
  }

  /** options answers the options this policy runs now: those `reconfigure` may change. */
  options(): { timeoutMs: number } {
    return { timeoutMs: this.timeoutMs };
  }

  /**
   * reconfigure sets `timeoutMs` for the calls that start from now, validated as the constructor validates
   * it (the same errors; `clock` refused: fixed at construction); a call under way keeps its deadline.
   */
  reconfigure(partial: Partial<Omit<TimeoutOptions, 'clock'>>): void {
    const p = liveOptions('Timeout', partial as TimeoutOptions, TIMEOUT_KEYS, ['clock']);
    const timeoutMs = finite('Timeout', 'timeoutMs', p.timeoutMs ?? this.timeoutMs, 1, MAX_TIMER_MS);
    if (timeoutMs === this.timeoutMs) return;
    (this as { timeoutMs: number }).timeoutMs = timeoutMs;
    // Shared deadlines under way keep their granules (and timers); new calls join the new ones.
    this.deadlines = new Deadlines({ timeoutMs, clock: this.clock });
  }

  /** describeMetrics answers the policy's families (`timeout_seconds`, `timeout_calls_total`, `timeout_timeouts_total`), read at scrape time. */
  describeMetrics(): MetricsDescription {
    return {
      kind: 'Timeout',
      families: [
        { name: 'timeout_seconds', type: 'gauge', help: 'The deadline a Timeout policy gives each call.', labelNames: [] },
        { name: 'timeout_calls_total', type: 'counter', help: 'Calls a Timeout policy ran.', labelNames: [] },
        { name: 'timeout_timeouts_total', type: 'counter', help: 'Calls a Timeout policy ran that ended in TimeoutError.', labelNames: [] },
      ],
      collect: (emit) => {
        emit('timeout_seconds', {}, this.timeoutMs / 1000);
        const s = this.stats();
        emit('timeout_calls_total', {}, s.calls);
        emit('timeout_timeouts_total', {}, s.timeouts);
      },
      snapshot: () => ({ timeoutMs: this.timeoutMs, ...this.stats() }),
    };
  }

  /** stats answers a fresh snapshot of the counters: calls started, and calls that timed out. */
  stats(): TimeoutStats {
    return { calls: this.calls, timeouts: this.timeouts };
  }

  /** countTimeout counts a shared-deadline call that timed out, and rejects with its error again. */
  private readonly countTimeout = (err: unknown): never => {
    if (err instanceof TimeoutError) this.timeouts++;
    throw err;
  };

  /**
   * execute runs `fn` with a signal that aborts at the deadline; rejects with `TimeoutError` then, or
   * `AbortedError` if `signal` aborts first. Without `signal`, the deadline is shared (see above).
   */
  execute<T>(fn: Task<T>, options?: ExecuteOptions): Promise<T> {
    const bad = checkCall('Timeout', fn, options);
    if (bad !== undefined) return Promise.reject(bad);
    this.calls++;
    const given = options?.signal;
    // Nobody else can abort the call: share the deadline of its granule.
    if (given === undefined || given === neverAborted) return this.deadlines.run(fn).catch(this.countTimeout);
    const parent = given;
    if (parent.aborted) return Promise.reject(new AbortedError('timeout: aborted before start', { cause: parent.reason }));
    const timeoutMs = this.timeoutMs;
    const clock = this.clock;
    const controller = new AbortController();
    return new Promise<T>((resolve, reject) => {
      let done = false;
      let onParentAbort: (() => void) | undefined;
      const settle = (): boolean => {
        if (done) return false;
        done = true;
        timer.cancel();
        if (onParentAbort !== undefined) parent!.removeEventListener('abort', onParentAbort);
        return true;
      };
      const timer = new DeadlineTimer(clock, timeoutMs, () => {
        if (!settle()) return;
        const err = withoutStack(() => new TimeoutError(`operation timed out after ${timeoutMs} ms`));
        this.timeouts++;
        controller.abort(err);
        reject(err);
      });
      onParentAbort = () => {
        if (!settle()) return;
        const reason: unknown = parent.reason;
        controller.abort(reason);
        reject(new AbortedError('timeout: aborted by caller', { cause: reason }));
      };
      parent.addEventListener('abort', onParentAbort);
      let result: T | PromiseLike<T>;
      try {
        result = fn(controller.signal);
      } catch (err) {
        if (settle()) reject(err);
        return;
      }
      if (result !== null && typeof (result as PromiseLike<T>)?.then === 'function') {
        Promise.resolve(result).then(
          (value) => {
            if (settle()) resolve(value);
          },
          (err: unknown) => {
            if (settle()) reject(err);
          },
        );
      } else if (settle()) resolve(result as T);
    });
  }
}
