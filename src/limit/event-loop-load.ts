/**
 * EventLoopLoad samples how busy this process's event loop is: the share of time it was busy
 * (`performance.eventLoopUtilization`, the right signal for one JS thread, where process CPU% is not)
 * and the p99 of event-loop delay (`monitorEventLoopDelay`), over the last `sampleMs`.
 * Sampling runs on one unref'd timer set through the clock, so readers pay nothing per call (and a
 * ManualClock decides when a sample is taken).
 */
import { monitorEventLoopDelay, performance, type EventLoopUtilization, type IntervalHistogram } from 'node:perf_hooks';
import { systemClock, type Clock, type TimerHandle } from '../core/clock.js';
import { clockOption, finite, options as optionsOf, type OptionKeys } from '../core/validate.js';

/** The keys of EventLoopLoadOptions, all of them: any other is refused (see `options`). */
const EVENT_LOOP_LOAD_KEYS = { sampleMs: true, clock: true, meters: true } as const satisfies OptionKeys<EventLoopLoadOptions>;

/** LoadSample is one reading of the event loop's load. */
export interface LoadSample {
  /** Share of the last interval the event loop was busy, in [0, 1]. */
  readonly utilization: number;
  /** p99 of event-loop delay over the last interval, in milliseconds. */
  readonly delayP99Ms: number;
}

/** EventLoopLoadOptions configures an EventLoopLoad. */
export interface EventLoopLoadOptions {
  /** Milliseconds per sample. Defaults to 250. */
  sampleMs?: number;
  /** The clock whose timer takes the samples (what is measured is always this event loop). Defaults to the monotonic system clock. */
  clock?: Clock;
  /**
   * The two meters read at each sample. Defaults to Node's own (`performance.eventLoopUtilization` and a
   * `monitorEventLoopDelay` histogram at 10 ms resolution): tests of the sampling logic pass fakes.
   * @internal
   */
  meters?: EventLoopMeters;
}

/**
 * EventLoopMeters are the readings an EventLoopLoad samples: cumulative busy time, and a delay histogram
 * (nanoseconds) it reads and resets at each sample. `performance` and `monitorEventLoopDelay` fit.
 * @internal
 */
export interface EventLoopMeters {
  eventLoopUtilization(current?: EventLoopUtilization, previous?: EventLoopUtilization): EventLoopUtilization;
  delay: Pick<IntervalHistogram, 'count' | 'percentile' | 'reset' | 'enable' | 'disable'>;
}

/** Defaults for EventLoopLoadOptions. */
export const eventLoopLoadDefaults = Object.freeze({ sampleMs: 250 });

/** EventLoopLoad keeps the latest LoadSample of this process's event loop. */
export class EventLoopLoad {
  private last: EventLoopUtilization;
  private readonly meters: EventLoopMeters;
  private readonly histogram: EventLoopMeters['delay'];
  private readonly clock: Clock;
  private timer: TimerHandle | undefined;
  private sample: LoadSample = { utilization: 0, delayP99Ms: 0 };

  constructor(options?: EventLoopLoadOptions) {
    const o = optionsOf('EventLoopLoad', options, EVENT_LOOP_LOAD_KEYS);
    const sampleMs = finite('EventLoopLoad', 'sampleMs', o.sampleMs ?? eventLoopLoadDefaults.sampleMs, 10, 60_000);
    this.meters = o.meters ?? { eventLoopUtilization: performance.eventLoopUtilization, delay: monitorEventLoopDelay({ resolution: 10 }) };
    this.last = this.meters.eventLoopUtilization();
    this.histogram = this.meters.delay;
    this.histogram.enable();
    this.clock = clockOption('EventLoopLoad', o.clock, systemClock);
    this.timer = this.clock.setInterval(() => this.tick(), sampleMs);
    this.timer.unref();
  }

  /** read answers the latest sample (zeros until the first interval has passed). */
  read(): LoadSample {
    return this.sample;
  }

  /** close stops sampling; the last sample stays readable. Idempotent. */
  async close(): Promise<void> {
    if (this.timer === undefined) return;
    this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.histogram.disable();
  }

  /** Symbol.asyncDispose closes the sampler (`await using load = new EventLoopLoad()`). */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private tick(): void {
    const now = this.meters.eventLoopUtilization();
    const delta = this.meters.eventLoopUtilization(now, this.last);
    this.last = now;
    const p99 = this.histogram.count > 0 ? this.histogram.percentile(99) / 1e6 : 0;
    this.histogram.reset();
    this.sample = { utilization: delta.utilization, delayP99Ms: p99 };
  }
}
