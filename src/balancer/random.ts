/**
 * Random picks an instance uniformly at random: with many instances it spreads about as well as
 * round robin, and needs no shared turn.
 */
import { systemClock, type Clock } from '../core/clock.js';
import { clockOption, fn, options as checkOptions, type OptionKeys } from '../core/validate.js';
import type { ServiceInstance } from '../registry/types.js';
import type { ExcludeSet, Picker } from './types.js';
import { InstanceTable, allowedCount, noInstance, nthAllowed, prepareList, sliceLists, type Entry } from './instance-table.js';

/** The keys of RandomOptions, all of them: any other is refused (see `options`). */
const RANDOM_KEYS = { random: true, clock: true, sliceLists: true } as const satisfies OptionKeys<RandomOptions>;

/** RandomOptions configures a Random. */
export interface RandomOptions {
  /** Uniform random numbers in [0, 1). Defaults to `Math.random`. */
  random?: () => number;
  /** Sets the timers of `sliceLists`. Defaults to `systemClock`. */
  clock?: Clock;
  /** Take a list differing from the last in thousands of instances in in slices on `clock`'s timer turns: until then picks answer from the previous list (an instance may no longer be listed). The Balancer turns it on. Defaults to false. */
  sliceLists?: boolean;
}

/** Random is a Picker that chooses uniformly at random. */
export class Random implements Picker {
  declare private readonly table: InstanceTable<Entry>;
  private readonly random: () => number;

  constructor(options?: RandomOptions) {
    const o = checkOptions('Random', options, RANDOM_KEYS);
    this.random = o.random === undefined ? Math.random : fn('Random', 'random', o.random);
    const clock = clockOption('Random', o.clock, systemClock);
    this.table = new InstanceTable<Entry>((instance, prev) => (prev === undefined ? { instance, seen: 0, index: 0 } : ((prev.instance = instance), prev)), {
      clock: sliceLists('Random', o.sliceLists) ? clock : undefined,
    });
  }

  /**
   * pick returns a uniformly random instance (among those `exclude` lacks, while there is one);
   * throws NoInstanceError when `instances` is empty.
   */
  pick(instances: readonly ServiceInstance[], _key?: string, exclude?: ExcludeSet): ServiceInstance {
    const t = this.table;
    const entries = instances === t.source ? t.entries : t.sync(instances);
    const n = entries.length;
    if (n === 0) throw noInstance();
    const m = exclude === undefined ? n : allowedCount(entries, exclude);
    let i = Math.floor(this.random() * (m === 0 ? n : m));
    if (!(i >= 0 && i < n)) i = i >= n ? n - 1 : 0; // a random() outside [0, 1) still picks a real instance
    return (m === 0 || m === n ? entries[i]! : nthAllowed(entries, exclude!, Math.min(i, m - 1))).instance;
  }

  /** prepare takes `instances` in ahead of the first pick, a first list too in slices with `sliceLists` (see `Picker.prepare`). */
  prepare(instances: readonly ServiceInstance[], done: () => void): void {
    prepareList(this.table, instances, (l, first) => this.table.sync(l, first), done);
  }

  /** stats answers the number of instances in the list last picked from. */
  stats(): { instances: number } {
    return { instances: this.table.entries.length };
  }
}
