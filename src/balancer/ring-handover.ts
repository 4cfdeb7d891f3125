/**
 * RingHash's per-instance work for a list that differs from the last in thousands of instances, done
 * in slices beside the state picks use, so that the turn that swaps it in does plain assignments:
 *
 * - `stage`: before the handover of a list the instance table has walked (and holds), what the new
 *   list does to the ring as it is: which members become absent or present again, the points each
 *   instance wants, and the total. Nothing it reads may change meanwhile (RingHash restarts it if so).
 * - `reconcile`: once a rebuilt ring is complete, which of its members are absent, the entry of each
 *   slot, and the instances whose points still differ from what they want (those that joined or
 *   changed weight while it was built).
 *
 * Both are generators yielding whenever about `stepSize` units are spent (an instance is `PER_INSTANCE`
 * units: a few map lookups). RingHash alone uses them; they are not part of the package API.
 * @internal
 */
import type { TimerHandle } from '../core/clock.js';
import type { HashRing, RingBuild } from '../core/hash-ring.js';
import type { ServiceInstance } from '../registry/types.js';
import { instanceWeight, type Entry, type Walked } from './instance-table.js';
import type { RingSize } from './ring-size.js';
import { xorshift32 } from './xorshift.js';

/** RingEntry is RingHash's state for one instance. */
export interface RingEntry extends Entry {
  /** Calls in flight (started, not yet reported). */
  load: number;
  weight: number;
}

/** Job is a ring being rebuilt in slices, then reconciled with the list in slices. */
export interface Job {
  readonly build: RingBuild;
  timer: TimerHandle | undefined;
  /** Ids that left the list while it ran (the new ring may hold them). */
  readonly left: string[];
  /** Once the ring is built: its reconciliation with `entries` (started again if the list changes). */
  settle: Generator<void, Reconciled, void> | undefined;
  entries: readonly RingEntry[];
}

/** Prep is a list the table has walked, staged in slices before it is taken over. */
export interface Prep {
  readonly list: readonly ServiceInstance[];
  /** The RingHash epoch the staging started in: a change of ring state since means starting again. */
  epoch: number;
  steps: Generator<void, Staged, void> | undefined;
  staged: Staged | undefined;
  timer: TimerHandle | undefined;
}

/** Units of work of one instance staged or reconciled (about 0.5 µs: two or three map lookups and sets in maps of thousands). */
export const PER_INSTANCE = 128;

/** Staged is what a walked list does to the ring state (see `stage`). */
export interface Staged {
  /** The members absent after the handover, with their points, and their total. */
  readonly absent: Map<string, number>;
  absentPoints: number;
  /** Σ points the listed instances want. */
  present: number;
  /** Slots whose member leaves the list, and (slot, entry) pairs of members present again. */
  readonly clear: number[];
  readonly set: (number | RingEntry)[];
  /** Members whose points must change, and the ring work that is (a point added 8, dropped 1). */
  readonly changes: [string, number][];
  work: number;
  /** (entry, weight) pairs of instances whose weight changes at the handover. */
  readonly weights: (RingEntry | number)[];
}

/**
 * stage computes, in slices, what taking over `walked` does to the ring state `ring`, `absent` and
 * `present` (the present total at `size`'s scale). The caller checks that none of them changed
 * between the steps.
 */
export function* stage(
  ring: HashRing,
  size: RingSize,
  absent: ReadonlyMap<string, number>,
  absentPoints: number,
  present: number,
  walked: Walked<RingEntry>,
  stepSize: number,
): Generator<void, Staged, void> {
  const s: Staged = { absent: new Map(), absentPoints, present, clear: [], set: [], changes: [], work: 0, weights: [] };
  const per = Math.max(1, Math.floor(stepSize / PER_INSTANCE));
  let k = 0;
  const tick = () => ++k % per === 0;
  for (const [id, pts] of absent) {
    s.absent.set(id, pts);
    if (tick()) yield;
  }
  for (const e of walked.removed) {
    const id = e.instance.id;
    s.present -= size.pointsFor(e.weight);
    const slot = ring.slotOf(id);
    if (slot >= 0) {
      const pts = ring.pointsAt(slot);
      s.clear.push(slot);
      s.absent.set(id, pts);
      s.absentPoints += pts;
    }
    if (tick()) yield;
  }
  const onRing = ring.size > 0;
  for (const e of walked.added) {
    const id = e.instance.id;
    const was = s.absent.size > 0 ? s.absent.get(id) : undefined;
    if (was !== undefined) {
      s.absent.delete(id);
      s.absentPoints -= was;
    }
    const slot = onRing ? ring.slotOf(id) : -1;
    if (slot >= 0) s.set.push(slot, e);
    const want = size.pointsFor(e.weight);
    s.present += want;
    const had = slot < 0 ? 0 : ring.pointsAt(slot);
    if (had !== want) {
      s.changes.push([id, want]);
      s.work += want > had ? 8 * (want - had) : had - want;
    }
    if (tick()) yield;
  }
  // The last update of an entry wins (an id listed twice has two).
  const updates = walked.updates;
  const done = new Set<RingEntry>();
  for (let u = updates.length - 2; u >= 0; u -= 2) {
    const e = updates[u] as RingEntry;
    if (done.has(e)) continue;
    done.add(e);
    const w = instanceWeight(updates[u + 1] as ServiceInstance);
    if (w === e.weight) continue;
    const want = size.pointsFor(w);
    s.present += want - size.pointsFor(e.weight);
    s.weights.push(e, w);
    const had = ring.pointsOf(e.instance.id);
    s.changes.push([e.instance.id, want]);
    s.work += want > had ? 8 * (want - had) : had - want;
    if (tick()) yield;
  }
  return s;
}

/** Reconciled is a rebuilt ring's state against the list (see `reconcile`). */
export interface Reconciled {
  readonly absent: Map<string, number>;
  readonly absentPoints: number;
  readonly bySlot: (RingEntry | undefined)[];
  readonly changes: [string, number][];
}

/**
 * reconcile computes, in slices, the state of the rebuilt `ring` against the list `entries` (`get`
 * answers an id's entry in it): its absent members among `gone` (ids that were absent or left the
 * list), each slot's entry, and the instances whose points differ from what they want at `size`.
 */
export function* reconcile(
  ring: HashRing,
  size: RingSize,
  entries: readonly RingEntry[],
  get: (id: string) => RingEntry | undefined,
  gone: readonly string[],
  stepSize: number,
): Generator<void, Reconciled, void> {
  const per = Math.max(1, Math.floor(stepSize / PER_INSTANCE));
  let k = 0;
  const tick = () => ++k % per === 0;
  const absent = new Map<string, number>();
  let absentPoints = 0;
  for (const id of gone) {
    const pts = ring.pointsOf(id);
    if (pts !== 0 && !absent.has(id) && get(id) === undefined) {
      absent.set(id, pts);
      absentPoints += pts;
    }
    if (tick()) yield;
  }
  const bySlot: (RingEntry | undefined)[] = [];
  const changes: [string, number][] = [];
  for (const e of entries) {
    const id = e.instance.id;
    const slot = ring.slotOf(id);
    if (slot >= 0) bySlot[slot] = e;
    const want = size.pointsFor(e.weight);
    if ((slot < 0 ? 0 : ring.pointsAt(slot)) !== want) changes.push([id, want]);
    if (tick()) yield;
  }
  return { absent, absentPoints, bySlot, changes };
}

/**
 * RingCounts lists a rebuild's changes, read lazily in its steps: `[member, points]` pairs — given, or
 * every entry's points at `size`'s scale when read — then `gone` with no points (a plain iterator: a
 * rebuild reads thousands of them a step).
 */
export class RingCounts implements IterableIterator<readonly [string, number]> {
  private i = 0;
  private j = 0;

  constructor(
    private readonly counts: readonly (readonly [string, number])[] | readonly RingEntry[],
    private readonly size: RingSize | undefined,
    private readonly gone: readonly string[],
  ) {}

  next(): IteratorResult<readonly [string, number]> {
    const counts = this.counts;
    if (this.i < counts.length) {
      const c = counts[this.i++]!;
      const size = this.size;
      const value = size === undefined ? (c as readonly [string, number]) : ([(c as RingEntry).instance.id, size.pointsFor((c as RingEntry).weight)] as const);
      return { value, done: false };
    }
    if (this.j < this.gone.length) return { value: [this.gone[this.j++]!, 0], done: false };
    return { value: undefined, done: true };
  }

  [Symbol.iterator](): this {
    return this;
  }
}

/**
 * jump is jump consistent hashing (Lamping & Veach, "A Fast, Minimal Memory, Consistent Hash
 * Algorithm", 2014) with a 32-bit xorshift stream seeded by `h`: a bucket in [0, n) for the key hash
 * `h`; when n grows by one, only 1/(n + 1) of the keys move (to the new bucket). O(log n), no memory.
 */
export function jump(h: number, n: number): number {
  let b = 0;
  let x = h >>> 0 || 0x9e3779b9;
  for (let j = 0; j < n;) {
    b = j;
    x = xorshift32(x) >>> 0;
    j = Math.floor((b + 1) * (4294967296 / (x + 1)));
  }
  return b;
}
