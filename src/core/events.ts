/**
 * Typed events: `on(listener)` returns a disposer; `emit` costs one length check when nobody listens.
 * A listener that throws does not stop the others or the emitter: the error becomes a process
 * warning, so a bug in a metrics hook never breaks a breaker or crashes the process.
 */

/** Disposer removes the listener it was returned for; calling it twice is harmless. */
export type Disposer = () => void;

/** Listener receives one event. */
export type Listener<T> = (event: T) => void;

/** Emitter is a minimal typed emitter for one kind of event. */
export class Emitter<T> {
  private listeners: Listener<T>[] = [];

  /** hasListeners is true when at least one listener is subscribed. */
  get hasListeners(): boolean {
    return this.listeners.length > 0;
  }

  /** on subscribes `listener` and returns the disposer that unsubscribes it. */
  on(listener: Listener<T>): Disposer {
    if (typeof listener !== 'function') throw new TypeError(`listener must be a function, got ${typeof listener}`);
    this.listeners = [...this.listeners, listener];
    let active = true;
    return () => {
      if (!active) return;
      active = false;
      this.listeners = this.listeners.filter((l) => l !== listener);
    };
  }

  /** emit calls every listener with `event`; a listener that throws is reported as a process warning. */
  emit(event: T): void {
    const ls = this.listeners;
    if (ls.length === 0) return;
    for (let i = 0; i < ls.length; i++) {
      try {
        ls[i]!(event);
      } catch (err) {
        process.emitWarning(`bulwark: an event listener threw: ${err instanceof Error ? err.message : String(err)}`, {
          code: 'BULWARK_LISTENER_ERROR',
        });
      }
    }
  }

  /** clear removes every listener. */
  clear(): void {
    this.listeners = [];
  }
}
