/**
 * OutlierDetector is passive health checking as Envoy's outlier detection does it: every call result
 * counts; `consecutiveFailures` failures in a row eject an instance for `baseEjectionMs` × the number
 * of times it has been ejected, capped at `maxEjectionMs`. The count of ejections falls by one for
 * every `intervalMs` an instance stays in, so an instance that recovers for good is forgiven. Never
 * more than `maxEjectionPercent` of the instances are out at once: past that, failures are counted
 * but nobody else is ejected (the rest of the fleet must keep serving), and when the list shrinks
 * under the ejections, those ending soonest return early.
 *
 * Pure state machine with an injected clock: ejections end lazily when asked (`isEjected`,
 * `nextExpiry`), no timers. Ejected instances are also kept apart, so expiring ejections costs
 * O(ejected), not O(instances). Defaults: Envoy (5 consecutive 5xx, 30 s base, 300 s max, 10 s
 * interval), except 50 % max ejection (Envoy's default is 10 %): a small fleet of 4 may lose 2.
 */
import { systemClock, type Clock } from '../../core/clock.js';
import { Emitter } from '../../core/events.js';
import { clockOption, finite, integer, options as checkOptions, type OptionKeys } from '../../core/validate.js';

/** The keys of OutlierOptions, all of them: any other is refused (see `options`). */
const OUTLIER_DETECTOR_KEYS = {
  consecutiveFailures: true,
  baseEjectionMs: true,
  maxEjectionMs: true,
  intervalMs: true,
  maxEjectionPercent: true,
  clock: true,
} as const satisfies OptionKeys<OutlierOptions>;

/** OutlierOptions configures an OutlierDetector. */
export interface OutlierOptions {
  /** Failures in a row that eject an instance. Defaults to 5 (Envoy). */
  consecutiveFailures?: number;
  /** The first ejection's length, in ms; the n-th lasts n times as long. Defaults to 30 000 (Envoy). */
  baseEjectionMs?: number;
  /** The longest ejection, in ms. Defaults to 300 000 (Envoy). */
  maxEjectionMs?: number;
  /** Each this many ms in service forgive one past ejection. Defaults to 10 000 (Envoy's interval). */
  intervalMs?: number;
  /** At most this percentage of instances are ejected at once, in [0, 100]. Defaults to 50. */
  maxEjectionPercent?: number;
  /** Time source. Defaults to `systemClock`. */
  clock?: Clock;
}

/** Defaults for OutlierOptions. */
export const outlierDefaults = Object.freeze({
  consecutiveFailures: 5,
  baseEjectionMs: 30_000,
  maxEjectionMs: 300_000,
  intervalMs: 10_000,
  maxEjectionPercent: 50,
});

/** OutlierEvent tells that an instance was ejected (until `untilMs`) or returned. */
export interface OutlierEvent {
  readonly id: string;
  readonly ejected: boolean;
  /** When the ejection ends (clock time), for ejections. */
  readonly untilMs?: number;
  /** How many times the instance has been ejected (after forgiveness). */
  readonly times: number;
}

interface OutlierState {
  failures: number;
  /** Ejected until this time; −∞ when in service. */
  until: number;
  times: number;
  /** When the instance last came back (or joined), for forgiveness. */
  since: number;
}

/** OutlierDetector ejects instances that fail calls in a row. */
export class OutlierDetector {
  readonly consecutiveFailures: number;
  readonly baseEjectionMs: number;
  readonly maxEjectionMs: number;
  readonly intervalMs: number;
  readonly maxEjectionPercent: number;
  private readonly clock: Clock;
  private readonly states = new Map<string, OutlierState>();
  /** The ejected instances (until > −∞), by id. */
  private readonly out = new Map<string, OutlierState>();
  private readonly changes = new Emitter<OutlierEvent>();
  private ejections = 0;

  constructor(options?: OutlierOptions) {
    const o = checkOptions('OutlierDetector', options, OUTLIER_DETECTOR_KEYS);
    this.consecutiveFailures = integer('OutlierDetector', 'consecutiveFailures', o.consecutiveFailures ?? outlierDefaults.consecutiveFailures, 1, 1_000_000);
    this.baseEjectionMs = finite('OutlierDetector', 'baseEjectionMs', o.baseEjectionMs ?? outlierDefaults.baseEjectionMs, 1);
    this.maxEjectionMs = finite('OutlierDetector', 'maxEjectionMs', o.maxEjectionMs ?? outlierDefaults.maxEjectionMs, this.baseEjectionMs);
    this.intervalMs = finite('OutlierDetector', 'intervalMs', o.intervalMs ?? outlierDefaults.intervalMs, 1);
    this.maxEjectionPercent = finite('OutlierDetector', 'maxEjectionPercent', o.maxEjectionPercent ?? outlierDefaults.maxEjectionPercent, 0, 100);
    this.clock = clockOption('OutlierDetector', o.clock, systemClock);
  }

  /** onChange subscribes to ejections and returns; the disposer unsubscribes. */
  onChange(listener: (event: OutlierEvent) => void): () => void {
    return this.changes.on(listener);
  }

  /**
   * retain sets the instances tracked to `ids` (new ones join in service; state of the others is
   * dropped): O(instances). When one instance joins or leaves, `add` / `remove` do the same in O(1).
   */
  retain(ids: Iterable<string> | ReadonlySet<string> | ReadonlyMap<string, unknown>): void {
    const keep: ReadonlySet<string> | ReadonlyMap<string, unknown> = ids instanceof Set || ids instanceof Map ? ids : new Set(ids as Iterable<string>);
    for (const id of this.states.keys()) if (!keep.has(id)) this.forget(id);
    const now = this.clock.now();
    for (const id of keep.keys()) if (!this.states.has(id)) this.states.set(id, { failures: 0, until: -Infinity, times: 0, since: now });
    this.expire(now);
    this.enforceCap(now);
  }

  /** add starts tracking `id`, in service (no-op when tracked). */
  add(id: string): void {
    if (!this.states.has(id)) this.states.set(id, { failures: 0, until: -Infinity, times: 0, since: this.clock.now() });
  }

  /** remove stops tracking `id` and drops its state; ejections past the cap for the smaller list end early. */
  remove(id: string): void {
    if (!this.forget(id)) return;
    this.enforceCap(this.clock.now());
  }

  private forget(id: string): boolean {
    if (!this.states.delete(id)) return false;
    if (this.out.delete(id)) this.ejections--;
    return true;
  }

  /** enforceCap returns the ejections ending soonest while more are out than `maxEjectionPercent` allows. */
  private enforceCap(now: number): void {
    while (this.ejections > 0 && this.ejections > (this.states.size * this.maxEjectionPercent) / 100) {
      let soonest: [string, OutlierState] | undefined;
      for (const entry of this.out) if (soonest === undefined || entry[1].until < soonest[1].until) soonest = entry;
      this.restore(soonest![0], soonest![1], now);
    }
  }

  /**
   * record counts one call result for `id`; returns true when it changed whether `id` is ejected.
   * Results for instances not tracked (removed, or never retained) are ignored.
   */
  record(id: string, ok: boolean): boolean {
    const s = this.states.get(id);
    if (s === undefined) return false;
    if (ok) {
      s.failures = 0;
      return false;
    }
    const now = this.clock.now();
    if (s.until > now) return false; // results of calls that were in flight when it was ejected
    s.failures++;
    if (s.failures < this.consecutiveFailures) return false;
    this.expire(now);
    if (this.ejections + 1 > (this.states.size * this.maxEjectionPercent) / 100) return false;
    // Forgive one past ejection per interval spent in service (Envoy decrements its multiplier likewise).
    s.times = Math.max(0, s.times - Math.floor((now - s.since) / this.intervalMs)) + 1;
    s.until = now + Math.min(this.baseEjectionMs * s.times, this.maxEjectionMs);
    s.failures = 0;
    this.ejections++;
    this.out.set(id, s);
    this.changes.emit({ id, ejected: true, untilMs: s.until, times: s.times });
    return true;
  }

  /** isEjected tells whether `id` is ejected now. */
  isEjected(id: string, now = this.clock.now()): boolean {
    const s = this.states.get(id);
    return s !== undefined && s.until > now;
  }

  /** stats answers how many instances are tracked and how many are ejected now. */
  stats(): { instances: number; ejected: number } {
    this.expire(this.clock.now());
    return { instances: this.states.size, ejected: this.ejections };
  }

  /** timesEjected returns how many times `id` has been ejected (after forgiveness), or 0. */
  timesEjected(id: string): number {
    return this.states.get(id)?.times ?? 0;
  }

  /** nextExpiry is the clock time the next ejection ends (∞ when none is ejected). */
  nextExpiry(): number {
    let next = Infinity;
    for (const s of this.out.values()) if (s.until < next) next = s.until;
    return next;
  }

  /** expire returns instances whose ejection has ended; returns true when any did. */
  expire(now = this.clock.now()): boolean {
    if (this.ejections === 0) return false;
    let any = false;
    for (const [id, s] of this.out) {
      if (s.until <= now) {
        this.restore(id, s, now);
        any = true;
      }
    }
    return any;
  }

  private restore(id: string, s: OutlierState, now: number): void {
    s.until = -Infinity;
    s.since = now;
    s.failures = 0;
    this.ejections--;
    this.out.delete(id);
    this.changes.emit({ id, ejected: false, times: s.times });
  }
}
