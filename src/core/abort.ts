/**
 * AbortSignal helpers: the Node counterpart of Go's context.Context deadlines and cancellation.
 */
import { systemClock, type Clock } from './clock.js';
import { AbortedError } from './errors.js';

/** DelayOptions configures one `delay`. */
export interface DelayOptions {
  /** Let the process exit while waiting. Defaults to false. */
  unref?: boolean;
  /** The clock whose timer waits. Defaults to the system clock. */
  clock?: Clock;
}

/** delay resolves after `ms` milliseconds of clock time, or rejects with `AbortedError` when `signal` aborts first. */
export function delay(ms: number, signal?: AbortSignal, options?: DelayOptions): Promise<void> {
  const clock = options?.clock ?? systemClock;
  if (signal?.aborted) return Promise.reject(new AbortedError('delay aborted', { cause: signal.reason }));
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      clock.clearTimeout(timer);
      reject(new AbortedError('delay aborted', { cause: signal!.reason }));
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    if (options?.unref) timer.unref();
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** throwIfAborted throws `AbortedError` (with the signal's reason as cause) when `signal` is aborted. */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new AbortedError('operation aborted', { cause: signal.reason });
}

/**
 * linkSignals returns a controller whose signal aborts when `parent` aborts (with the same reason),
 * and a function that unlinks it. Use it to give a callee a signal you can abort yourself too.
 */
export function linkSignal(parent: AbortSignal | undefined): { controller: AbortController; unlink: () => void } {
  const controller = new AbortController();
  if (parent === undefined) return { controller, unlink: noop };
  if (parent.aborted) {
    controller.abort(parent.reason);
    return { controller, unlink: noop };
  }
  const onAbort = () => controller.abort(parent.reason);
  parent.addEventListener('abort', onAbort, { once: true });
  return { controller, unlink: () => parent.removeEventListener('abort', onAbort) };
}

/**
 * raceSignal answers `p`, or what `onAbort()` answers (or throws) as soon as `signal` aborts, whichever
 * comes first; its listener is removed either way. `p` itself goes on: only the wait for it ends.
 */
export function raceSignal<T, U>(p: PromiseLike<T>, signal: AbortSignal, onAbort: () => U): Promise<T | U> {
  if (signal.aborted) return Promise.resolve().then(onAbort);
  return new Promise<T | U>((resolve, reject) => {
    const aborted = () => {
      try {
        resolve(onAbort());
      } catch (err) {
        reject(err);
      }
    };
    signal.addEventListener('abort', aborted, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', aborted);
        resolve(v);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', aborted);
        reject(err);
      },
    );
  });
}

function noop(): void {}
