/**
 * Clock: the one source of time for every time-based part of bulwark — reading it and waiting on it.
 * Milliseconds everywhere; the default clock is monotonic (`performance.now()`), so a wall-clock
 * jump never opens a breaker or refills a bucket. Every timer in the library (backoff, probes,
 * refreshes, keep-alives, deadlines) is set through the clock it was given, so a `ManualClock` drives
 * all of them in tests: `advance()` fires what falls due, in order, and nothing sleeps.
 */
import { performance } from 'node:perf_hooks';

/**
 * TimerHandle is what `Clock.setTimeout` / `Clock.setInterval` return: pass it to `clock.clearTimeout`.
 * `unref()` lets the process exit while the timer is pending (Node's semantics; a no-op on a ManualClock).
 */
export interface TimerHandle {
  ref(): TimerHandle;
  unref(): TimerHandle;
  hasRef(): boolean;
}

/** Clock answers the current time in milliseconds and runs timers on that time. Only differences between readings matter. */
export interface Clock {
  /** now answers the current time in milliseconds. */
  now(): number;
  /** setTimeout calls `fn` once, `ms` milliseconds from now (clamped to [1, 2³¹ − 1] as Node does). */
  setTimeout(fn: () => void, ms: number): TimerHandle;
  /** setInterval calls `fn` every `ms` milliseconds until cleared. */
  setInterval(fn: () => void, ms: number): TimerHandle;
  /** clearTimeout cancels a timer set by `setTimeout` or `setInterval`; undefined and fired timers are ignored. */
  clearTimeout(handle: TimerHandle | undefined): void;
}

/** Timers cannot wait longer than 2³¹ − 1 ms (Node turns larger delays into 1 ms). */
export const MAX_TIMER_MS = 2_147_483_647;

function timerMs(ms: number): number {
  return ms >= 1 ? Math.min(ms, MAX_TIMER_MS) : 1; // NaN, negatives and < 1 become 1, as in Node
}

/** systemClock is the default clock: monotonic milliseconds since process start, Node's own timers. */
export const systemClock: Clock = Object.freeze({
  now: () => performance.now(),
  setTimeout: (fn: () => void, ms: number): TimerHandle => setTimeout(fn, timerMs(ms)),
  setInterval: (fn: () => void, ms: number): TimerHandle => setInterval(fn, timerMs(ms)),
  clearTimeout: (handle: TimerHandle | undefined): void => clearTimeout(handle as NodeJS.Timeout | undefined),
});

/**
 * wallClock reads wall time (`Date.now()`, ms since 1970) with Node's timers: for the few parts whose
 * readings must mean the same on another machine (signed peer requests, period windows aligned to UTC).
 * It can jump with the system time; everything else uses the monotonic `systemClock`.
 */
export const wallClock: Clock = Object.freeze({
  now: () => Date.now(),
  setTimeout: systemClock.setTimeout,
  setInterval: systemClock.setInterval,
  clearTimeout: systemClock.clearTimeout,
});

/** A timer of a ManualClock: due time, order of setting (ties fire in that order), period for intervals. */
class ManualTimer implements TimerHandle {
  /** Index in the clock's heap, or -1 when not pending. */
  index = -1;
  private referenced = true;
  constructor(
    readonly fn: () => void,
    public due: number,
    public seq: number,
    readonly periodMs: number | undefined,
  ) {}
  ref(): this {
    this.referenced = true;
    return this;
  }
  unref(): this {
    this.referenced = false;
    return this;
  }
  hasRef(): boolean {
    return this.referenced;
  }
}

/**
 * ManualClock is a clock that moves only when told to; tests drive time with it instead of sleeping.
 * Its timers fire inside `advance()` / `set()` (synchronously) or `advanceAsync()` (letting promise
 * callbacks and I/O run between timers), in due-time order, with the clock reading each timer's due
 * time while it runs. A timer set while others fire runs in the same advance when it falls due in it.
 */
export class ManualClock implements Clock {
  private t: number;
  private seq = 0;
  /** Pending timers as a binary min-heap on (due, seq). */
  private readonly heap: ManualTimer[] = [];

  /** ManualClock starts at `start` milliseconds. Defaults to 0. */
  constructor(start = 0) {
    if (!Number.isFinite(start)) throw new RangeError(`ManualClock: start must be a finite number, got ${String(start)}`);
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    return this.schedule(fn, timerMs(ms), undefined);
  }

  setInterval(fn: () => void, ms: number): TimerHandle {
    const period = timerMs(ms);
    return this.schedule(fn, period, period);
  }

  clearTimeout(handle: TimerHandle | undefined): void {
    if (!(handle instanceof ManualTimer) || handle.index < 0 || this.heap[handle.index] !== handle) return;
    this.removeAt(handle.index);
  }

  /** pendingTimers answers how many timers are set and not yet fired or cleared. */
  get pendingTimers(): number {
    return this.heap.length;
  }

  /** nextTimerAt answers the due time of the earliest pending timer, or undefined when none is set. */
  nextTimerAt(): number | undefined {
    return this.heap[0]?.due;
  }

  /** advance moves time forward by `ms` (≥ 0), firing the timers that fall due on the way, and returns the new time. */
  advance(ms: number): number {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`ManualClock.advance: ms must be a finite number ≥ 0, got ${String(ms)}`);
    const target = this.t + ms;
    while (this.fireNext(target)) {
      // each fired timer may set more; the loop picks them up in order
    }
    this.t = target;
    return this.t;
  }

  /**
   * advanceAsync is `advance` that lets pending promise callbacks and I/O run before each timer and
   * after the last: what code with `await` between its timers (a backoff loop, a probe) needs.
   */
  async advanceAsync(ms: number): Promise<number> {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`ManualClock.advanceAsync: ms must be a finite number ≥ 0, got ${String(ms)}`);
    const target = this.t + ms;
    await settle();
    while (this.fireNext(target)) await settle();
    this.t = target;
    await settle();
    return this.t;
  }

  /** set moves time to `ms`, which may not be earlier than now (clocks here are monotonic), firing timers on the way. */
  set(ms: number): void {
    if (!Number.isFinite(ms) || ms < this.t) throw new RangeError(`ManualClock.set: ms must be finite and ≥ now (${this.t}), got ${String(ms)}`);
    this.advance(ms - this.t);
  }

  /** Fires the earliest timer due at or before `target`; false when there is none. */
  private fireNext(target: number): boolean {
    const first = this.heap[0];
    if (first === undefined || first.due > target) return false;
    this.removeAt(0);
    if (first.due > this.t) this.t = first.due;
    if (first.periodMs !== undefined) {
      first.due += first.periodMs;
      first.seq = this.seq++;
      this.push(first);
    }
    first.fn();
    return true;
  }

  private schedule(fn: () => void, ms: number, periodMs: number | undefined): ManualTimer {
    const timer = new ManualTimer(fn, this.t + ms, this.seq++, periodMs);
    this.push(timer);
    return timer;
  }

  private push(timer: ManualTimer): void {
    timer.index = this.heap.length;
    this.heap.push(timer);
    this.up(timer.index);
  }

  private removeAt(i: number): void {
    const heap = this.heap;
    const removed = heap[i]!;
    const last = heap.pop()!;
    removed.index = -1;
    if (last !== removed) {
      heap[i] = last;
      last.index = i;
      this.down(i);
      this.up(last.index);
    }
  }

  private less(a: ManualTimer, b: ManualTimer): boolean {
    return a.due < b.due || (a.due === b.due && a.seq < b.seq);
  }

  private up(i: number): void {
    const heap = this.heap;
    const x = heap[i]!;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const parent = heap[p]!;
      if (!this.less(x, parent)) break;
      heap[i] = parent;
      parent.index = i;
      i = p;
    }
    heap[i] = x;
    x.index = i;
  }

  private down(i: number): void {
    const heap = this.heap;
    const n = heap.length;
    const x = heap[i]!;
    for (;;) {
      let c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && this.less(heap[c + 1]!, heap[c]!)) c++;
      const child = heap[c]!;
      if (!this.less(child, x)) break;
      heap[i] = child;
      child.index = i;
      i = c;
    }
    heap[i] = x;
    x.index = i;
  }
}

/** Lets promise callbacks and pending I/O callbacks run (one turn of the event loop). */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** isClock tells whether `value` has the four methods of a Clock. */
export function isClock(value: unknown): value is Clock {
  if (value === null || typeof value !== 'object') return false;
  const c = value as Partial<Record<keyof Clock, unknown>>;
  return typeof c.now === 'function' && typeof c.setTimeout === 'function' && typeof c.setInterval === 'function' && typeof c.clearTimeout === 'function';
}
