/**
 * EventQueue is one watcher's bounded queue of registry events, read as an async iterator.
 * A watcher that falls behind is never silently dropped from (go-micro's memory registry drops an
 * event that waits more than 10 ms): when the queue is full, the events already queued are still
 * delivered, then the iterator throws `WatchResyncError` — list again and watch anew.
 */
import { WatchResyncError } from '../core/errors.js';
import type { RegistryEvent } from './types.js';

interface Waiter {
  resolve: (r: IteratorResult<RegistryEvent>) => void;
  reject: (err: unknown) => void;
}

const DONE: IteratorResult<RegistryEvent> = Object.freeze({ done: true, value: undefined });

/** EventQueue buffers at most `capacity` events for one consumer. */
export class EventQueue implements AsyncIterableIterator<RegistryEvent> {
  private buf: (RegistryEvent | undefined)[] = []; // consumed slots are cleared so the events can be collected
  private head = 0;
  private waiter: Waiter | undefined;
  private ended = false;
  private failure: unknown;
  private readonly onAbort: (() => void) | undefined;

  /**
   * `onClose` runs once when the queue ends for any reason (consumer returned, signal aborted, end(),
   * fail()); the producer unsubscribes there.
   */
  constructor(
    private readonly capacity: number,
    private readonly signal: AbortSignal | undefined,
    private onClose: (() => void) | undefined,
  ) {
    if (signal !== undefined) {
      this.onAbort = () => this.end();
      if (signal.aborted) queueMicrotask(this.onAbort);
      else signal.addEventListener('abort', this.onAbort, { once: true });
    }
  }

  /** closed is true once the queue accepts no more events. */
  get closed(): boolean {
    return this.ended || this.failure != null;
  }

  /** length is the number of events waiting for the consumer. */
  get length(): number {
    return this.buf.length - this.head;
  }

  /** push hands one event to the consumer; on overflow the queue fails with WatchResyncError. */
  push(event: RegistryEvent): void {
    if (this.closed) return;
    const w = this.waiter;
    if (w !== undefined) {
      this.waiter = undefined;
      w.resolve({ done: false, value: event });
      return;
    }
    if (this.length >= this.capacity) {
      this.fail(new WatchResyncError(`watcher fell behind: more than ${this.capacity} events waiting; list again and resync`));
      return;
    }
    this.buf.push(event);
  }

  /** end finishes the stream after the queued events. */
  end(): void {
    if (this.closed) return;
    this.ended = true;
    this.finish();
  }

  /** fail finishes the stream with `err` after the queued events. */
  fail(err: unknown): void {
    if (this.closed) return;
    this.failure = err;
    this.finish();
  }

  next(): Promise<IteratorResult<RegistryEvent>> {
    if (this.head < this.buf.length) {
      const value = this.buf[this.head]!;
      this.buf[this.head++] = undefined;
      if (this.head > 1024 && this.head * 2 > this.buf.length) {
        this.buf = this.buf.slice(this.head);
        this.head = 0;
      }
      return Promise.resolve({ done: false, value });
    }
    if (this.failure != null) {
      const err = this.failure;
      this.failure = null; // report once, then behave as ended
      this.ended = true;
      return Promise.reject(err);
    }
    if (this.ended) return Promise.resolve(DONE);
    if (this.waiter !== undefined) return Promise.reject(new Error('EventQueue: next() called while a previous next() is pending'));
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
  }

  return(): Promise<IteratorResult<RegistryEvent>> {
    this.ended = true;
    this.failure = undefined;
    this.buf = [];
    this.head = 0;
    this.finish();
    return Promise.resolve(DONE);
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<RegistryEvent> {
    return this;
  }

  private finish(): void {
    if (this.onAbort !== undefined) this.signal?.removeEventListener('abort', this.onAbort);
    const close = this.onClose;
    this.onClose = undefined;
    close?.();
    const w = this.waiter;
    if (w === undefined) return;
    this.waiter = undefined;
    if (this.failure != null) {
      const err = this.failure;
      this.failure = null;
      this.ended = true;
      w.reject(err);
    } else w.resolve(DONE);
  }
}
