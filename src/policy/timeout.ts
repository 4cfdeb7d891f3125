/**
 * Timeout gives a task a deadline. The task gets its own AbortSignal, linked to the caller's: it aborts
 * (reason: the `TimeoutError`) when the deadline passes, or (reason: the caller's) when the caller aborts.
 * The returned promise settles at the deadline even if the task ignores its signal, so a caller is never
 * held longer than `timeoutMs`. Whatever settles first wins; the timer and the listener on the caller's
 * signal are removed as soon as it settles, so nothing is left behind.
 *
 * A task that ignores its signal keeps running after the deadline; only the wait ends. Hand the signal
 * on (fetch, undici, etcd3 and ioredis calls all take one).
 */
import { AbortedError, TimeoutError, withoutStack } from '../core/errors.js';
import type { ExecuteOptions, Guard, Task } from '../core/guard.js';
import { finite, options as optionsObject } from '../core/validate.js';

/** TimeoutOptions configures a Timeout. */
export interface TimeoutOptions {
  /** The deadline, in milliseconds from the start of `execute`. Defaults to 10 000. */
  timeoutMs?: number;
}

/** Defaults for TimeoutOptions. */
export const timeoutDefaults = Object.freeze({ timeoutMs: 10_000 });

/** Timers cannot wait longer than 2^31 − 1 ms (Node turns larger delays into 1 ms). */
const MAX_TIMER_MS = 2_147_483_647;

/** Timeout is a Guard that aborts a task and rejects with `TimeoutError` at its deadline. */
export class Timeout implements Guard {
  readonly timeoutMs: number;

  constructor(options?: TimeoutOptions) {
    const o = optionsObject('Timeout', options);
    this.timeoutMs = finite('Timeout', 'timeoutMs', o.timeoutMs ?? timeoutDefaults.timeoutMs, 1, MAX_TIMER_MS);
  }

  /** execute runs `fn` with a signal that aborts at the deadline; rejects with `TimeoutError` then, or `AbortedError` if `signal` aborts first. */
  execute<T>(fn: Task<T>, options?: ExecuteOptions): Promise<T> {
    const parent = options?.signal;
    if (parent?.aborted) return Promise.reject(new AbortedError('timeout: aborted before start', { cause: parent.reason }));
    return new Promise<T>((resolve, reject) => new TimeoutRun(this.timeoutMs, fn, parent, resolve, reject));
  }
}

/** One guarded call: its controller, timer and parent listener, all released on the first settle. */
class TimeoutRun<T> {
  private readonly controller = new AbortController();
  private readonly timer: ReturnType<typeof setTimeout>;
  private done = false;

  constructor(
    private readonly timeoutMs: number,
    fn: Task<T>,
    private readonly parent: AbortSignal | undefined,
    private readonly resolve: (value: T) => void,
    private readonly reject: (err: unknown) => void,
  ) {
    this.timer = setTimeout(this.onTimeout, timeoutMs);
    parent?.addEventListener('abort', this.onParentAbort);
    let result: T | PromiseLike<T>;
    try {
      result = fn(this.controller.signal);
    } catch (err) {
      this.fail(err);
      return;
    }
    if (result !== null && typeof (result as PromiseLike<T>)?.then === 'function') {
      (result as PromiseLike<T>).then(this.succeed, this.fail);
    } else {
      this.succeed(result as T);
    }
  }

  private readonly succeed = (value: T): void => {
    if (this.settle()) this.resolve(value);
  };

  private readonly fail = (err: unknown): void => {
    if (this.settle()) this.reject(err);
  };

  private readonly onTimeout = (): void => {
    if (this.done) return;
    const err = withoutStack(() => new TimeoutError(`operation timed out after ${this.timeoutMs} ms`));
    this.settle();
    this.controller.abort(err);
    this.reject(err);
  };

  private readonly onParentAbort = (): void => {
    if (this.done) return;
    const reason: unknown = this.parent!.reason;
    this.settle();
    this.controller.abort(reason);
    this.reject(new AbortedError('timeout: aborted by caller', { cause: reason }));
  };

  /** settle marks the call done and releases the timer and the parent listener; false if it was done already. */
  private settle(): boolean {
    if (this.done) return false;
    this.done = true;
    clearTimeout(this.timer);
    this.parent?.removeEventListener('abort', this.onParentAbort);
    return true;
  }
}
