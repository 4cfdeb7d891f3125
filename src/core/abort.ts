/**
 * AbortSignal helpers: the Node counterpart of Go's context.Context deadlines and cancellation.
 */
import { AbortedError } from './errors.js';

/** delay resolves after `ms` milliseconds, or rejects with `AbortedError` when `signal` aborts first. */
export function delay(ms: number, signal?: AbortSignal, options?: { unref?: boolean }): Promise<void> {
  if (signal?.aborted) return Promise.reject(new AbortedError('delay aborted', { cause: signal.reason }));
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(new AbortedError('delay aborted', { cause: signal!.reason }));
    };
    const timer = setTimeout(() => {
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
