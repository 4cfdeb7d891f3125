/**
 * ProcessFeed: the dashboard feed of one process. Once per tick, whatever the number of viewers, it
 * takes the status snapshot of a BulwarkMetrics, turns the components' call counters into calls/s and
 * errors/s and their duration histograms into p50/p99 over the last minute, keeps the points for a few
 * minutes, and hands the frame's JSON text (made once) to its listeners. The tick runs while the feed
 * is open, viewers or not, so that a page opened now has history to draw; its timer is unref'd.
 */
import { systemClock, type Clock, type TimerHandle } from '../core/clock.js';
import { clockOption, integer, options as checkOptions, type OptionKeys } from '../core/validate.js';
import type { HistogramTotals, MetricsSnapshot } from '../metrics/types.js';
import { LatencyWindow } from './latency.js';
import { traffic } from './traffic.js';
import { TickHistory } from './tick-history.js';
import type { Feed, Point, PointValues, ProcessFeedOptions, ProcessFrame } from './types.js';

const OWNER = 'ProcessFeed';
const KEYS = { tickMs: true, historyMs: true, latencyWindowMs: true, clock: true } as const satisfies OptionKeys<ProcessFeedOptions>;

/** processFeedDefaults are ProcessFeed's defaults. */
export const processFeedDefaults = Object.freeze({ tickMs: 1_000, historyMs: 300_000, latencyWindowMs: 60_000 });

/** FeedSource is what the feed reads: a BulwarkMetrics (histograms are optional: no percentiles without them). */
export interface FeedSource {
  snapshot(): MetricsSnapshot;
  histograms?(): HistogramTotals[];
}

/** The duration family a component's percentiles come from: the call durations first. */
function preferred(a: HistogramTotals, b: HistogramTotals | undefined): boolean {
  if (b === undefined) return true;
  return a.family.endsWith('call_duration_seconds') && !b.family.endsWith('call_duration_seconds');
}

export class ProcessFeed extends TickHistory implements Feed {
  readonly mode = 'process' as const;
  readonly tickMs: number;
  private readonly clock: Clock;
  private readonly latencyWindowMs: number;
  private readonly totals = new Map<string, { t: number; calls: number; errors: number }>();
  private readonly windows = new Map<string, LatencyWindow>();
  private timer: TimerHandle | undefined;
  private closed = false;

  constructor(
    private readonly source: FeedSource,
    options?: ProcessFeedOptions,
  ) {
    if (source === null || typeof source !== 'object' || typeof source.snapshot !== 'function') {
      throw new TypeError(`${OWNER}: metrics must be a BulwarkMetrics (snapshot())`);
    }
    const o = checkOptions(OWNER, options, KEYS);
    super(integer(OWNER, 'historyMs', o.historyMs ?? processFeedDefaults.historyMs, 0, 86_400_000));
    this.tickMs = integer(OWNER, 'tickMs', o.tickMs ?? processFeedDefaults.tickMs, 10, 3_600_000);
    this.latencyWindowMs = integer(OWNER, 'latencyWindowMs', o.latencyWindowMs ?? processFeedDefaults.latencyWindowMs, 1, 3_600_000);
    this.clock = clockOption(OWNER, o.clock, systemClock);
    this.tick();
    this.timer = this.clock.setInterval(() => this.tick(), this.tickMs);
    this.timer.unref();
  }

  /** tick takes one snapshot and sends it; the timer calls it (tests with a ManualClock advance it). */
  tick(): void {
    if (this.closed) return;
    const t = this.clock.now();
    let snap: MetricsSnapshot;
    let hist: HistogramTotals[];
    try {
      snap = this.source.snapshot();
      hist = this.source.histograms?.() ?? [];
    } catch {
      return; // a metrics that cannot answer now is asked again next tick
    }
    const c: Record<string, PointValues> = {};
    const seen = new Set<string>();
    for (const comp of snap.components) {
      seen.add(comp.name);
      const tr = traffic(comp.kind, comp.status);
      if (tr === undefined) continue;
      const prev = this.totals.get(comp.name);
      this.totals.set(comp.name, { t, calls: tr[0], errors: tr[1] });
      const dt = prev === undefined ? 0 : (t - prev.t) / 1000;
      const rate = (now: number, then: number | undefined): number | null => (then === undefined || dt <= 0 || now < then ? null : round((now - then) / dt));
      c[comp.name] = [rate(tr[0], prev?.calls), rate(tr[1], prev?.errors), null, null];
    }
    const byName = new Map<string, HistogramTotals>();
    for (const h of hist) if (preferred(h, byName.get(h.name))) byName.set(h.name, h);
    for (const [name, h] of byName) {
      let w = this.windows.get(name);
      if (w === undefined) this.windows.set(name, (w = new LatencyWindow(this.latencyWindowMs)));
      const [p50, p99] = w.add(t, h.bounds, h.counts, h.count);
      const v = (c[name] ??= [null, null, null, null]);
      v[2] = p50 === null ? null : round(p50);
      v[3] = p99 === null ? null : round(p99);
    }
    for (const name of this.totals.keys()) if (!seen.has(name)) this.totals.delete(name);
    for (const name of this.windows.keys()) if (!byName.has(name)) this.windows.delete(name);
    const point: Point = { t: Math.round(t), c };
    const frame: ProcessFrame = { mode: 'process', at: snap.at, tickMs: this.tickMs, components: snap.components, point };
    let text: string;
    try {
      text = JSON.stringify(frame);
    } catch {
      return; // a status that is not JSON (a cycle) is left out of this tick, as a scrape leaves out a failed collector
    }
    this.publish(point, text);
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.clock.clearTimeout(this.timer);
      this.timer = undefined;
      this.forgetListeners();
    }
    return Promise.resolve();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** round keeps three decimals: what a chart shows, and a smaller frame. */
function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}
