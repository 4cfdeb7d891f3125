/**
 * SmoothWeightedRoundRobin is nginx's smooth weighted round robin (ngx_http_upstream_round_robin.c,
 * reference 004 §2.2): each turn every instance's current weight grows by its weight, the largest wins
 * and gives back the total. Weights 5, 1, 1 give A A B A C A A, never A A A A A B C.
 *
 * Weights come from `metadata.weight` (a positive finite number, else 1 with one warning per instance).
 * Current weights are kept by instance id, so they survive list updates for instances that stay.
 *
 * Speed: with integer weights of modest total (≤ 65 536), one cycle of picks is precomputed when the
 * list changes and a pick is an array read; otherwise each pick is the O(n) nginx turn.
 */
import { fn, options as checkOptions } from '../core/validate.js';
import type { ServiceInstance } from '../registry/types.js';
import type { Picker } from './index.js';
import { defaultWarn, InstanceTable, noInstance, weightOf } from './instance-table.js';

/** Cycles are precomputed when the total weight is at most this… */
const MAX_CYCLE = 1 << 16;
/** …and computing one costs at most this many steps (total × instances): ~2 ms. */
const MAX_CYCLE_WORK = 1 << 21;

/** The most (instance, bad weight) pairs remembered for warn-once. */
const MAX_WARNED = 10_000;

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
  /** The current weight, kept here only across list changes (the pick loop works on `current[]`). */
  current: number;
}

/** SmoothWeightedRoundRobin is a Picker implementing nginx's smooth weighted round robin. */
export class SmoothWeightedRoundRobin implements Picker {
  private readonly table: InstanceTable<WeightedEntry>;
  private total = 0;
  /** weights[i] and current[i] belong to table.entries[i]; typed arrays keep the turn loop tight. */
  private weights = new Float64Array(0);
  private current = new Float64Array(0);
  /** The next turns, precomputed (indexes into table.entries), when weights are small integers. */
  private cycle: Uint32Array | undefined;
  private pos = 0;
  /** The current weights when the cycle began; `current` holds them at its end. */
  private cycleStart = new Float64Array(0);
  /** The cycle ends in the state it began with, so it repeats as it is. */
  private periodic = false;

  constructor(options?: SmoothWeightedRoundRobinOptions) {
    const o = checkOptions('SmoothWeightedRoundRobin', options);
    const sink = o.warn === undefined ? defaultWarn : fn<(m: string) => void>('SmoothWeightedRoundRobin', 'warn', o.warn);
    // One warning per instance and bad value, even when the instance leaves the list and comes back
    // (ejected, then returned); the memory of what was warned about is bounded.
    const warned = new Set<string>();
    let current = '';
    const warn = (message: string) => {
      if (warned.has(current)) return;
      if (warned.size >= MAX_WARNED) warned.clear();
      warned.add(current);
      sink(message);
    };
    this.table = new InstanceTable<WeightedEntry>((instance, prev) => {
      const raw = instance.metadata?.weight;
      if (prev !== undefined && prev.raw === raw) {
        prev.instance = instance;
        return prev;
      }
      current = `${instance.id}\u0000${raw}`;
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
    if (instances !== this.table.source) this.sync(instances);
    const cycle = this.cycle;
    if (cycle !== undefined) {
      let p = this.pos;
      if (p === cycle.length) {
        if (!this.periodic) this.plan(); // the next cycle starts where this one ended
        p = 0;
      }
      this.pos = p + 1;
      return this.table.entries[cycle[p]!]!.instance;
    }
    if (this.weights.length === 0) throw noInstance();
    return this.table.entries[this.step(this.current)]!.instance;
  }

  /** step is one turn of nginx's algorithm on `current`; returns the index picked. */
  private step(current: Float64Array): number {
    const weights = this.weights;
    const n = weights.length;
    // Every current weight grows by its weight; the largest (first on ties) gives back the total.
    let best = 0;
    let bestCurrent = (current[0] += weights[0]!);
    for (let i = 1; i < n; i++) {
      const c = (current[i] += weights[i]!);
      if (c > bestCurrent) {
        bestCurrent = c;
        best = i;
      }
    }
    current[best] = bestCurrent - this.total;
    return best;
  }

  /**
   * plan precomputes the next `total` turns from the state in `current` (which it leaves at the end
   * state). With integer weights a cycle of `total` turns usually returns to its start state (always
   * from all zeros): then the same cycle serves forever and a pick is one array read.
   */
  private plan(): void {
    const total = this.total;
    this.cycleStart = this.current.slice();
    const cycle = this.cycle !== undefined && this.cycle.length === total ? this.cycle : new Uint32Array(total);
    for (let k = 0; k < total; k++) cycle[k] = this.step(this.current);
    this.cycle = cycle;
    this.periodic = sameState(this.cycleStart, this.current);
    this.pos = 0;
  }

  /** sync moves the current weights of instances that stay into arrays laid out for the new list. */
  private sync(instances: readonly ServiceInstance[]): void {
    // The state as of now: in cycle mode, replay the turns taken in this cycle from its start.
    if (this.cycle !== undefined) {
      const state = this.cycleStart.slice();
      for (let k = 0; k < this.pos; k++) this.step(state);
      this.current = state;
    }
    const old = this.table.entries;
    for (let i = 0; i < old.length; i++) old[i]!.current = this.current[i]!;
    const entries = this.table.sync(instances);
    const n = entries.length;
    this.weights = new Float64Array(n);
    this.current = new Float64Array(n);
    let total = 0;
    let integral = true;
    for (let i = 0; i < n; i++) {
      const e = entries[i]!;
      this.weights[i] = e.weight;
      this.current[i] = e.current;
      total += e.weight;
      integral &&= Number.isInteger(e.weight);
    }
    this.total = total;
    this.cycle = undefined;
    if (n > 0 && integral && total <= MAX_CYCLE && total * n <= MAX_CYCLE_WORK) this.plan();
  }
}

function sameState(a: Float64Array, b: Float64Array): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
