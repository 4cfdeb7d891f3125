/**
 * RoundRobin hands out instances in turn. The first turn starts at a random
 * offset, so that many clients started together do not all begin with the same instance (gRPC's
 * round_robin does the same).
 */
import { systemClock, type Clock } from '../core/clock.js';
import { clockOption, fn, options as checkOptions, type OptionKeys } from '../core/validate.js';
import type { ServiceInstance } from '../registry/types.js';
import type { ExcludeSet, Picker } from './types.js';
import { InstanceTable, noInstance, prepareList, sliceLists, type Entry } from './instance-table.js';

/** The keys of RoundRobinOptions, all of them: any other is refused (see `options`). */
const ROUND_ROBIN_KEYS = { random: true, clock: true, sliceLists: true } as const satisfies OptionKeys<RoundRobinOptions>;

/** RoundRobinOptions configures a RoundRobin. */
export interface RoundRobinOptions {
  /** Uniform random numbers in [0, 1), for the starting offset. Defaults to `Math.random`. */
  random?: () => number;
  /** Sets the timers of `sliceLists`. Defaults to `systemClock`. */
  clock?: Clock;
  /** Take a list differing from the last in thousands of instances in in slices on `clock`'s timer turns: until then picks answer from the previous list (an instance may no longer be listed). The Balancer turns it on. Defaults to false. */
  sliceLists?: boolean;
}

/** RoundRobin is a Picker that takes instances in turn. */
export class RoundRobin implements Picker {
  declare private readonly table: InstanceTable<Entry>;
  private next: number;

  constructor(options?: RoundRobinOptions) {
    const o = checkOptions('RoundRobin', options, ROUND_ROBIN_KEYS);
    const random = o.random === undefined ? Math.random : fn<() => number>('RoundRobin', 'random', o.random);
    this.next = Math.floor(random() * 1024) >>> 0;
    const clock = clockOption('RoundRobin', o.clock, systemClock);
    this.table = new InstanceTable<Entry>((instance, prev) => (prev === undefined ? { instance, seen: 0, index: 0 } : ((prev.instance = instance), prev)), {
      clock: sliceLists('RoundRobin', o.sliceLists) ? clock : undefined,
    });
  }

  /**
   * pick returns the next instance in turn (the next one `exclude` lacks, while there is one); throws
   * NoInstanceError when `instances` is empty.
   */
  pick(instances: readonly ServiceInstance[], _key?: string, exclude?: ExcludeSet): ServiceInstance {
    const t = this.table;
    const entries = instances === t.source ? t.entries : t.sync(instances);
    const n = entries.length;
    if (n === 0) throw noInstance();
    let i = this.next;
    if (i >= n) i %= n;
    if (exclude !== undefined) {
      for (let k = 0; k < n && exclude.has(entries[i]!.instance.id); k++) if (++i === n) i = 0;
      if (exclude.has(entries[i]!.instance.id)) i = this.next % n; // every one excluded: the turn as usual
    }
    this.next = i + 1;
    return entries[i]!.instance;
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
