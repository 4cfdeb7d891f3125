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

function noop(): void {}
