/**
 * SmoothWeightedRoundRobin is nginx's smooth weighted round robin (ngx_http_upstream_round_robin.c):
 * each turn every instance's current weight grows by its weight, the largest wins (the first on ties)
 * and gives back the total. Weights 5, 1, 1 give A A B A C A A, never A A A A A B C.
 *
 * nginx's loop is O(n) per pick. Here the same turn is answered in O(log n): after t turns instance i's
 * current weight is `wᵢ·t − cᵢ`, where `cᵢ` is the total it gave back, so the next winner is the
 * highest of n lines `wᵢ·x − cᵢ` at x = t + 1. A kinetic tournament tree keeps the winner of every
 * subtree and the turn at which that could change (when a steeper line overtakes); a pick re-checks
 * only the nodes whose turn has come and the picked instance's path, and an instance added, removed or
 * re-weighted updates one path. With integer weights the arithmetic is exact, so the sequence is
 * nginx's own; ties go to the instance that joined first (list order, for a list seen at once).
 *
 * Small integer weights (total ≤ 1 024) take a shortcut: the tree plays one cycle of `total` turns
 * ahead into an array, and when the cycle leaves every current weight as it found it (each instance
 * won exactly its weight's turns, the usual case) picks read that array: an array read per pick, as
 * with nginx's own precomputed schedules. A change ends the cycle where it stands (O(total + n)).
 *
 * Weights come from `metadata.weight` (a positive finite number, else 1 with one warning per instance).
 * Current weights are kept by instance id, so they survive list updates for instances that stay.
 */
import { systemClock, type Clock } from '../core/clock.js';
import { clockOption, fn, options as checkOptions, type OptionKeys } from '../core/validate.js';
import type { ServiceInstance } from '../registry/types.js';
import type { Picker } from './types.js';
import { defaultWarn, InstanceTable, noInstance, prepareList, sliceLists, weightOf, type Entry } from './instance-table.js';

/** The keys of SmoothWeightedRoundRobinOptions, all of them: any other is refused (see `options`). */
const SMOOTH_WEIGHTED_ROUND_ROBIN_KEYS = {
  warn: true,
  clock: true,
  sliceLists: true,
} as const satisfies OptionKeys<SmoothWeightedRoundRobinOptions>;

/** The most (instance, bad weight) pairs remembered for warn-once. */
const MAX_WARNED = 10_000;
/** Turns are counted from a new origin past this, so `wᵢ·x` stays an exact integer in a double (weights ≤ 2²⁰). */
const MAX_TURN = 2 ** 32;
/** Cycles are played ahead when the weights are integers summing to at most this. */
const MAX_CYCLE = 1024;

/** SmoothWeightedRoundRobinOptions configures a SmoothWeightedRoundRobin. */
export interface SmoothWeightedRoundRobinOptions {
  /** Called once per instance whose weight is unusable. Defaults to `process.emitWarning`. */
  warn?: (message: string) => void;
  /** Sets the timers of `sliceLists`. Defaults to `systemClock`. */
  clock?: Clock;
  /** Take a list differing from the last in thousands of instances in in slices on `clock`'s timer turns: until then picks answer from the previous list (an instance may no longer be listed). The Balancer turns it on. Defaults to false. */
  sliceLists?: boolean;
}

interface WeightedEntry extends Entry {
  /** The raw metadata.weight the weight was parsed from (re-parsed, and warned about, only when it changes). */
  raw: string | undefined;
  weight: number;
  /** The entry's leaf in the tournament tree (−1 before it has one). */
  slot: number;
}

/** SmoothWeightedRoundRobin is a Picker implementing nginx's smooth weighted round robin. */
export class SmoothWeightedRoundRobin implements Picker {
  private readonly table: InstanceTable<WeightedEntry>;
  /** Turns taken (the x of the lines). */
  private x = 0;
  private total = 0;
  /** Leaves: weight and given-back total per slot; bySlot[s] is the entry there (undefined: a hole). */
  private w = new Float64Array(0);
  private c = new Float64Array(0);
  private bySlot: (WeightedEntry | undefined)[] = [];
  /** Slots are handed out in order (so ties go to the earlier arrival); `used` is the next one. */
  private used = 0;
  private cap = 0;
  /** Tournament nodes in heap order (root 1, leaves cap … 2·cap − 1): winner slot (−1: none)… */
  private win = new Int32Array(0);
  /** …and the earliest turn at which a winner in the subtree may change. */
  private fail = new Float64Array(0);
  /** Instances whose weight is not an integer (no cycles while any is). */
  private fractional = 0;
  /**
   * A cycle of turns played ahead (slots), or undefined. The tree holds the state at the cycle's start;
   * `pos` turns of it have been taken. Only periodic cycles (ending in the state they began in) are kept.
   */
  private cycle: Uint32Array | undefined;
  private pos = 0;
  /** No cycle until the list or a weight changes (the last attempt was not periodic). */
  private noCycle = false;

  constructor(options?: SmoothWeightedRoundRobinOptions) {
    const o = checkOptions('SmoothWeightedRoundRobin', options, SMOOTH_WEIGHTED_ROUND_ROBIN_KEYS);
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
    this.table = new InstanceTable<WeightedEntry>(
      (instance, prev) => {
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
          this.reweight(prev, weight);
          return prev;
        }
        return { instance, seen: 0, index: 0, raw, weight, slot: -1 };
      },
      { clock: sliceLists('SmoothWeightedRoundRobin', o.sliceLists) ? clockOption('SmoothWeightedRoundRobin', o.clock, systemClock) : undefined },
    );
  }

  /** pick returns the instance with the largest current weight; throws NoInstanceError when `instances` is empty. */
  pick(instances: readonly ServiceInstance[]): ServiceInstance {
    if (instances !== this.table.source) this.sync(instances);
    const cycle = this.cycle;
    if (cycle !== undefined) {
      let p = this.pos;
      if (p === cycle.length) p = 0; // periodic: the state is back where the cycle began
      this.pos = p + 1;
      return this.bySlot[cycle[p]!]!.instance;
    }
    if (this.table.entries.length === 0) throw noInstance();
    if (!this.noCycle && this.fractional === 0 && this.total <= MAX_CYCLE) {
      this.play();
      if (this.cycle !== undefined) return this.pick(instances);
    }
    return this.bySlot[this.step()]!.instance;
  }

  /** step takes one turn on the tree and answers the slot that won it. */
  private step(): number {
    let x = ++this.x;
    if (x >= MAX_TURN) {
      this.rebase();
      x = this.x;
    }
    if (this.fail[1]! <= x) this.fix(1, x);
    const i = this.win[1]!;
    this.c[i] += this.total;
    this.path(i, x);
    return i;
  }

  /**
   * play takes one cycle of `total` turns on the tree. When every instance won exactly its weight's
   * turns, the current weights are as they were: the cycle is kept (the tree rolled back to its start)
   * and repeats. Otherwise the turns stand, as if picked, and cycles stay off until the next change.
   */
  private play(): void {
    const total = this.total;
    const turns = new Uint32Array(total);
    const won = new Float64Array(this.cap);
    for (let k = 0; k < total; k++) won[(turns[k] = this.step())]!++;
    let periodic = true;
    for (let s = 0; s < this.used && periodic; s++) if (this.bySlot[s] !== undefined && won[s] !== this.w[s]) periodic = false;
    if (!periodic) {
      // The turns were taken for nothing: undo them (same state either way, and no pick is lost).
      this.unplay(turns, 0);
      this.noCycle = true;
      return;
    }
    this.unplay(turns, 0);
    this.cycle = turns;
    this.pos = 0;
  }

  /** unplay takes back turns `from` … end of `turns` (the last ones taken on the tree), and rebuilds it. */
  private unplay(turns: Uint32Array, from: number): void {
    for (let k = from; k < turns.length; k++) this.c[turns[k]!] -= this.total;
    this.x -= turns.length - from;
    this.build();
  }

  /** endCycle brings the tree to the state the cycle has reached (its first `pos` turns taken) and drops it. */
  private endCycle(): void {
    const cycle = this.cycle;
    if (cycle === undefined) return;
    this.cycle = undefined;
    const taken = this.pos === cycle.length ? 0 : this.pos; // a whole periodic cycle changes nothing
    for (let k = 0; k < taken; k++) this.c[cycle[k]!] += this.total;
    this.x += taken;
    this.build();
  }

  /** prepare takes `instances` in ahead of the first pick, a first list too in slices with `sliceLists` (see `Picker.prepare`). */
  prepare(instances: readonly ServiceInstance[], done: () => void): void {
    // The tree's arrays for a first list are made now, not in the turn that takes the list over.
    if (this.table.entries.length === 0 && this.used + instances.length > this.cap) {
      this.grow(instances.length);
      this.build(); // grow leaves the tree to build: without it, nodes no join passes through read slot 0
    }
    prepareList(this.table, instances, (l, first) => this.sync(l, first), done);
  }

  /** stats answers the number of instances and their total weight. */
  stats(): { instances: number; totalWeight: number } {
    return { instances: this.table.entries.length, totalWeight: this.total };
  }

  /** currentWeight answers nginx's current weight of `id` (for tests and status pages), or undefined. */
  currentWeight(id: string): number | undefined {
    const e = this.table.get(id);
    if (e === undefined || e.slot < 0) return undefined;
    let x = this.x;
    let c = this.c[e.slot]!;
    const cycle = this.cycle;
    if (cycle !== undefined && this.pos < cycle.length) {
      // The tree holds the cycle's start: add the turns taken since.
      x += this.pos;
      for (let k = 0; k < this.pos; k++) if (cycle[k] === e.slot) c += this.total;
    }
    return this.w[e.slot]! * x - c;
  }

  /** sync applies what changed in the list: instances added (current weight 0) and removed. */
  private sync(instances: readonly ServiceInstance[], sliceFirst = false): void {
    this.endCycle();
    this.noCycle = false;
    const t = this.table;
    t.sync(instances, sliceFirst);
    // Many instances leaving or joining: one pass over the tree beats a path per instance.
    const removed = t.removed;
    const added = t.added;
    let bulk = removed.length * 4 > this.cap;
    for (const e of removed) this.leave(e, !bulk);
    if (this.used + added.length > this.cap) {
      this.grow(added.length); // the tree is built below
      bulk = true;
    }
    bulk ||= added.length * 4 > this.cap;
    for (const e of added) this.join(e, !bulk);
    if (bulk) this.build();
  }

  private join(e: WeightedEntry, update: boolean): void {
    const s = this.used++;
    e.slot = s;
    this.bySlot[s] = e;
    this.w[s] = e.weight;
    this.c[s] = e.weight * this.x; // current weight 0
    this.total += e.weight;
    if (!Number.isInteger(e.weight)) this.fractional++;
    if (update) this.path(s, this.x);
  }

  private leave(e: WeightedEntry, update: boolean): void {
    const s = e.slot;
    if (s < 0) return;
    this.total -= this.w[s]!;
    if (!Number.isInteger(this.w[s]!)) this.fractional--;
    this.bySlot[s] = undefined;
    this.w[s] = 0;
    this.c[s] = 0;
    e.slot = -1;
    if (update) this.path(s, this.x);
    if (this.table.entries.length === 0) this.total = 0; // no rounding left over
  }

  /** reweight changes an instance's weight, keeping its current weight. */
  private reweight(e: WeightedEntry, weight: number): void {
    const s = e.slot;
    if (s >= 0) {
      const current = this.w[s]! * this.x - this.c[s]!;
      this.total += weight - this.w[s]!;
      this.fractional += (Number.isInteger(weight) ? 0 : 1) - (Number.isInteger(this.w[s]!) ? 0 : 1);
      this.w[s] = weight;
      this.c[s] = weight * this.x - current;
      this.path(s, this.x);
    }
    e.weight = weight;
  }

  /** grow makes room for `more` slots: compacts out the holes, doubling the tree when that is not enough (the tree is left to `build`). */
  private grow(more: number): void {
    const live: WeightedEntry[] = [];
    for (let s = 0; s < this.used; s++) if (this.bySlot[s] !== undefined) live.push(this.bySlot[s]!);
    let cap = Math.max(this.cap, 16);
    while (cap < live.length + more) cap *= 2;
    if (cap < 2 * (live.length + more)) cap *= 2; // keep half free, so compaction stays rare
    const w = new Float64Array(cap);
    const c = new Float64Array(cap);
    const bySlot: (WeightedEntry | undefined)[] = new Array(cap).fill(undefined);
    live.forEach((e, s) => {
      w[s] = this.w[e.slot]!;
      c[s] = this.c[e.slot]!;
      e.slot = s;
      bySlot[s] = e;
    });
    this.w = w;
    this.c = c;
    this.bySlot = bySlot;
    this.used = live.length;
    this.cap = cap;
    this.win = new Int32Array(2 * cap);
    this.fail = new Float64Array(2 * cap);
  }

  /** rebase moves the origin of turns to now, keeping every current weight, so the numbers stay exact. */
  private rebase(): void {
    const x = this.x;
    for (let s = 0; s < this.used; s++) if (this.bySlot[s] !== undefined) this.c[s] -= this.w[s]! * x;
    this.x = 0;
    this.build();
  }

  /** build computes every node from the leaves up (the subtrees of slots not handed out yet are empty). */
  private build(): void {
    const { cap, used, win, fail } = this;
    for (let s = 0; s < used; s++) win[cap + s] = this.bySlot[s] === undefined ? -1 : s;
    win.fill(-1, cap + used, 2 * cap);
    fail.fill(Infinity, cap, 2 * cap);
    // Level by level: the nodes from `lo` on cover `span` slots each.
    for (let lo = cap >> 1, span = 2; lo >= 1; lo >>= 1, span <<= 1) {
      for (let n = 2 * lo - 1; n >= lo; n--) {
        if ((n - lo) * span < used) this.pull(n, this.x);
        else {
          win[n] = -1;
          fail[n] = Infinity;
        }
      }
    }
  }

  /** path recomputes the nodes above slot `s`. */
  private path(s: number, x: number): void {
    let n = this.cap + s;
    this.win[n] = this.bySlot[s] === undefined ? -1 : s;
    for (n >>= 1; n >= 1; n >>= 1) this.pull(n, x);
  }

  /** fix recomputes the nodes under `n` whose winner may have changed by turn x. */
  private fix(n: number, x: number): void {
    if (n >= this.cap) {
      this.fail[n] = Infinity;
      return;
    }
    const l = 2 * n;
    if (this.fail[l]! <= x) this.fix(l, x);
    if (this.fail[l + 1]! <= x) this.fix(l + 1, x);
    this.pull(n, x);
  }

  /** pull sets node n's winner at turn x from its children, and when a steeper loser would overtake it. */
  private pull(n: number, x: number): void {
    const a = this.win[2 * n]!;
    const b = this.win[2 * n + 1]!;
    let f = Math.min(this.fail[2 * n]!, this.fail[2 * n + 1]!);
    if (a < 0 || b < 0) {
      this.win[n] = a < 0 ? b : a;
    } else {
      const w = this.w;
      const c = this.c;
      const va = w[a]! * x - c[a]!;
      const vb = w[b]! * x - c[b]!;
      // The larger current weight wins; on a tie the lower slot (a is always the lower).
      const win = vb > va ? b : a;
      const lose = win === a ? b : a;
      this.win[n] = win;
      const dw = w[lose]! - w[win]!;
      if (dw > 0) {
        // The loser's line is steeper: it overtakes near x = Δc / Δw. Checking from ⌊that⌋ (never
        // later than the change) costs at most one spare re-check.
        const at = Math.max(x + 1, Math.floor((c[lose]! - c[win]!) / dw));
        if (at < f) f = at;
      }
    }
    this.fail[n] = f;
  }
}
