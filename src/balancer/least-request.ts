/**
 * LeastRequest sends each call to the instance with the fewest calls in flight (Envoy's
 * LEAST_REQUEST, full scan). Ties go round robin: the scan starts one place further each pick, so
 * idle instances share the traffic instead of the first one taking it all.
 * In-flight counts come from `start` / `report` (the Balancer calls both).
 */
import type { ServiceInstance } from '../registry/types.js';
import type { CallOutcome, ExcludeSet, Picker } from './index.js';
import { InstanceTable, allowedCount, noInstance } from './instance-table.js';

/** LeastRequestOptions configures a LeastRequest (no options yet; reserved). */
export interface LeastRequestOptions {}

interface CountEntry {
  instance: ServiceInstance;
  inFlight: number;
}

/** LeastRequest is a Picker choosing the instance with the fewest calls in flight. */
export class LeastRequest implements Picker {
  private readonly table = new InstanceTable<CountEntry>((instance, prev) => {
    if (prev === undefined) return { instance, inFlight: 0 };
    prev.instance = instance;
    return prev;
  });
  private next = 0;
  private last: CountEntry | undefined;

  constructor(_options?: LeastRequestOptions) {}

  /**
   * pick returns the instance with the fewest calls in flight (among those `exclude` lacks, while
   * there is one); throws NoInstanceError when empty.
   */
  pick(instances: readonly ServiceInstance[], _key?: string, exclude?: ExcludeSet): ServiceInstance {
    const t = this.table;
    let entries = t.entries;
    if (instances !== t.source) {
      this.last = undefined; // it may belong to an instance that leaves
      entries = t.sync(instances);
    }
    const n = entries.length;
    if (n === 0) throw noInstance();
    let start = this.next;
    if (start >= n) start %= n;
    this.next = start + 1;
    if (exclude !== undefined) {
      const m = allowedCount(entries, exclude);
      if (m > 0 && m < n) return this.pickAllowed(entries, exclude, start);
    }
    let best = entries[start]!;
    for (let k = 1; k < n && best.inFlight > 0; k++) {
      let i = start + k;
      if (i >= n) i -= n;
      const e = entries[i]!;
      if (e.inFlight < best.inFlight) best = e;
    }
    this.last = best;
    return best.instance;
  }

  /** pickAllowed is `pick`'s scan from `start`, over the entries `exclude` lacks. */
  private pickAllowed(entries: CountEntry[], exclude: ExcludeSet, start: number): ServiceInstance {
    const n = entries.length;
    let best: CountEntry | undefined;
    for (let k = 0; k < n; k++) {
      let i = start + k;
      if (i >= n) i -= n;
      const e = entries[i]!;
      if (!exclude.has(e.instance.id) && (best === undefined || e.inFlight < best.inFlight)) best = e;
    }
    this.last = best!;
    return best!.instance;
  }

  /** start counts a call in flight to `instance`. */
  start(instance: ServiceInstance): void {
    const last = this.last;
    const e = last !== undefined && last.instance === instance ? last : this.table.get(instance.id);
    if (e !== undefined) e.inFlight++;
  }

  /** report ends a call started with `start`. */
  report(instance: ServiceInstance, _outcome?: CallOutcome): void {
    const e = this.table.get(instance.id);
    if (e !== undefined && e.inFlight > 0) e.inFlight--;
  }

  /** inFlightOf returns the calls in flight to `id`, or undefined. */
  inFlightOf(id: string): number | undefined {
    return this.table.get(id)?.inFlight;
  }
}
