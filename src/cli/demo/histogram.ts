/**
 * LatencyHistogram records latencies in fixed logarithmic buckets (about 5 % wide, from 0.05 ms to
 * ~2 min), so memory stays constant however many calls the demo makes, and quantiles are exact to
 * the bucket.
 */

/** Lower bound of the first bucket, in milliseconds. */
const MIN_MS = 0.05;
/** Growth factor between bucket bounds: 5 % (quantiles exact to about ±2.5 %). */
const GROWTH = 1.05;
const LOG_GROWTH = Math.log(GROWTH);
/** Bucket count: MIN_MS × 1.05^300 ≈ 113 s; slower samples land in the last bucket. */
const BUCKETS = 300;

/** LatencyHistogram counts latency samples in log buckets; `quantile` answers p50, p99, … */
export class LatencyHistogram {
  private readonly counts = new Uint32Array(BUCKETS);
  private total = 0;

  /** count is the number of samples recorded. */
  get count(): number {
    return this.total;
  }

  /** record adds one sample of `ms` milliseconds (negative or NaN samples count as 0). */
  record(ms: number): void {
    const i = ms > MIN_MS ? Math.min(BUCKETS - 1, Math.floor(Math.log(ms / MIN_MS) / LOG_GROWTH)) : 0;
    this.counts[i]!++;
    this.total++;
  }

  /** quantile returns the upper bound of the bucket holding quantile `q` (0–1), or NaN with no samples. */
  quantile(q: number): number {
    if (this.total === 0) return Number.NaN;
    const rank = Math.max(1, Math.ceil(q * this.total));
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i]!;
      if (seen >= rank) return MIN_MS * Math.pow(GROWTH, i + 1);
    }
    return MIN_MS * Math.pow(GROWTH, BUCKETS);
  }
}
