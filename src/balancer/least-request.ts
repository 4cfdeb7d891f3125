/**
 * LeastRequest sends each call to the instance with the fewest calls in flight among `choiceCount`
 * drawn at random (Envoy's LEAST_REQUEST with its `choice_count`, default 2: "the power of two
 * choices"). A full scan would find the true least-loaded instance but costs O(n) per pick once every
 * instance has calls in flight (15 µs at 10 000 instances); sampling two is O(1) and, by the power of
 * two choices result (Mitzenmacher 2001), keeps the busiest instance within O(log log n) of the mean
 * instead of the O(log n / log log n) of one random choice. Ties go to the first drawn, so idle
 * instances share the traffic at random.
 * In-flight counts come from `start` / `report` (the Balancer calls both).
 */
import { systemClock, type Clock } from '../core/clock.js';
import { clockOption, fn, integer, options as checkOptions, type OptionKeys } from '../core/validate.js';
import type { ServiceInstance } from '../registry/types.js';
import type { CallOutcome, ExcludeSet, Picker } from './types.js';
import { InstanceTable, noInstance, prepareList, sliceLists, type Entry } from './instance-table.js';
import { Xorshift32 } from './xorshift.js';

/** The keys of LeastRequestOptions, all of them: any other is refused (see `options`). */
const LEAST_REQUEST_KEYS = {
  choiceCount: true,
  random: true,
  clock: true,
  sliceLists: true,
} as const satisfies OptionKeys<LeastRequestOptions>;

/** LeastRequestOptions configures a LeastRequest. */
export interface LeastRequestOptions {
  /** How many instances each pick draws and compares, in [2, 100] (Envoy's `choice_count`). Defaults to 2. */
  choiceCount?: number;
  /** Uniform random numbers in [0, 1). Defaults to a xorshift32 generator seeded from `Math.random`. */
  random?: () => number;
  /** Sets the timers of `sliceLists`. Defaults to `systemClock`. */
  clock?: Clock;
  /** Take a list differing from the last in thousands of instances in in slices on `clock`'s timer turns: until then picks answer from the previous list (an instance may no longer be listed). The Balancer turns it on. Defaults to false. */
  sliceLists?: boolean;
}

/** Defaults for LeastRequestOptions. */
export const leastRequestDefaults = Object.freeze({ choiceCount: 2 });

/** Draws per chosen instance before a pick with `exclude` falls back to a scan. */
const EXCLUDE_TRIES = 4;

interface CountEntry extends Entry {
  inFlight: number;
}

/** LeastRequest is a Picker choosing the instance with the fewest calls in flight among a few drawn at random. */
export class LeastRequest implements Picker {
  readonly choiceCount: number;
  declare private readonly table: InstanceTable<CountEntry>;
  private readonly random: (() => number) | undefined;
  private readonly rng = new Xorshift32();
  private last: CountEntry | undefined;

  constructor(options?: LeastRequestOptions) {
    const o = checkOptions('LeastRequest', options, LEAST_REQUEST_KEYS);
    this.choiceCount = integer('LeastRequest', 'choiceCount', o.choiceCount ?? leastRequestDefaults.choiceCount, 2, 100);
    this.random = o.random === undefined ? undefined : fn<() => number>('LeastRequest', 'random', o.random);
    const clock = clockOption('LeastRequest', o.clock, systemClock);
    this.table = new InstanceTable<CountEntry>(
      (instance, prev) => {
        if (prev === undefined) return { instance, seen: 0, index: 0, inFlight: 0 };
        prev.instance = instance;
        return prev;
      },
      { clock: sliceLists('LeastRequest', o.sliceLists) ? clock : undefined },
    );
  }

  /**
   * pick returns the instance with the fewest calls in flight among `choiceCount` drawn at random
   * (among those `exclude` lacks, while there is one); throws NoInstanceError when empty.
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
    if (n === 1) return (this.last = entries[0]!).instance;
    if (exclude !== undefined) return this.pickAllowed(entries, exclude);
    let best = entries[this.draw(n)]!;
    for (let c = 1; c < this.choiceCount && best.inFlight > 0; c++) {
      const e = entries[this.draw(n)]!;
      if (e.inFlight < best.inFlight) best = e;
    }
    this.last = best;
    return best.instance;
  }

  /**
   * pickAllowed is `pick` over the entries `exclude` lacks: draws skip excluded ones; when draws keep
   * landing on excluded ones (most are), one scan finds the least loaded of the others.
   */
  private pickAllowed(entries: CountEntry[], exclude: ExcludeSet): ServiceInstance {
    const n = entries.length;
    let best: CountEntry | undefined;
    let chosen = 0;
    for (let tries = 0; chosen < this.choiceCount && tries < EXCLUDE_TRIES * this.choiceCount; tries++) {
      const e = entries[this.draw(n)]!;
      if (exclude.has(e.instance.id)) continue;
      chosen++;
      if (best === undefined || e.inFlight < best.inFlight) best = e;
    }
    if (best === undefined) {
      for (let i = 0; i < n; i++) {
        const e = entries[i]!;
        if (!exclude.has(e.instance.id) && (best === undefined || e.inFlight < best.inFlight)) best = e;
      }
      best ??= entries[this.draw(n)]!; // every instance excluded: pick as usual
    }
    this.last = best;
    return best.instance;
  }

  /** draw returns a uniform index in [0, n). */
  private draw(n: number): number {
    const r = this.random;
    const u = r !== undefined ? r() : this.rng.next();
    const i = Math.floor(u * n);
    return i >= 0 && i < n ? i : 0;
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

  /** prepare takes `instances` in ahead of the first pick, a first list too in slices with `sliceLists` (see `Picker.prepare`). */
  prepare(instances: readonly ServiceInstance[], done: () => void): void {
    prepareList(this.table, instances, (l, first) => ((this.last = undefined), this.table.sync(l, first)), done);
  }

  /** stats answers the number of instances and of calls in flight to them. */
  stats(): { instances: number; inFlight: number } {
    let inFlight = 0;
    for (const e of this.table.entries) inFlight += e.inFlight;
    return { instances: this.table.entries.length, inFlight };
  }
}
