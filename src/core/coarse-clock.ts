/**
 * CoarseClock: a Clock whose `now()` is usually a field read, for hot paths that need the time on
 * every call but cannot pay for a clock read each time.
 *
 * Why: one `performance.now()` costs ~45 ns, nearly a whole bare `await fn()` (~55 ns); a breaker
 * needs the time on every call (which bucket to count in, whether an open period is over). The
 * cached time is refreshed from the precise `source`
 *   - by one shared timer every `resolutionMs` (unref'd; it stops itself after `idleStopMs` without
 *     reads and restarts on the next read), so an idle or lightly used process sees fresh time, and
 *   - on every `refreshEvery`-th read, so a busy stretch that keeps the event loop from running timers
 *     (a long synchronous loop, a long chain of microtasks) still sees time move.
 * The cost of the trade: a reading can lag the source by up to about `resolutionMs` (or by one
 * macrotask, when a single task runs longer), so durations measured with it (slow-call detection) are
 * accurate to about ±`resolutionMs`. Readings never go backwards.
 *
 * Breakers and the registry cache use the process-wide default (`getDefaultCoarseClock()`, made on
 * first use, replaceable with `setDefaultCoarseClock()`) unless given a clock; pass `clock: systemClock`
 * for a precise reading per call, or a `ManualClock` in tests (read on every call, exactly). The refresh
 * timer runs on the source clock, so a CoarseClock over a ManualClock is driven by `advance()` too.
 */
import { systemClock, type Clock, type TimerHandle } from './clock.js';
import { clockOption, integer, options as optionsObject, positive, type OptionKeys } from './validate.js';

/** The keys of CoarseClockOptions, all of them: any other is refused (see `options`). */
const COARSE_CLOCK_KEYS = {
  source: true,
  resolutionMs: true,
  refreshEvery: true,
  idleStopMs: true,
} as const satisfies OptionKeys<CoarseClockOptions>;

/** CoarseClockOptions configures a CoarseClock. */
export interface CoarseClockOptions {
  /** The precise clock the cached time is read from. Defaults to the monotonic system clock. */
  source?: Clock;
  /** How often the shared timer refreshes the cached time, in milliseconds. Defaults to 5. */
  resolutionMs?: number;
  /** Every this many reads, read the source directly (time moves even when timers cannot run). Defaults to 256. */
  refreshEvery?: number;
  /** Stop the timer after this many milliseconds without reads; the next read restarts it. Defaults to 1 000. */
  idleStopMs?: number;
}

/** Defaults for CoarseClockOptions. */
export const coarseClockDefaults = Object.freeze({ resolutionMs: 5, refreshEvery: 256, idleStopMs: 1_000 });

/** CoarseClock caches the time of a precise clock; see the module comment for the trade-off. */
export class CoarseClock implements Clock {
  readonly resolutionMs: number;
  readonly refreshEvery: number;
  readonly idleStopMs: number;
  private readonly source: Clock;
  private t: number;
  /** Reads since the last direct read of the source; compared with `next`. */
  private reads = 0;
  /** The read count at which the next read goes to the source (0 while the timer is stopped). */
  private next = 0;
  /** Reads seen at the last tick, and ticks in a row without reads. */
  private readsAtTick = 0;
  private idleTicks = 0;
  private timer: TimerHandle | undefined;

  constructor(options?: CoarseClockOptions) {
    const o = optionsObject('CoarseClock', options, COARSE_CLOCK_KEYS);
    this.source = clockOption('CoarseClock', o.source, systemClock);
    this.resolutionMs = positive('CoarseClock', 'resolutionMs', o.resolutionMs ?? coarseClockDefaults.resolutionMs);
    this.refreshEvery = integer('CoarseClock', 'refreshEvery', o.refreshEvery ?? coarseClockDefaults.refreshEvery, 1);
    this.idleStopMs = positive('CoarseClock', 'idleStopMs', o.idleStopMs ?? coarseClockDefaults.idleStopMs);
    this.t = this.source.now();
  }

  /** now answers the cached time, reading the source every `refreshEvery` reads or when the timer is stopped. */
  now(): number {
    if (++this.reads >= this.next) return this.refresh();
    return this.t;
  }

  /** running is true while the refresh timer runs. */
  get running(): boolean {
    return this.timer !== undefined;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    return this.source.setTimeout(fn, ms);
  }

  setInterval(fn: () => void, ms: number): TimerHandle {
    return this.source.setInterval(fn, ms);
  }

  clearTimeout(handle: TimerHandle | undefined): void {
    this.source.clearTimeout(handle);
  }

  /** close stops the refresh timer; the next read starts it again. */
  async close(): Promise<void> {
    this.stop();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private refresh(): number {
    const t = this.source.now();
    if (t > this.t) this.t = t;
    this.reads = 0; // counts stay small integers however long the process runs
    this.next = this.refreshEvery;
    if (this.timer === undefined) this.start();
    return this.t;
  }

  private start(): void {
    this.idleTicks = 0;
    this.readsAtTick = this.reads;
    this.timer = this.source.setInterval(this.tick, this.resolutionMs);
    this.timer.unref();
  }

  private stop(): void {
    this.source.clearTimeout(this.timer);
    this.timer = undefined;
    this.next = 0; // the next read goes to the source and restarts the timer
  }

  private readonly tick = (): void => {
    const t = this.source.now();
    if (t > this.t) this.t = t;
    if (this.reads === this.readsAtTick) {
      if (++this.idleTicks * this.resolutionMs >= this.idleStopMs) this.stop();
    } else {
      this.idleTicks = 0;
      this.readsAtTick = this.reads;
    }
  };
}

let defaultCoarseClock: CoarseClock | undefined;

/**
 * getDefaultCoarseClock answers the process-wide CoarseClock over the system clock (made on first use):
 * the default clock of the breakers and the registry cache.
 */
export function getDefaultCoarseClock(): CoarseClock {
  return (defaultCoarseClock ??= new CoarseClock());
}

/**
 * setDefaultCoarseClock replaces the process-wide CoarseClock for parts constructed from now on (parts
 * already made keep theirs); `undefined` goes back to a fresh one made on next use. The old one is not closed.
 */
export function setDefaultCoarseClock(clock: CoarseClock | undefined): void {
  if (clock !== undefined && !(clock instanceof CoarseClock)) throw new TypeError('setDefaultCoarseClock: expected a CoarseClock or undefined');
  defaultCoarseClock = clock;
}
