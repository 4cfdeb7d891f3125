/**
 * InstanceTable: the per-list state every picker keeps. A picker syncs it only when it is handed a
 * different array than last time (identity check), so `pick` on an unchanged list is allocation-free.
 * Per-instance state is keyed by id: kept for instances that stay, dropped for instances that leave.
 *
 * A sync walks the new list beside the old one comparing objects, and looks ids up only where they
 * differ: an instance added, removed or ejected at N = 10 000 costs one pass of pointer comparisons
 * (tens of µs) plus map work for what changed. It reports what changed (`added`, `removed`,
 * `updated`) so that pickers with derived structures (a ring, a scheduler) update only those.
 *
 * A list that differs in thousands of entries (a registry's whole new list) is synced in slices of
 * `sliceSize` units, one per timer turn of `clock`, when the table has a clock and already holds a
 * list: meanwhile `entries` stays the previous list's and `source` is the new list, so picks keep
 * using the old entries at no extra cost. The walk then finds, in its own slices, the old entries that
 * left; once it is done, `source` is cleared (or, with `hold`, kept until the owner calls `handOver`)
 * and the next sync of that list hands the new entries over in one pass of plain assignments. The
 * ids that left are dropped from the id map 1 024 a timer turn after that (an entry older than the
 * list answers no `get` meanwhile). A first list (no previous entries to pick from) is synced at once,
 * unless the caller asks for slices (`sync(list, true)`, a picker's `prepare`): then `source` stays
 * undefined, so a pick of the list completes the walk at once.
 */
import type { Clock, TimerHandle } from '../core/clock.js';
import { NoInstanceError } from '../core/errors.js';
import type { ServiceInstance } from '../registry/types.js';

/** The largest weight honoured; larger ones are clamped (keeps smooth-WRR sums exact in doubles). */
export const MAX_WEIGHT = 1_000_000;

/** Entry is the state a picker keeps for one instance; `instance` is the latest object for its id. */
export interface Entry {
  instance: ServiceInstance;
  /** The sync that last saw the entry (the table's bookkeeping; start at 0). */
  seen: number;
  /** The entry's index in `entries` (the table's bookkeeping; start at 0). */
  index: number;
}

/**
 * weightOf parses `metadata.weight`: a positive finite number, clamped to 1 000 000; anything else
 * (missing, empty, `"0"`, `"-2"`, `"abc"`, `"Infinity"`) counts as 1. `warn` is called when the value
 * is present but unusable, so callers can warn once per instance.
 */
export function weightOf(instance: ServiceInstance, warn?: (message: string) => void): number {
  const raw = instance.metadata?.weight;
  if (raw === undefined) return 1;
  const w = typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : NaN;
  if (!Number.isFinite(w) || w <= 0) {
    warn?.(`bulwark: instance ${instance.id} has weight ${JSON.stringify(raw)}, not a positive finite number; using 1`);
    return 1;
  }
  if (w > MAX_WEIGHT) {
    warn?.(`bulwark: instance ${instance.id} has weight ${raw}, above ${MAX_WEIGHT}; using ${MAX_WEIGHT}`);
    return MAX_WEIGHT;
  }
  return w;
}

/** instanceWeight is `weightOf` without warnings. */
export function instanceWeight(instance: ServiceInstance): number {
  return weightOf(instance);
}

/** defaultWarn reports a bad weight as a process warning. */
export function defaultWarn(message: string): void {
  process.emitWarning(message, { code: 'BULWARK_BAD_WEIGHT' });
}

/** allowedCount counts the entries whose instance `exclude` lacks. */
export function allowedCount(entries: readonly Entry[], exclude: { has(id: string): boolean }): number {
  let m = 0;
  for (let i = 0; i < entries.length; i++) if (!exclude.has(entries[i]!.instance.id)) m++;
  return m;
}

/** nthAllowed returns the k-th (from 0) entry whose instance `exclude` lacks; k must be below allowedCount. */
export function nthAllowed<E extends Entry>(entries: readonly E[], exclude: { has(id: string): boolean }, k: number): E {
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    if (!exclude.has(e.instance.id) && k-- === 0) return e;
  }
  return entries[0]!;
}

/** noInstance builds the error every picker throws on an empty list. */
export function noInstance(): NoInstanceError {
  return new NoInstanceError('no instance to pick: the instance list is empty');
}

/** InstanceTableOptions configures how an InstanceTable applies large changes. */
export interface InstanceTableOptions {
  /** Sets the timers of a sliced sync. Defaults to none: every sync completes at once. */
  clock?: Clock | undefined;
  /**
   * The most work one slice of a sync does, in units (an entry compared is one, an id looked up 8, an
   * entry made or updated 32). Defaults to 65 536 (about 0.5 ms).
   */
  sliceSize?: number;
  /** Called from a timer turn after a sliced sync of `list` is complete: sync `list` again to take it over (or, with `hold`, call `handOver()`). */
  onReady?: (list: readonly ServiceInstance[]) => void;
  /**
   * Keep a complete sliced sync waiting for `handOver()`: `source` stays the new list, so picks keep
   * the previous entries until the owner has prepared its own state for the new ones (`next`).
   * Defaults to false: the next sync of the list takes it over.
   */
  hold?: boolean;
}

/** The default `sliceSize`: 1 600 new instances, or a list of 60 000 that differs from the last in one, per slice. */
export const TABLE_SLICE = 1 << 16;
/** Work units of a sync (see `sliceSize`). */
const LOOKUP = 8;
const MAKE = 32;
/** Entries that left dropped from the id map at once; more are dropped this many per timer turn. */
const DROP_SLICE = 1_024;

/** sliceLists checks a picker's `sliceLists` option (a boolean, default false). */
export function sliceLists(owner: string, value: unknown): boolean {
  if (value !== undefined && typeof value !== 'boolean') throw new TypeError(`${owner}: sliceLists must be a boolean, got ${typeof value}`);
  return value === true;
}

/**
 * prepareList is the built-in pickers' `prepare`: `sync(list, sliceFirst)` is the picker's own sync
 * of a list (its table's, then its own per-list work). A first list is walked in slices too; `done`
 * is called once the table has taken a list over (from the timer turn that completes the walk, which
 * then takes it over, or at once).
 */
export function prepareList<E extends Entry>(
  t: InstanceTable<E>,
  list: readonly ServiceInstance[],
  sync: (list: readonly ServiceInstance[], sliceFirst: boolean) => unknown,
  done: () => void,
): void {
  if (list !== t.source) sync(list, true);
  t.whenTaken(() => {
    if (t.next?.list === list) sync(list, false);
    done();
  });
}

/** Walk is a sync in progress: the new list, how far it got, and what it found. */
interface Walk<E extends Entry> {
  readonly list: readonly ServiceInstance[];
  readonly gen: number;
  /** The next index of `list` to visit, and the old entry expected there. */
  j: number;
  i: number;
  readonly entries: E[];
  readonly added: E[];
  readonly updated: E[];
  /** Updates applied at handover, so the old entries stay as they were meanwhile: entry, instance, entry, … */
  readonly pending: (E | ServiceInstance)[];
  /** The old entries not in the list, found once the list is walked; `k` is how far that scan got. */
  readonly removed: E[];
  k: number;
  timer: TimerHandle | undefined;
}

/** Walked is what a complete sliced sync will hand over (see `InstanceTable.next`). */
export interface Walked<E extends Entry> {
  readonly list: readonly ServiceInstance[];
  readonly added: readonly E[];
  readonly removed: readonly E[];
  /** The updates handOver applies: entry, its new instance, entry, … */
  readonly updates: readonly (E | ServiceInstance)[];
}

/**
 * InstanceTable maps the last list a picker saw to one entry per distinct id. `make(instance, previous)`
 * builds the entry for an id, given the entry it had in the previous list (undefined when new); it is
 * called only for ids that are new or whose instance object changed.
 */
export class InstanceTable<E extends Entry> {
  /** The array the entries were built from, or the one being synced in slices (see the module comment). */
  source: readonly ServiceInstance[] | undefined = undefined;
  /** One entry per distinct id, in order of first appearance (the object of the last appearance). */
  entries: E[] = [];
  /** What the last sync changed: entries new to the list, gone from it, and given a new instance object. */
  added: E[] = [];
  removed: E[] = [];
  updated: E[] = [];
  private readonly byId = new Map<string, E>();
  private generation = 0;
  /** The walk the entries came from: an entry whose `seen` is older left the list (it may still be in `byId`, until dropped). */
  private live = 0;
  /** Entries that left, dropped from `byId` on timer turns from `dropAt` on. */
  private drops: E[] = [];
  private dropAt = 0;
  private dropTimer: TimerHandle | undefined = undefined;
  private readonly hold: boolean;
  /** Called once no sliced sync is pending (see `whenTaken`). */
  private waiting: (() => void)[] = [];
  private walk: Walk<E> | undefined = undefined;
  /** A list whose sliced walk met a bad instance. */
  private failed: readonly ServiceInstance[] | undefined = undefined;
  private clock: Clock | undefined;
  private readonly sliceSize: number;
  private readonly onReady: ((list: readonly ServiceInstance[]) => void) | undefined;

  constructor(
    private readonly make: (instance: ServiceInstance, previous: E | undefined) => E,
    options?: InstanceTableOptions,
  ) {
    this.clock = options?.clock;
    this.sliceSize = options?.sliceSize ?? TABLE_SLICE;
    this.onReady = options?.onReady;
    this.hold = options?.hold === true;
  }

  /** pending is true while a sliced sync runs or waits for its handover. */
  get pending(): boolean {
    return this.walk !== undefined;
  }

  /**
   * sync makes the entries those of `list` unless it is `source`, and returns them: at once, or — a
   * large change of a table that has entries (or, with `sliceFirst`, none yet) and a clock — in
   * slices, returning the previous entries (with nothing reported changed) until the walk is complete.
   * A sync of the list being walked completes the walk at once.
   */
  sync(list: readonly ServiceInstance[], sliceFirst = false): E[] {
    if (list === this.source) return this.entries;
    const running = this.walk;
    if (running !== undefined) {
      this.walk = undefined;
      if (running.list === list) {
        // Walked, or a first list being walked (nothing to pick from meanwhile): complete it now.
        try {
          this.step(running, Infinity);
        } catch (err) {
          this.cancel(running);
          throw err;
        }
        return this.done(this.finish(running));
      }
      this.cancel(running);
    }
    if (!Array.isArray(list)) throw new TypeError(`pick: instances must be an array, got ${list === null ? 'null' : typeof list}`);
    const w: Walk<E> = { list, gen: ++this.generation, j: 0, i: 0, entries: [], added: [], updated: [], pending: [], removed: [], k: 0, timer: undefined };
    const sliced = this.clock !== undefined && (this.entries.length > 0 || sliceFirst) && list !== this.failed;
    let done: boolean;
    try {
      done = this.step(w, sliced ? this.sliceSize : Infinity);
    } catch (err) {
      this.cancel(w);
      throw err;
    }
    if (done) return this.done(this.finish(w));
    this.walk = w;
    // Picks use the previous entries meanwhile; with none (a first list), a pick completes the walk.
    this.source = this.entries.length > 0 ? list : undefined;
    this.added = [];
    this.removed = [];
    this.updated = [];
    this.schedule(w);
    return this.entries;
  }

  /** next answers what a complete sliced sync held for `handOver()` will hand over, or undefined. */
  get next(): Walked<E> | undefined {
    const w = this.walk;
    if (w === undefined || w.j < w.list.length || w.k < this.entries.length) return undefined;
    return { list: w.list, added: w.added, removed: w.removed, updates: w.pending };
  }

  /**
   * handOver takes over the list of a complete sliced sync (see `hold`) and returns the new entries,
   * reporting what changed as `sync` does; undefined when none is complete.
   */
  handOver(): E[] | undefined {
    const w = this.walk;
    if (w === undefined || this.next === undefined) return undefined;
    this.walk = undefined;
    return this.done(this.finish(w));
  }

  /**
   * whenTaken calls `fn` once no sliced sync is pending: now, or from the timer turn that completes
   * one (before the list is taken over: `next` tells which) or from the sync that completes it.
   */
  whenTaken(fn: () => void): void {
    if (this.walk === undefined) fn();
    else this.waiting.push(fn);
  }

  /** close drops a sliced sync in progress (its timer and what it found); later syncs complete at once. */
  close(): void {
    const w = this.walk;
    this.walk = undefined;
    if (w !== undefined) this.cancel(w);
    if (this.dropTimer !== undefined) this.clock!.clearTimeout(this.dropTimer);
    this.dropTimer = undefined;
    this.dropAll();
    this.clock = undefined;
  }

  /** get returns the entry for `id` in the current list (while a sliced sync runs, possibly one of the next). */
  get(id: string): E | undefined {
    const e = this.byId.get(id);
    return e !== undefined && e.seen >= this.live ? e : undefined;
  }

  private schedule(w: Walk<E>): void {
    w.timer = this.clock!.setTimeout(() => {
      w.timer = undefined;
      if (this.walk !== w) return;
      let done: boolean;
      try {
        done = this.step(w, this.sliceSize);
      } catch {
        // A bad instance: the next sync of the list walks it at once, so that the pick throws.
        this.walk = undefined;
        this.cancel(w);
        this.failed = w.list;
        return;
      }
      if (!done) return this.schedule(w);
      if (!this.hold && this.source === w.list) this.source = undefined; // the next sync of the list takes it over
      if (this.onReady === undefined && this.waiting.length === 0) return;
      // On a turn of its own: the callbacks take the list over, after this turn's slice.
      w.timer = this.clock!.setTimeout(() => {
        w.timer = undefined;
        if (this.walk !== w) return;
        this.onReady?.(w.list);
        this.wake();
      }, 0);
      w.timer.unref();
    }, 0);
    w.timer.unref();
  }

  /** cancel forgets a walk: its timer, and the entries it made (not in the old list). */
  private cancel(w: Walk<E>): void {
    if (w.timer !== undefined) this.clock!.clearTimeout(w.timer);
    w.timer = undefined;
    for (const e of w.added) if (this.byId.get(e.instance.id) === e) this.byId.delete(e.instance.id);
    const old = this.entries;
    for (let k = 0; k < old.length; k++) old[k]!.index = k; // the walk moved those it visited
    if (this.source === w.list) this.source = undefined;
  }

  /**
   * step walks `w` on until `budget` units are spent; answers true when the list is done. Of the old
   * entries only `seen` and `index` change (an entry's index is read only while the walk has not
   * visited it; a dropped walk restores them): updates wait in `pending` for the handover.
   */
  private step(w: Walk<E>, budget: number): boolean {
    const { list, gen, entries, added, updated, pending } = w;
    const old = this.entries;
    const byId = this.byId;
    const n = list.length;
    let i = w.i;
    let j = w.j;
    let spent = 0;
    while (j < n && spent < budget) {
      // The common case, a run of the same objects in the same order: a pointer comparison each.
      const stop = budget - spent < n - j ? j + Math.ceil(budget - spent) : n;
      const from = j;
      for (; j < stop && i < old.length; i++, j++) {
        const x = old[i]!;
        if (x.instance !== list[j] || x.seen === gen) break;
        x.seen = gen;
        x.index = entries.length;
        entries.push(x);
      }
      spent += j - from;
      if (j === stop) continue;
      const inst = list[j++]!;
      spent += 1 + LOOKUP;
      if (inst === null || typeof inst !== 'object' || typeof inst.id !== 'string') {
        throw new TypeError(`pick: every instance must be an object with a string id, got ${inst === null ? 'null' : typeof inst}`);
      }
      const e = byId.get(inst.id);
      if (e === undefined || (e.seen !== gen && old[e.index] !== e)) {
        spent += MAKE;
        const made = this.make(inst, undefined);
        made.seen = gen;
        made.index = entries.length;
        byId.set(inst.id, made);
        entries.push(made);
        added.push(made);
        continue;
      }
      if (e.seen === gen) {
        // A duplicate id (rare): the later object wins, the first place stays.
        pending.push(e, inst);
        if (e.instance !== inst && !added.includes(e) && !updated.includes(e)) updated.push(e);
        continue;
      }
      if (e.instance !== inst) {
        spent += MAKE;
        pending.push(e, inst);
        updated.push(e);
      }
      i = e.index + 1; // resynchronise the walk after it
      e.seen = gen;
      e.index = entries.length;
      entries.push(e);
    }
    w.i = i;
    w.j = j;
    if (j < n) return false;
    // Then the old entries the walk did not meet: they leave the list.
    const removed = w.removed;
    let k = w.k;
    const end = budget - spent < old.length - k ? k + Math.ceil(budget - spent) : old.length;
    for (; k < end; k++) if (old[k]!.seen !== gen) removed.push(old[k]!);
    w.k = k;
    return k === old.length;
  }

  /** finish hands a complete walk over: indices, the updates it found, and the entries no longer listed. */
  private finish(w: Walk<E>): E[] {
    const { entries, gen, pending } = w;
    if (w.timer !== undefined) this.clock?.clearTimeout(w.timer); // its onReady turn: taken over already
    w.timer = undefined;
    for (let k = 0; k < pending.length; k += 2) this.update(pending[k] as E, pending[k + 1] as ServiceInstance);
    const removed = w.removed;
    // Entries that left answer no `get` from now on (their `seen` is older than `live`); many are
    // dropped from the id map on later timer turns.
    this.live = gen;
    if (this.clock === undefined || removed.length <= DROP_SLICE) {
      for (let k = 0; k < removed.length; k++) this.drop(removed[k]!);
    } else {
      this.drops = this.dropAt === this.drops.length ? removed : this.drops.slice(this.dropAt).concat(removed);
      this.dropAt = 0;
      this.scheduleDrops();
    }
    this.failed = undefined;
    this.entries = entries;
    this.added = w.added;
    this.removed = removed;
    this.updated = w.updated;
    this.source = w.list;
    return entries;
  }

  /** done calls the `whenTaken` callbacks once no walk is pending, and answers `entries`. */
  private done(entries: E[]): E[] {
    if (this.waiting.length > 0 && this.walk === undefined) this.wake();
    return entries;
  }

  private wake(): void {
    const waiting = this.waiting;
    this.waiting = [];
    for (const fn of waiting) fn();
  }

  private drop(e: E): void {
    if (this.byId.get(e.instance.id) === e) this.byId.delete(e.instance.id);
  }

  private dropAll(): void {
    const drops = this.drops;
    for (let k = this.dropAt; k < drops.length; k++) this.drop(drops[k]!);
    this.drops = [];
    this.dropAt = 0;
  }

  private scheduleDrops(): void {
    if (this.dropTimer !== undefined) return;
    this.dropTimer = this.clock!.setTimeout(() => {
      this.dropTimer = undefined;
      const drops = this.drops;
      const end = Math.min(drops.length, this.dropAt + DROP_SLICE);
      for (let k = this.dropAt; k < end; k++) this.drop(drops[k]!);
      this.dropAt = end;
      if (end < drops.length) this.scheduleDrops();
      else this.drops = [];
    }, 0);
    this.dropTimer.unref();
  }

  private update(e: E, inst: ServiceInstance): void {
    if (this.make(inst, e) !== e) throw new Error('InstanceTable: make must update and return the previous entry');
  }
}
