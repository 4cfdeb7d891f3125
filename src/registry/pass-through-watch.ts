/**
 * The wrapped registry's own watch, passed through a RegistryCache and ended when the cache closes.
 */
import { linkSignal } from '../core/abort.js';
import { ClosedError } from '../core/errors.js';
import type { Registry, RegistryEvent, WatchOptions } from './types.js';

/**
 * passThroughWatch is the wrapped registry's own watch (of every service, or with the cache's watch off),
 * ended also when `closing` aborts (the cache closed).
 */
export function passThroughWatch(registry: Registry, options: WatchOptions | undefined, closing: AbortSignal): AsyncIterable<RegistryEvent> {
  const { controller, unlink } = linkSignal(options?.signal);
  const onClose = () => controller.abort(new ClosedError('RegistryCache is closed'));
  closing.addEventListener('abort', onClose, { once: true });
  const release = () => {
    unlink();
    closing.removeEventListener('abort', onClose);
  };
  let events: AsyncIterable<RegistryEvent>;
  try {
    events = registry.watch({ ...options, signal: controller.signal });
  } catch (err) {
    release();
    throw err;
  }
  return untilDone(events, () => {
    release();
    controller.abort();
  });
}

/** untilDone iterates `events`, calling `done` once when the iteration ends however it ends. */
export async function* untilDone(events: AsyncIterable<RegistryEvent>, done: () => void): AsyncGenerator<RegistryEvent> {
  try {
    yield* events;
  } finally {
    done();
  }
}

/** ended is a watch that yields nothing. */
export async function* ended(): AsyncGenerator<RegistryEvent> {}
