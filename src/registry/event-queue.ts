/**
 * EventQueue is one watcher's bounded queue of registry events, read as an async iterator.
 * A watcher that falls behind is never silently dropped from (go-micro's memory registry drops an
 * event that waits more than 10 ms): when the queue is full, the events already queued are still
 * delivered, then the iterator throws `WatchResyncError` — list again and watch anew.
 */
import { WatchResyncError } from '../core/errors.js';
import type { RegistryEvent } from './types.js';

const DONE: IteratorResult<RegistryEvent> = Object.freeze({ done: true, value: undefined });

/** EventQueue buffers at most `capacity` events for one consumer. */
export class EventQueue implements AsyncIterableIterator<RegistryEvent> {
  private buf: (RegistryEvent | undefined)[] = []; // consumed slots are cleared so the events can be collected
  private head = 0;
  /**
   * The pending next()'s settle functions, kept in two fields rather than one object: every watcher of
   * a big registry waits for long, and such a waiter object per event would come from an allocation
   * site V8 then tenures (see watchEvent in validate.ts).
   */
  private resolveNext: ((r: IteratorResult<RegistryEvent>) => void) | undefined;
  private rejectNext: ((err: unknown) => void) | undefined;
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
    const resolve = this.resolveNext;
    if (resolve !== undefined) {
      this.resolveNext = this.rejectNext = undefined;
      resolve(result(event));
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
      return Promise.resolve(result(value));
    }
    if (this.failure != null) {
      const err = this.failure;
      this.failure = null; // report once, then behave as ended
      this.ended = true;
      return Promise.reject(err);
    }
    if (this.ended) return Promise.resolve(DONE);
    if (this.resolveNext !== undefined) return Promise.reject(new Error('EventQueue: next() called while a previous next() is pending'));
    return new Promise((resolve, reject) => {
      this.resolveNext = resolve;
      this.rejectNext = reject;
    });
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
    const resolve = this.resolveNext;
    const reject = this.rejectNext;
    if (resolve === undefined || reject === undefined) return;
    this.resolveNext = this.rejectNext = undefined;
    if (this.failure != null) {
      const err = this.failure;
      this.failure = null;
      this.ended = true;
      reject(err);
    } else resolve(DONE);
  }
}

/** result answers `{ done: false, value }`, built from an empty literal (no allocation site: see watchEvent in validate.ts). */
function result(value: RegistryEvent): IteratorResult<RegistryEvent> {
  const r: { done: false; value: RegistryEvent } = {} as never;
  r.done = false;
  r.value = value;
  return r;
}
