/**
 * AdaptiveShedder drops work while the process is overloaded: go-zero's `core/load` shedder, with
 * the event loop's load instead of CPU% (one JS thread can be saturated at 50 % of a 2-core box).
 *
 * A call is dropped only when both hold (go-zero's rule):
 * 1. the process is overloaded — event-loop utilisation above `utilizationThreshold` or event-loop
 *    delay p99 above `delayP99Ms` — or it dropped a call less than `coolOffMs` ago (it is "still hot");
 * 2. more calls are in flight than the process has shown it can finish: in-flight (now, and its
 *    moving average) above maxPass × minRt, where maxPass is the most calls that passed in one bucket
 *    and minRt the lowest bucket average response time, over the rolling window (current bucket left out).
 * So a busy loop with few calls in flight does not drop, and a burst of calls on an idle loop does not.
 *
 * `admit()` answers an AdmissionToken whose `success()` / `failure()` / `release()` ends the call, or
 * throws OverloadedError.
 *
 * `reconfigure({ enabled, utilizationThreshold, delayP99Ms, coolOffMs, windowMs, buckets })` changes it
 * live (`load` and `clock` are fixed at construction). It keeps the calls in flight and their average, and
 * the time of the last drop; a new window shape (`windowMs`, `buckets`) starts an empty window, as a new
 * shedder does. `enabled: false` turns it off: it admits every call (still counting them in flight and
 * feeding the window, so that turning it on again finds its history), at the cost of a running one.
 */
import type { AdmissionToken } from '../core/admission.js';
import { systemClock, type Clock } from '../core/clock.js';
import { shedderDropChannel } from '../core/diagnostics.js';
import { OverloadedError, withoutStack } from '../core/errors.js';
import { neverAborted, type ExecuteOptions, type Guard, type Task } from '../core/guard.js';
import type { MetricsDescription } from '../core/metrics-description.js';
import { throwIfAborted } from '../core/abort.js';
import { RollingWindow } from '../core/rolling-window.js';
import { clockOption, finite, fn, integer, liveOptions, options as optionsOf, positive, ratio, type OptionKeys } from '../core/validate.js';
import type { Reconfigurable } from '../core/reconfigurable.js';
import { EventLoopLoad, type LoadSample } from './event-loop-load.js';

/** The keys of AdaptiveShedderOptions, all of them: any other is refused (see `options`). */
const ADAPTIVE_SHEDDER_KEYS = {
  enabled: true,
  utilizationThreshold: true,
  delayP99Ms: true,
  coolOffMs: true,
  windowMs: true,
  buckets: true,
  load: true,
  clock: true,
} as const satisfies OptionKeys<AdaptiveShedderOptions>;

/** AdaptiveShedderLiveOptions are the options `AdaptiveShedder.reconfigure` changes and `options()` answers. */
export type AdaptiveShedderLiveOptions = Omit<AdaptiveShedderOptions, 'load' | 'clock'>;

/** AdaptiveShedderOptions configures an AdaptiveShedder. */
export interface AdaptiveShedderOptions {
  /** Whether it drops at all: false admits every call (an operator's off switch). Defaults to true. */
  enabled?: boolean;
  /** Event-loop utilisation (0–1] above which the process counts as overloaded (go-zero: CPU 90 %). Defaults to 0.9. */
  utilizationThreshold?: number;
  /** Event-loop delay p99 in ms above which the process counts as overloaded; Infinity turns it off. Defaults to 100. */
  delayP99Ms?: number;
  /** Milliseconds after a drop during which calls are still checked against in-flight (go-zero: 1 s). Defaults to 1 000. */
  coolOffMs?: number;
  /** The rolling window's length in ms (go-zero: 5 s). Defaults to 5 000. */
  windowMs?: number;
  /** Buckets in the window (go-zero: 50). Defaults to 50. */
  buckets?: number;
  /** The load signal: a function answering the latest LoadSample. Defaults to sampling this event loop every 250 ms (on `clock`). */
  load?: () => LoadSample;
  /** The time source, and the clock of the default load sampler's timer. Defaults to the monotonic system clock. */
  clock?: Clock;
}

/** Defaults for AdaptiveShedderOptions. */
export const adaptiveShedderDefaults = Object.freeze({
  enabled: true,
  utilizationThreshold: 0.9,
  delayP99Ms: 100,
  coolOffMs: 1_000,
  windowMs: 5_000,
  buckets: 50,
});

/** AdaptiveShedderStats is a snapshot of the shedder's state. */
export interface AdaptiveShedderStats {
  readonly inFlight: number;
  readonly avgInFlight: number;
  /** maxPass × minRt: the in-flight count above which an overloaded process drops. */
  readonly maxInFlight: number;
  readonly minRtMs: number;
  readonly maxPassPerBucket: number;
  readonly overloaded: boolean;
  readonly passed: number;
  readonly dropped: number;
  readonly load: LoadSample;
}

/** go-zero: an in-flight moving average that mostly keeps its past (beta 0.9). */
const FLYING_BETA = 0.9;
/** go-zero: the min response time assumed before any call finished. */
const DEFAULT_MIN_RT_MS = 1_000;

const PASS = 0;
const RT = 1;

/** AdaptiveShedder drops calls while the event loop is overloaded and more calls are in flight than it can take. */
export class AdaptiveShedder implements Guard, Reconfigurable<AdaptiveShedderLiveOptions> {
  readonly enabled: boolean;
  readonly utilizationThreshold: number;
  readonly delayP99Ms: number;
  readonly coolOffMs: number;
  /** The thresholds `admit()` applies: the options', or, while disabled, ones no load reaches (no per-call check of `enabled`). */
  private utilizationLimit: number;
  private delayLimitMs: number;
  private coolOffLimitMs: number;
  private readonly clock: Clock;
  private window: RollingWindow;
  private readonly load: () => LoadSample;
  private readonly ownLoad: EventLoopLoad | undefined;
  private scratch: Float64Array;
  private flying = 0;
  private avgFlying = 0;
  private dropTime = -Infinity;
  private passed = 0;
  private dropped = 0;

  constructor(options?: AdaptiveShedderOptions) {
    const o = optionsOf('AdaptiveShedder', options, ADAPTIVE_SHEDDER_KEYS);
    const s = shedderSettings(o);
    this.enabled = s.enabled;
    this.utilizationThreshold = s.utilizationThreshold;
    this.delayP99Ms = s.delayP99Ms;
    this.coolOffMs = s.coolOffMs;
    this.utilizationLimit = s.enabled ? s.utilizationThreshold : Infinity;
    this.delayLimitMs = s.enabled ? s.delayP99Ms : Infinity;
    this.coolOffLimitMs = s.enabled ? s.coolOffMs : 0;
    this.clock = clockOption('AdaptiveShedder', o.clock, systemClock);
    this.window = new RollingWindow({ windowMs: s.windowMs, buckets: s.buckets, channels: 2, clock: this.clock });
    this.scratch = new Float64Array(s.buckets);
    if (o.load !== undefined) {
      this.load = fn<() => LoadSample>('AdaptiveShedder', 'load', o.load);
      this.ownLoad = undefined;
    } else {
      const own = new EventLoopLoad({ clock: this.clock });
      this.ownLoad = own;
      this.load = () => own.read();
    }
  }

  /** options answers the options this shedder runs now: those `reconfigure` may change. */
  options(): Required<AdaptiveShedderLiveOptions> {
    return {
      enabled: this.enabled,
      utilizationThreshold: this.utilizationThreshold,
      delayP99Ms: this.delayP99Ms,
      coolOffMs: this.coolOffMs,
      windowMs: this.window.windowMs,
      buckets: this.window.buckets,
    };
  }

  /**
   * reconfigure lays `partial` over `options()` and applies it, validated as the constructor validates it
   * (the same errors; `load` and `clock` refused: fixed at construction), all or, when it throws, none.
   * What it keeps is in the file comment.
   */
  reconfigure(partial: Partial<AdaptiveShedderLiveOptions>): void {
    const p = liveOptions('AdaptiveShedder', partial as AdaptiveShedderOptions, ADAPTIVE_SHEDDER_KEYS, ['load', 'clock']);
    const s = shedderSettings({ ...this.options(), ...p });
    if (s.windowMs !== this.window.windowMs || s.buckets !== this.window.buckets) {
      this.window = new RollingWindow({ windowMs: s.windowMs, buckets: s.buckets, channels: 2, clock: this.clock });
      this.scratch = new Float64Array(s.buckets);
    }
    const self = this as { -readonly [K in 'enabled' | 'utilizationThreshold' | 'delayP99Ms' | 'coolOffMs']: AdaptiveShedder[K] };
    self.enabled = s.enabled;
    self.utilizationThreshold = s.utilizationThreshold;
    self.delayP99Ms = s.delayP99Ms;
    self.coolOffMs = s.coolOffMs;
    this.utilizationLimit = s.enabled ? s.utilizationThreshold : Infinity;
    this.delayLimitMs = s.enabled ? s.delayP99Ms : Infinity;
    this.coolOffLimitMs = s.enabled ? s.coolOffMs : 0;
  }

  /**
   * admit lets in a call and answers its token, or throws OverloadedError (code ERR_OVERLOADED).
   * `success()` feeds the response time in; `failure()` and `release()` only free the slot.
   */
  admit(): AdmissionToken {
    const now = this.clock.now();
    if (this.shouldDrop(now)) {
      this.dropTime = now;
      this.dropped++;
      if (shedderDropChannel.hasSubscribers) shedderDropChannel.publish({ source: this, inFlight: this.flying, avgInFlight: this.avgFlying });
      throw withoutStack(() => new OverloadedError('service overloaded: call shed'));
    }
    this.addFlying(1);
    return new Token(this, now);
  }

  /** execute runs `fn` when allowed: a resolved call is a success, a thrown or rejected one a failure. */
  async execute<T>(task: Task<T>, options?: ExecuteOptions): Promise<T> {
    const signal = options?.signal;
    throwIfAborted(signal);
    const token = this.admit();
    try {
      const value = await task(signal ?? neverAborted);
      token.success();
      return value;
    } catch (err) {
      token.failure();
      throw err;
    }
  }

  /**
   * describeMetrics answers the shedder's families (`shedder_decisions_total`, `shedder_in_flight`,
   * `shedder_max_in_flight`, `shedder_min_response_seconds`, `shedder_overloaded`, the event-loop load
   * it reads), read from its stats at scrape time.
   */
  describeMetrics(): MetricsDescription {
    return {
      kind: 'AdaptiveShedder',
      families: [
        { name: 'shedder_decisions_total', type: 'counter', help: 'Decisions of an AdaptiveShedder, by result: passed or dropped.', labelNames: ['result'] },
        { name: 'shedder_in_flight', type: 'gauge', help: 'Calls an AdaptiveShedder has in flight now.', labelNames: [] },
        {
          name: 'shedder_max_in_flight',
          type: 'gauge',
          help: 'In-flight calls above which an overloaded process drops (max pass × min response time).',
          labelNames: [],
        },
        { name: 'shedder_min_response_seconds', type: 'gauge', help: 'Shortest response time an AdaptiveShedder has seen over its window.', labelNames: [] },
        { name: 'shedder_overloaded', type: 'gauge', help: '1 while the AdaptiveShedder finds the process overloaded.', labelNames: [] },
        {
          name: 'shedder_event_loop_utilization',
          type: 'gauge',
          help: 'Share of the last load sample the event loop was busy (0..1), as the AdaptiveShedder reads it.',
          labelNames: [],
        },
        {
          name: 'shedder_event_loop_delay_p99_seconds',
          type: 'gauge',
          help: 'p99 of event-loop delay over the last load sample, as the AdaptiveShedder reads it.',
          labelNames: [],
        },
      ],
      collect: (emit) => {
        const s = this.stats();
        emit('shedder_decisions_total', { result: 'passed' }, s.passed);
        emit('shedder_decisions_total', { result: 'dropped' }, s.dropped);
        emit('shedder_in_flight', {}, s.inFlight);
        emit('shedder_max_in_flight', {}, s.maxInFlight);
        emit('shedder_min_response_seconds', {}, s.minRtMs / 1000);
        emit('shedder_overloaded', {}, s.overloaded ? 1 : 0);
        emit('shedder_event_loop_utilization', {}, s.load.utilization);
        emit('shedder_event_loop_delay_p99_seconds', {}, s.load.delayP99Ms / 1000);
      },
    };
  }

  /** stats is a snapshot of in-flight, thresholds and counters. */
  stats(): AdaptiveShedderStats {
    const now = this.clock.now();
    const { minRt, maxPass } = this.history(now);
    return {
      inFlight: this.flying,
      avgInFlight: this.avgFlying,
      maxInFlight: this.maxFlight(minRt, maxPass),
      minRtMs: minRt,
      maxPassPerBucket: maxPass,
      overloaded: this.overloaded(),
      passed: this.passed,
      dropped: this.dropped,
      load: this.load(),
    };
  }

  /** close stops sampling the event loop (when the shedder samples it itself). Idempotent. */
  async close(): Promise<void> {
    await this.ownLoad?.close();
  }

  /** Symbol.asyncDispose closes the shedder (`await using shedder = new AdaptiveShedder()`). */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** @internal a token ended. */
  finish(start: number, ok: boolean): void {
    this.addFlying(-1);
    if (!ok) return;
    const now = this.clock.now();
    this.passed++;
    this.window.add(PASS, 1, now);
    this.window.add(RT, Math.max(0, now - start), now);
  }

  private shouldDrop(now: number): boolean {
    if (!this.overloaded() && !this.stillHot(now)) return false;
    const { minRt, maxPass } = this.history(now);
    const max = this.maxFlight(minRt, maxPass);
    return this.flying > max && this.avgFlying > max;
  }

  private overloaded(): boolean {
    const s = this.load();
    return s.utilization > this.utilizationLimit || s.delayP99Ms > this.delayLimitMs;
  }

  private stillHot(now: number): boolean {
    return now - this.dropTime < this.coolOffLimitMs;
  }

  private maxFlight(minRt: number, maxPass: number): number {
    // maxPass per bucket × minRt / bucketMs = the most calls per second × the fastest call, in calls.
    return Math.max(1, (maxPass * minRt) / this.window.bucketMs);
  }

  /** minRt (lowest bucket average) and maxPass (most passes in a bucket), the current bucket left out. */
  private history(now: number): { minRt: number; maxPass: number } {
    const passes = this.scratch;
    this.window.reduce(PASS, 0, (_, v, age) => ((passes[age] = v), 0), now);
    let maxPass = 1;
    const minRt = this.window.reduce(
      RT,
      DEFAULT_MIN_RT_MS,
      (min, sum, age) => {
        const n = passes[age]!;
        if (age === 0 || n <= 0) return min;
        if (n > maxPass) maxPass = n;
        const avg = sum / n;
        return avg < min ? avg : min;
      },
      now,
    );
    return { minRt, maxPass };
  }

  private addFlying(delta: number): void {
    this.flying += delta;
    if (delta < 0) this.avgFlying = this.avgFlying * FLYING_BETA + this.flying * (1 - FLYING_BETA);
  }
}

/** shedderSettings validates the options the constructor and `reconfigure` share, defaults filled in. */
function shedderSettings(o: Partial<AdaptiveShedderOptions>): Required<AdaptiveShedderLiveOptions> {
  const enabled = o.enabled ?? adaptiveShedderDefaults.enabled;
  if (typeof enabled !== 'boolean') throw new TypeError(`AdaptiveShedder: enabled must be a boolean, got ${typeof enabled}`);
  const utilizationThreshold = ratio('AdaptiveShedder', 'utilizationThreshold', o.utilizationThreshold ?? adaptiveShedderDefaults.utilizationThreshold);
  const d = o.delayP99Ms ?? adaptiveShedderDefaults.delayP99Ms;
  const delayP99Ms = d === Infinity ? Infinity : positive('AdaptiveShedder', 'delayP99Ms', d);
  const coolOffMs = finite('AdaptiveShedder', 'coolOffMs', o.coolOffMs ?? adaptiveShedderDefaults.coolOffMs, 0);
  const windowMs = positive('AdaptiveShedder', 'windowMs', o.windowMs ?? adaptiveShedderDefaults.windowMs);
  const buckets = integer('AdaptiveShedder', 'buckets', o.buckets ?? adaptiveShedderDefaults.buckets, 2, 10_000);
  return { enabled, utilizationThreshold, delayP99Ms, coolOffMs, windowMs, buckets };
}

class Token implements AdmissionToken {
  private done = false;
  constructor(
    private readonly shedder: AdaptiveShedder,
    private readonly start: number,
  ) {}

  success(): void {
    if (this.done) return;
    this.done = true;
    this.shedder.finish(this.start, true);
  }

  failure(): void {
    if (this.done) return;
    this.done = true;
    this.shedder.finish(this.start, false);
  }

  release(): void {
    this.failure(); // frees the slot, feeds nothing in: the same as a failure for the shedder
  }
}
