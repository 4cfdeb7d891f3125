/**
 * Bulkhead caps how many calls run at once (`maxConcurrent`) and how many may wait for a slot
 * (`maxQueued`); when both are full it rejects at once with `BulkheadRejectedError`, so one slow
 * dependency cannot take every socket, every pending promise and every byte of memory with it.
 *
 * Waiters are served first come, first served; a freed slot is handed straight to the next waiter, so a
 * call arriving at that moment cannot jump the queue. A waiter whose signal aborts leaves the queue at
 * once (O(1): the queue is a doubly linked list) and rejects with `AbortedError`.
 *
 * `reconfigure({ maxConcurrent, maxQueued })` changes it live and fails no call: calls running keep their
 * slots, and calls queued keep their places. More slots start that many waiters at once; fewer slots let
 * the running calls finish, a freed slot going to a waiter only while fewer than the new bound run. A
 * shorter queue keeps every call already in it (served in order as before); new calls are refused until
 * the queue is under the new bound.
 */
import { AbortedError, BulkheadRejectedError, withoutStack } from '../core/errors.js';
import { neverAborted, type ExecuteOptions, type Guard, type Task } from '../core/guard.js';
import { integer, liveOptions, options as optionsObject, type OptionKeys } from '../core/validate.js';
import type { Reconfigurable } from '../core/reconfigurable.js';
import { checkCall } from './check-call.js';
import type { BulkheadOptions, BulkheadStats } from './types.js';
import type { MetricsDescription } from '../core/metrics-description.js';

/** The keys of BulkheadOptions, all of them: any other is refused (see `options`). */
const BULKHEAD_KEYS = { maxConcurrent: true, maxQueued: true } as const satisfies OptionKeys<BulkheadOptions>;

export type { BulkheadOptions, BulkheadStats } from './types.js';

/** Defaults for BulkheadOptions. */
export const bulkheadDefaults = Object.freeze({ maxConcurrent: 10, maxQueued: 0 });

interface Waiter {
  fn: Task<unknown>;
  signal: AbortSignal | undefined;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
  onAbort: (() => void) | undefined;
  prev: Waiter | undefined;
  next: Waiter | undefined;
}

/** Bulkhead is a Guard that bounds concurrency and queueing. */
export class Bulkhead implements Guard, Reconfigurable<BulkheadOptions> {
  readonly maxConcurrent: number;
  readonly maxQueued: number;
  private activeCount = 0;
  private queuedCount = 0;
  private rejectedCount = 0;
  private head: Waiter | undefined;
  private tail: Waiter | undefined;

  constructor(options?: BulkheadOptions) {
    const o = optionsObject('Bulkhead', options, BULKHEAD_KEYS);
    this.maxConcurrent = integer('Bulkhead', 'maxConcurrent', o.maxConcurrent ?? bulkheadDefaults.maxConcurrent, 1, 1e9);
    this.maxQueued = integer('Bulkhead', 'maxQueued', o.maxQueued ?? bulkheadDefaults.maxQueued, 0, 1e9);
  }

  /** options answers the options this bulkhead runs now (all of them may change: see `reconfigure`). */
  options(): Required<BulkheadOptions> {
    return { maxConcurrent: this.maxConcurrent, maxQueued: this.maxQueued };
  }

  /**
   * reconfigure lays `partial` over `options()` and applies it, validated as the constructor validates it
   * (the same errors), both or, when it throws, neither. It fails no call: see the file comment for what
   * happens to the calls running and queued.
   */
  reconfigure(partial: Partial<BulkheadOptions>): void {
    const p = liveOptions('Bulkhead', partial, BULKHEAD_KEYS, []);
    const maxConcurrent = integer('Bulkhead', 'maxConcurrent', p.maxConcurrent ?? this.maxConcurrent, 1, 1e9);
    const maxQueued = integer('Bulkhead', 'maxQueued', p.maxQueued ?? this.maxQueued, 0, 1e9);
    const self = this as { -readonly [K in 'maxConcurrent' | 'maxQueued']: Bulkhead[K] };
    self.maxConcurrent = maxConcurrent;
    self.maxQueued = maxQueued;
    while (this.head !== undefined && this.activeCount < maxConcurrent) {
      this.activeCount++;
      this.release(); // hands the new slot to the first waiter
    }
  }

  /** active is the number of calls running now. */
  get active(): number {
    return this.activeCount;
  }

  /** queued is the number of calls waiting for a slot now. */
  get queued(): number {
    return this.queuedCount;
  }

  /** describeMetrics answers the bulkhead's families (`bulkhead_active`, `bulkhead_queued`, `bulkhead_rejected_total`), read from its stats at scrape time. */
  describeMetrics(): MetricsDescription {
    return {
      kind: 'Bulkhead',
      families: [
        { name: 'bulkhead_active', type: 'gauge', help: 'Calls a Bulkhead runs now.', labelNames: [] },
        { name: 'bulkhead_queued', type: 'gauge', help: 'Calls waiting for a Bulkhead slot now.', labelNames: [] },
        { name: 'bulkhead_rejected_total', type: 'counter', help: 'Calls a Bulkhead rejected (every slot and queue place taken).', labelNames: [] },
      ],
      collect: (emit) => {
        const s = this.stats();
        emit('bulkhead_active', {}, s.active);
        emit('bulkhead_queued', {}, s.queued);
        emit('bulkhead_rejected_total', {}, s.rejected);
      },
    };
  }

  /** stats answers a fresh snapshot of the counters. */
  stats(): BulkheadStats {
    return { active: this.activeCount, queued: this.queuedCount, rejected: this.rejectedCount };
  }

  /**
   * execute runs `fn` in a free slot, or waits for one in the queue, or rejects at once with
   * `BulkheadRejectedError` when both are full. `signal` aborting while queued rejects with `AbortedError`.
   */
  execute<T>(fn: Task<T>, options?: ExecuteOptions): Promise<T> {
    const bad = checkCall('Bulkhead', fn, options);
    if (bad !== undefined) return Promise.reject(bad);
    const given = options?.signal;
    const signal = given === neverAborted ? undefined : given; // it never aborts: no need to listen
    if (signal?.aborted) return Promise.reject(new AbortedError('bulkhead: aborted before start', { cause: signal.reason }));
    if (this.activeCount < this.maxConcurrent) {
      this.activeCount++;
      return this.run(fn, signal ?? neverAborted);
    }
    if (this.queuedCount < this.maxQueued) return this.enqueue(fn, signal);
    this.rejectedCount++;
    const { maxConcurrent, maxQueued } = this;
    return Promise.reject(withoutStack(() => new BulkheadRejectedError(`bulkhead is full (${maxConcurrent} running, ${maxQueued} queued)`)));
  }

  /**
   * tryEnter takes a free slot for a caller that runs its work itself and answers true, or answers false
   * when none is free (then `execute`, which queues or rejects). A true must be followed by one `leave()`
   * when the work settles. ResilientClient's call runs its first attempt so, on the call's own promise. @internal
   */
  tryEnter(): boolean {
    if (this.activeCount >= this.maxConcurrent) return false;
    this.activeCount++;
    return true;
  }

  /** leave frees the slot a `tryEnter` took (handing it to the first waiter, as a settled `execute` does). @internal */
  leave(): void {
    this.release();
  }

  /** run starts `fn` in a slot already counted in `activeCount`; the slot is released when it settles. */
  private run<T>(fn: Task<T>, signal: AbortSignal): Promise<T> {
    let result: T | PromiseLike<T>;
    try {
      result = fn(signal);
    } catch (err) {
      this.release();
      return Promise.reject(err);
    }
    if (result !== null && typeof (result as PromiseLike<T>)?.then === 'function') {
      return Promise.resolve(result).then(this.releaseValue, this.releaseError) as Promise<T>;
    }
    this.release();
    return Promise.resolve(result as T);
  }

  private readonly releaseValue = <V>(value: V): V => {
    this.release();
    return value;
  };

  private readonly releaseError = (err: unknown): never => {
    this.release();
    throw err;
  };

  /** release frees a slot, or hands it straight to the first waiter (while no more than maxConcurrent run). */
  private release(): void {
    const w = this.head;
    if (w === undefined || this.activeCount > this.maxConcurrent) {
      this.activeCount--;
      return;
    }
    this.unlink(w);
    if (w.onAbort !== undefined) w.signal!.removeEventListener('abort', w.onAbort);
    this.run(w.fn, w.signal ?? neverAborted).then(w.resolve, w.reject);
  }

  private enqueue<T>(fn: Task<T>, signal: AbortSignal | undefined): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const w: Waiter = {
        fn: fn as Task<unknown>,
        signal,
        resolve: resolve as (value: unknown) => void,
        reject,
        onAbort: undefined,
        prev: this.tail,
        next: undefined,
      };
      if (this.tail === undefined) this.head = w;
      else this.tail.next = w;
      this.tail = w;
      this.queuedCount++;
      if (signal !== undefined) {
        w.onAbort = () => {
          this.unlink(w);
          reject(new AbortedError('bulkhead: aborted while queued', { cause: signal.reason }));
        };
        signal.addEventListener('abort', w.onAbort, { once: true });
      }
    });
  }

  private unlink(w: Waiter): void {
    if (w.prev === undefined) this.head = w.next;
    else w.prev.next = w.next;
    if (w.next === undefined) this.tail = w.prev;
    else w.next.prev = w.prev;
    w.prev = w.next = undefined;
    this.queuedCount--;
  }
}
