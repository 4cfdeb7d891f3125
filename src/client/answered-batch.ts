/**
 * AnsweredBatch holds the durations of a service's answered calls for the client's ClientMeasure until
 * they are handed over, in call order: when the batch is full, before an attempt of the same service is
 * measured (so that a series both feed counts in call order), when the measures change, and whenever
 * the durations are read (`PendingBatches.flushAll`: each scrape, `BulwarkMetrics.histograms()`). A call
 * notes its two durations with two stores and makes no call into the measure: a call into it per call,
 * even one that does nothing, cost ~3 % of a 400 ns call, and two histogram observations inline cost
 * more in what they kept the JIT from inlining around them (issue 31's in-process A/B). Internal to the
 * client (no subpath exports it), but not tagged internal here: stripInternal would drop the import
 * this header precedes, and the client's declarations name these classes.
 */
import type { ClientMeasure } from './types.js';

/** ANSWERED_BATCH is how many answered calls a batch holds before it is handed over (2 KiB of durations). */
export const ANSWERED_BATCH = 128;

export class AnsweredBatch {
  /** `[attempt ms, call ms]` per answered call, the first `n` numbers noted. */
  readonly durations = new Float64Array(2 * ANSWERED_BATCH);
  /** Numbers noted: two per call. */
  n = 0;
  /** Whether the batch is in its client's PendingBatches. */
  listed = false;

  constructor(readonly service: string) {}

  /** flush hands the durations noted to `measure` (ClientMeasure.answered) and empties the batch. */
  flush(measure: ClientMeasure): void {
    const n = this.n;
    if (n === 0) return;
    this.n = 0; // first: a measure that throws is not handed the same durations again
    measure.answered(this.service, this.durations, n);
  }
}

/**
 * PendingBatches are a client's batches with durations noted since its last `flushAll`, whichever
 * services they are of (one evicted or closed while a call was in flight included).
 */
export class PendingBatches {
  private list: AnsweredBatch[] = [];

  /** add lists a batch that has just been noted in. */
  add(b: AnsweredBatch): void {
    b.listed = true;
    this.list.push(b);
  }

  /** flushAll hands every listed batch to `measure` (or, with none, empties them) and clears the list. */
  flushAll(measure: ClientMeasure | undefined): void {
    const list = this.list;
    if (list.length === 0) return;
    this.list = [];
    for (const b of list) {
      b.listed = false;
      if (measure === undefined) b.n = 0;
      else b.flush(measure);
    }
  }
}
