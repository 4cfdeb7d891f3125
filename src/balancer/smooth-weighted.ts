/**
 * SmoothWeightedRoundRobin is nginx's smooth weighted round robin (ngx_http_upstream_round_robin.c,
 * reference 004 §2.2): each turn every instance's current weight grows by its weight, the largest wins
 * and gives back the total. Weights 5, 1, 1 give A A B A C A A, never A A A A A B C.
 *
 * Weights come from `metadata.weight` (a positive finite number, else 1 with one warning per instance).
 * Current weights are kept by instance id, so they survive list updates for instances that stay.
 */
import { fn, options as checkOptions } from '../core/validate.js';
import type { ServiceInstance } from '../registry/types.js';
import type { Picker } from './index.js';
import { defaultWarn, InstanceTable, noInstance, weightOf } from './instance-table.js';

/** SmoothWeightedRoundRobinOptions configures a SmoothWeightedRoundRobin. */
export interface SmoothWeightedRoundRobinOptions {
  /** Called once per instance whose weight is unusable. Defaults to `process.emitWarning`. */
  warn?: (message: string) => void;
}

interface WeightedEntry {
  instance: ServiceInstance;
  /** The raw metadata.weight the weight was parsed from (re-parsed, and warned about, only when it changes). */
  raw: string | undefined;
  weight: number;
  current: number;
}

/** SmoothWeightedRoundRobin is a Picker implementing nginx's smooth weighted round robin. */
export class SmoothWeightedRoundRobin implements Picker {
  private readonly table: InstanceTable<WeightedEntry>;
  private total = 0;

  constructor(options?: SmoothWeightedRoundRobinOptions) {
    const o = checkOptions('SmoothWeightedRoundRobin', options);
    const warn = o.warn === undefined ? defaultWarn : fn<(m: string) => void>('SmoothWeightedRoundRobin', 'warn', o.warn);
    this.table = new InstanceTable<WeightedEntry>((instance, prev) => {
      const raw = instance.metadata?.weight;
      if (prev !== undefined && prev.raw === raw) {
        prev.instance = instance;
        return prev;
      }
      const weight = weightOf(instance, warn);
      if (prev !== undefined) {
        prev.instance = instance;
        prev.raw = raw;
        prev.weight = weight;
        return prev;
      }
      return { instance, raw, weight, current: 0 };
    });
  }

  /** pick returns the instance with the largest current weight; throws NoInstanceError when `instances` is empty. */
  pick(instances: readonly ServiceInstance[]): ServiceInstance {
    const t = this.table;
    let entries = t.entries;
    if (instances !== t.source) {
      entries = t.sync(instances);
      let total = 0;
      for (const e of entries) total += e.weight;
      this.total = total;
    }
    const n = entries.length;
    if (n === 0) throw noInstance();
    let best = entries[0]!;
    best.current += best.weight;
    for (let i = 1; i < n; i++) {
      const e = entries[i]!;
      e.current += e.weight;
      if (e.current > best.current) best = e;
    }
    best.current -= this.total;
    return best.instance;
  }
}
