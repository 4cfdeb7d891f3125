/**
 * RetryBudget caps the retries sent to one downstream at a share of the calls made to it, with a small
 * floor so that a quiet service can still retry (Finagle `RetryBudget`, Envoy retry budgets).
 *
 * Finagle's semantics: every call deposits 1, every retry withdraws `1 / percentCanRetry`, deposits
 * expire after `ttl`, and a reserve of `minRetriesPerSec × ttl seconds` retries is always there. So in
 * any trailing window of `windowMs`:
 *
 *     retries ≤ percentCanRetry × calls + minRetriesPerSec × windowMs / 1000
 *
 * With the defaults (10 s, 20 %, 10/s) that is 20 % of calls on top of 100 retries per 10 s. A retry
 * storm (every caller retrying 3 times against a failing downstream,
 * quadrupling its load) cannot happen: once the budget is spent, retries fail fast with
 * `RetryBudgetExhaustedError` and the downstream sees at most 1.2× its normal calls plus the floor.
 *
 * Share one budget per downstream (not per call site, not per instance): the point is to bound what all
 * of a process's retries to that downstream add up to.
 *
 * Counting is done in a core `RollingWindow`. To hold for every trailing window (not just
 * bucket-aligned ones) the check is conservative: retries are counted over `buckets + 1` buckets (which
 * cover at least `windowMs`), calls over the newest `buckets` (which cover at most `windowMs`).
 *
 * `recordCall()` is on every call's path, so it does not read the clock each time: calls are counted
 * in a plain integer and flushed into the window every 16 calls and on every `allowRetry()`. Flushed calls
 * are dated at the previous flush, which is never later than when they happened, so they leave the
 * window early rather than late: the budget can be a little smaller than exact, never larger.
 *
 * `reconfigure({ percentCanRetry, minRetriesPerSec, windowMs, buckets })` changes it live. A new share or
 * floor applies to the calls and retries already counted. A new window shape (`windowMs`, `buckets`) starts
 * a new window that carries what the old one counted, calls and retries, dated now: they expire a whole
 * new window later, so the balance an operator sees does not jump.
 */
import { systemClock, type Clock } from '../core/clock.js';
import { RollingWindow } from '../core/rolling-window.js';
import { clockOption, finite, integer, liveOptions, options as optionsObject, type OptionKeys } from '../core/validate.js';
import type { Reconfigurable } from '../core/reconfigurable.js';
import type { RetryBudgetOptions, RetryBudgetStats } from './types.js';
import type { MetricsDescription } from '../core/metrics-description.js';

/** The keys of RetryBudgetOptions, all of them: any other is refused (see `options`). */
const RETRY_BUDGET_KEYS = {
  windowMs: true,
  buckets: true,
  percentCanRetry: true,
  minRetriesPerSec: true,
  clock: true,
} as const satisfies OptionKeys<RetryBudgetOptions>;

export type { RetryBudgetOptions, RetryBudgetStats } from './types.js';

/** Calls counted between two clock reads in `recordCall` (one clock read costs about a bare call). */
const FLUSH_EVERY = 16;
const CALLS = 0;
const RETRIES = 1;

/** Defaults for RetryBudgetOptions (Finagle's `RetryBudget()` defaults). */
export const retryBudgetDefaults = Object.freeze({ windowMs: 10_000, buckets: 10, percentCanRetry: 0.2, minRetriesPerSec: 10 });

/** RetryBudget decides whether one more retry to a downstream is allowed. */
export class RetryBudget implements Reconfigurable<Omit<RetryBudgetOptions, 'clock'>> {
  readonly windowMs: number;
  readonly percentCanRetry: number;
  readonly minRetriesPerSec: number;
  /** The floor: retries always allowed per window. */
  readonly reserve: number;
  /** Buckets the window is counted in. */
  readonly buckets: number;
  private readonly clock: Clock;
  private window: RollingWindow;
  private pending = 0;
  private lastFlush: number;
  private refusedCount = 0;

  constructor(options?: RetryBudgetOptions) {
    const o = optionsObject('RetryBudget', options, RETRY_BUDGET_KEYS);
    const s = budgetSettings(o);
    this.windowMs = s.windowMs;
    this.buckets = s.buckets;
    this.percentCanRetry = s.percentCanRetry;
    this.minRetriesPerSec = s.minRetriesPerSec;
    this.clock = clockOption('RetryBudget', o.clock, systemClock);
    this.reserve = (this.minRetriesPerSec * this.windowMs) / 1000;
    this.window = budgetWindow(s, this.clock);
    this.lastFlush = this.clock.now();
  }

  /** options answers the options this budget runs now: those `reconfigure` may change. */
  options(): Required<Omit<RetryBudgetOptions, 'clock'>> {
    return { windowMs: this.windowMs, buckets: this.buckets, percentCanRetry: this.percentCanRetry, minRetriesPerSec: this.minRetriesPerSec };
  }

  /**
   * reconfigure lays `partial` over `options()` and applies it, validated as the constructor validates it
   * (the same errors; `clock` refused: fixed at construction), all or, when it throws, none. What it keeps
   * is in the file comment: the counts, carried into a new window when its shape changes.
   */
  reconfigure(partial: Partial<Omit<RetryBudgetOptions, 'clock'>>): void {
    const p = liveOptions('RetryBudget', partial as RetryBudgetOptions, RETRY_BUDGET_KEYS, ['clock']);
    const s = budgetSettings({ ...this.options(), ...p });
    const now = this.clock.now();
    if (s.windowMs !== this.windowMs || s.buckets !== this.buckets) {
      this.flush(now);
      const calls = this.countedCalls(now);
      const retries = this.window.sum(RETRIES, now);
      const window = budgetWindow(s, this.clock);
      window.add(CALLS, calls, now);
      window.add(RETRIES, retries, now);
      this.window = window;
    }
    const self = this as { -readonly [K in 'windowMs' | 'buckets' | 'percentCanRetry' | 'minRetriesPerSec' | 'reserve']: number };
    self.windowMs = s.windowMs;
    self.buckets = s.buckets;
    self.percentCanRetry = s.percentCanRetry;
    self.minRetriesPerSec = s.minRetriesPerSec;
    self.reserve = (s.minRetriesPerSec * s.windowMs) / 1000;
  }

  /** recordCall counts one call (not a retry) to the downstream: Finagle's `deposit()`. Call it once per logical call. */
  recordCall(): void {
    if (++this.pending >= FLUSH_EVERY) this.flush(this.clock.now());
  }

  /**
   * allowRetry answers whether one more retry is within the budget, and if so counts it: Finagle's
   * `tryWithdraw()`. A `false` means: do not retry, fail with the error you have.
   */
  allowRetry(): boolean {
    const now = this.clock.now();
    this.flush(now);
    if (this.available(now) >= 1) {
      this.window.add(RETRIES, 1, now);
      return true;
    }
    this.refusedCount++;
    return false;
  }

  /** describeMetrics answers the budget's families (`retry_budget_…`), read from its stats at scrape time. */
  describeMetrics(): MetricsDescription {
    return {
      kind: 'RetryBudget',
      families: [
        { name: 'retry_budget_balance', type: 'gauge', help: 'Retries a RetryBudget would allow right now.', labelNames: [] },
        { name: 'retry_budget_window_calls', type: 'gauge', help: 'Calls counted in the budget window.', labelNames: [] },
        { name: 'retry_budget_window_retries', type: 'gauge', help: 'Retries allowed in the budget window.', labelNames: [] },
        { name: 'retry_budget_refused_total', type: 'counter', help: 'Retries a RetryBudget refused.', labelNames: [] },
      ],
      collect: (emit) => {
        const s = this.stats();
        emit('retry_budget_balance', {}, s.balance);
        emit('retry_budget_window_calls', {}, s.calls);
        emit('retry_budget_window_retries', {}, s.retries);
        emit('retry_budget_refused_total', {}, s.refused);
      },
    };
  }

  /** stats answers a fresh snapshot of the current window. */
  stats(): RetryBudgetStats {
    const now = this.clock.now();
    this.flush(now);
    return {
      calls: this.countedCalls(now),
      retries: this.window.sum(RETRIES, now),
      balance: Math.max(0, Math.floor(this.available(now) + 1e-9)),
      refused: this.refusedCount,
    };
  }

  private available(now: number): number {
    return this.percentCanRetry * this.countedCalls(now) + this.reserve - this.window.sum(RETRIES, now) + 1e-9;
  }

  /** Calls in the newest `buckets` buckets: the window holds one more (the oldest) for counting retries. */
  private countedCalls(now: number): number {
    return this.window.sum(CALLS, now) - this.window.reduce(CALLS, -1, oldest, now);
  }

  private flush(now: number): void {
    if (this.pending > 0) {
      // Date the calls at the previous flush: never later than they happened (see the file comment).
      this.window.add(CALLS, this.pending, this.lastFlush);
      this.pending = 0;
    }
    this.lastFlush = now;
  }
}

/** budgetSettings validates the options the constructor and `reconfigure` share, defaults filled in. */
function budgetSettings(o: Partial<RetryBudgetOptions>): Required<Omit<RetryBudgetOptions, 'clock'>> {
  const windowMs = finite('RetryBudget', 'windowMs', o.windowMs ?? retryBudgetDefaults.windowMs, 1, 3_600_000);
  const buckets = integer('RetryBudget', 'buckets', o.buckets ?? retryBudgetDefaults.buckets, 1, 1_000);
  const percentCanRetry = finite('RetryBudget', 'percentCanRetry', o.percentCanRetry ?? retryBudgetDefaults.percentCanRetry, 0, 1_000);
  const minRetriesPerSec = finite('RetryBudget', 'minRetriesPerSec', o.minRetriesPerSec ?? retryBudgetDefaults.minRetriesPerSec, 0, 1e9);
  return { windowMs, buckets, percentCanRetry, minRetriesPerSec };
}

/** budgetWindow is the window a budget counts in: one bucket more than `buckets` (see the file comment). */
function budgetWindow(s: { windowMs: number; buckets: number }, clock: Clock): RollingWindow {
  return new RollingWindow({ windowMs: (s.windowMs / s.buckets) * (s.buckets + 1), buckets: s.buckets + 1, channels: 2, clock });
}

/** The value of the oldest bucket (reduce visits oldest first). */
function oldest(acc: number, value: number): number {
  return acc < 0 ? value : acc;
}
