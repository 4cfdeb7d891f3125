/**
 * Deadlines gives calls a timeout without an AbortController per call. The client's attempts and the
 * policy `Timeout` both use it for calls that come without a caller signal.
 *
 * Why: on Node 20, making an AbortSignal costs several µs (`new AbortController()` is cheap, reading its
 * `signal` is not), more than the whole budget of a guarded call. So calls that start within the same
 * granule (1 % of the timeout, at least 1 ms) share one controller and one timer, set to fire one
 * timeout after the granule ends: a call's deadline falls between `timeoutMs` and `timeoutMs` + one
 * granule after it started. A thousand calls a second with a 10 s timeout make 100 controllers a second
 * instead of a thousand.
 *
 * The price, documented for callers: the signal a call gets is a deadline signal, like
 * `AbortSignal.timeout()` — it may abort up to one granule late, and it may abort at its deadline after
 * the call has finished (another call of its granule was still running), so a task must not keep using
 * it (to stream a body, say) past its call. After a stall of the process (its timer ran late: see
 * DeadlineTimer), the deadline waits one more timer turn, so that answers that came meanwhile are read
 * first and the dependency is not blamed for the process's own pause. A call with its own caller
 * signal needs a controller linked to that signal: such calls do not come here.
 *
 * Each granule keeps its calls in flight in an intrusive doubly linked list (O(1) insert and remove,
 * nothing kept once a call settles), and its timer holds the event loop open only while a call is in
 * flight. At the deadline every call still in the list gets `onDeadline(TimeoutError)` and the shared
 * signal aborts with that error as its reason.
 *
 * Time: granules are slots of the injected clock (`clock.now()`), and each granule's timer is set
 * through that clock (`clock.setTimeout`) for the time left to its deadline, so a `ManualClock` drives
 * the deadlines in tests; only differences of clock readings matter.
 */
import { setMaxListeners } from 'node:events';
import { MAX_TIMER_MS, systemClock, type Clock } from './clock.js';
import { DeadlineTimer } from './deadline-timer.js';
import { TimeoutError, withoutStack } from './errors.js';
import type { Task } from './guard.js';
import { clockOption, finite, options as checkOptions, type OptionKeys } from './validate.js';

/** The keys of DeadlinesOptions, all of them: any other is refused (see `options`). */
const DEADLINES_KEYS = { timeoutMs: true, what: true, clock: true } as const satisfies OptionKeys<DeadlinesOptions>;

/** Granules per timeout: the most a deadline is late, as a fraction of the timeout. */
const GRANULES_PER_TIMEOUT = 100;

/**
 * DeadlineNode is a call waiting under a granule's deadline. The granule links nodes through their own
 * fields (no allocation per call) and calls `onDeadline` on those still linked when it fires. A node
 * that settles first unlinks itself with `granule.remove(node)`.
 */
export interface DeadlineNode {
  granule: Granule | undefined;
  deadlinePrev: DeadlineNode | undefined;
  deadlineNext: DeadlineNode | undefined;
  onDeadline(err: TimeoutError): void;
}

/** Granule is the shared controller and timer of the calls that started in one time slot. */
export class Granule {
  readonly controller = new AbortController();
  readonly signal: AbortSignal;
  private readonly timer: DeadlineTimer;
  private head: DeadlineNode | undefined;
  private count = 0;
  /** The timer has fired: calls joining now need a new granule. */
  fired = false;

  /** The granule's calls time out `waitMs` from now. */
  constructor(
    readonly key: number,
    waitMs: number,
    private readonly message: string,
    clock: Clock,
  ) {
    this.signal = this.controller.signal;
    setMaxListeners(0, this.signal); // many calls (and undici requests) listen to one signal
    // A DeadlineTimer: after a stall of the process, calls answered meanwhile are read before it fires.
    this.timer = new DeadlineTimer(clock, waitMs, this.fire);
    this.timer.unref(); // held open only while a call is in flight (see add/remove)
  }

  /** add links `node` into the granule. */
  add(node: DeadlineNode): void {
    node.granule = this;
    node.deadlinePrev = undefined;
    node.deadlineNext = this.head;
    if (this.head !== undefined) this.head.deadlinePrev = node;
    this.head = node;
    if (this.count++ === 0) this.timer.ref();
  }

  /** remove unlinks `node` (it settled before the deadline). */
  remove(node: DeadlineNode): void {
    if (node.granule !== this) return;
    node.granule = undefined;
    const { deadlinePrev: prev, deadlineNext: next } = node;
    if (prev !== undefined) prev.deadlineNext = next;
    else this.head = next;
    if (next !== undefined) next.deadlinePrev = prev;
    node.deadlinePrev = node.deadlineNext = undefined;
    if (--this.count === 0) this.timer.unref();
  }

  private readonly fire = (): void => {
    this.fired = true;
    if (this.count === 0) return; // nobody in flight: nothing to abort
    const err = withoutStack(() => new TimeoutError(this.message));
    this.controller.abort(err);
    for (let node = this.head; node !== undefined; node = this.head) {
      this.remove(node);
      node.onDeadline(err);
    }
  };
}

/** PendingTask is the DeadlineNode of `Deadlines.run`: one task's promise. */
class PendingTask<T> implements DeadlineNode {
  granule: Granule | undefined = undefined;
  deadlinePrev: DeadlineNode | undefined = undefined;
  deadlineNext: DeadlineNode | undefined = undefined;

  constructor(
    private readonly resolveFn: (value: T) => void,
    private readonly rejectFn: (err: unknown) => void,
  ) {}

  readonly resolve = (value: T): void => {
    if (this.granule === undefined) return;
    this.granule.remove(this);
    this.resolveFn(value);
  };

  readonly reject = (err: unknown): void => {
    if (this.granule === undefined) return;
    this.granule.remove(this);
    this.rejectFn(err);
  };

  onDeadline(err: TimeoutError): void {
    this.rejectFn(err);
  }
}

/** DeadlinesOptions configures Deadlines. */
export interface DeadlinesOptions {
  /** The timeout of every call, in ms, in [1, 2^31 − 1]. Required. */
  timeoutMs: number;
  /** What timed out, for the TimeoutError's message (`<what> timed out after <timeoutMs> ms`). Defaults to `'operation'`. */
  what?: string;
  /** Time source for the granules and their timers. Defaults to `systemClock`. */
  clock?: Clock;
}

/** Defaults for DeadlinesOptions. */
export const deadlinesDefaults = Object.freeze({ what: 'operation' });

/** Deadlines runs calls under one timeout, sharing a signal and a timer per granule. */
export class Deadlines {
  readonly timeoutMs: number;
  /** The width of a granule in ms: 1 % of the timeout, at least 1 ms (the most a deadline is late). */
  readonly granuleMs: number;
  private readonly clock: Clock;
  private readonly message: string;
  private current: Granule | undefined;

  constructor(options: DeadlinesOptions) {
    const o = checkOptions('Deadlines', options, DEADLINES_KEYS);
    this.timeoutMs = finite('Deadlines', 'timeoutMs', o.timeoutMs, 1, MAX_TIMER_MS);
    const what = o.what ?? deadlinesDefaults.what;
    if (typeof what !== 'string') throw new TypeError(`Deadlines: what must be a string, got ${typeof what}`);
    this.message = `${what} timed out after ${this.timeoutMs} ms`;
    this.clock = clockOption('Deadlines', o.clock, systemClock);
    this.granuleMs = Math.max(1, this.timeoutMs / GRANULES_PER_TIMEOUT);
  }

  /**
   * join links `node` into the current granule and answers the signal the call must use. `now` (a
   * reading of this Deadlines' clock) saves a clock read when the caller has just read it.
   */
  join(node: DeadlineNode, now: number = this.clock.now()): AbortSignal {
    const key = Math.floor(now / this.granuleMs);
    let g = this.current;
    if (g === undefined || g.key !== key || g.fired) {
      g = new Granule(key, Math.min(Math.max((key + 1) * this.granuleMs + this.timeoutMs - now, 1), MAX_TIMER_MS), this.message, this.clock);
      this.current = g;
    }
    g.add(node);
    return g.signal;
  }

  /**
   * run calls `task` with the signal of the current granule and answers its result, or rejects with
   * TimeoutError at the deadline if the task has not settled by then (the task keeps running: hand the
   * signal on).
   */
  run<T>(task: Task<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const p = new PendingTask<T>(resolve, reject);
      const signal = this.join(p);
      let result: T | PromiseLike<T>;
      try {
        result = task(signal);
      } catch (err) {
        p.reject(err);
        return;
      }
      if (result !== null && typeof (result as PromiseLike<T>)?.then === 'function') {
        try {
          (result as PromiseLike<T>).then(p.resolve, p.reject);
        } catch (err) {
          p.reject(err); // a foreign thenable whose then() throws
        }
      } else p.resolve(result as T);
    });
  }
}
