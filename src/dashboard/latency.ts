/**
 * LatencyWindow: p50 and p99 of one histogram over the last window (a minute by default), from the
 * difference of two readings of its bucket counts, as Prometheus' `histogram_quantile(rate(…[1m]))`
 * computes them: linear within the bucket the rank falls in. Readings are kept one per tick, so the
 * window slides by a tick.
 */

/** Reading is a histogram's bucket counts (not cumulative) and total count at one time. */
interface Reading {
  readonly t: number;
  readonly counts: readonly number[];
  readonly count: number;
}

/**
 * quantileMs answers the q-quantile, in milliseconds, of observations counted per bucket (`counts`, not
 * cumulative, under `bounds` in seconds; `count` includes those above the last bound), or null when
 * there were none. A rank above the last bound answers the last bound, as Prometheus does.
 */
export function quantileMs(q: number, bounds: readonly number[], counts: readonly number[], count: number): number | null {
  if (!(count > 0)) return null;
  const rank = q * count;
  let below = 0;
  for (let i = 0; i < bounds.length; i++) {
    const c = counts[i] ?? 0;
    if (below + c >= rank && c > 0) {
      const lower = i === 0 ? 0 : bounds[i - 1]!;
      const upper = bounds[i]!;
      return (lower + (upper - lower) * ((rank - below) / c)) * 1000;
    }
    below += c;
  }
  return (bounds[bounds.length - 1] ?? 0) * 1000;
}

/** LatencyWindow keeps one histogram's readings over `windowMs` and answers its quantiles. */
export class LatencyWindow {
  private readonly readings: Reading[] = [];

  constructor(private readonly windowMs: number) {}

  /** add records a reading at `t` (ms) and answers [p50, p99] in ms over the window ending there, null when nothing was observed. */
  add(t: number, bounds: readonly number[], counts: readonly number[], count: number): [number | null, number | null] {
    const r = this.readings;
    r.push({ t, counts: counts.slice(), count });
    // Keep the newest reading at or before the window's start: the difference spans the whole window.
    while (r.length > 2 && r[1]!.t <= t - this.windowMs) r.shift();
    const from = r[0]!;
    if (from === r[r.length - 1]) return [null, null];
    const n = count - from.count;
    if (!(n > 0)) return [null, null];
    const d = counts.map((c, i) => c - (from.counts[i] ?? 0));
    return [quantileMs(0.5, bounds, d, n), quantileMs(0.99, bounds, d, n)];
  }
}
