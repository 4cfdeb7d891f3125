/**
 * InstanceTable: the per-list state every picker keeps. A picker syncs it only when it is handed a
 * different array than last time (identity check), so `pick` on an unchanged list is allocation-free.
 * Per-instance state is keyed by id: kept for instances that stay, dropped for instances that leave.
 *
 * A sync walks the new list beside the old one comparing objects, and looks ids up only where they
 * differ: an instance added, removed or ejected at N = 10 000 costs one pass of pointer comparisons
 * (tens of µs) plus map work for what changed. It reports what changed (`added`, `removed`,
 * `updated`) so that pickers with derived structures (a ring, a scheduler) update only those.
 */
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

/**
 * InstanceTable maps the last list a picker saw to one entry per distinct id. `make(instance, previous)`
 * builds the entry for an id, given the entry it had in the previous list (undefined when new); it is
 * called only for ids that are new or whose instance object changed.
 */
export class InstanceTable<E extends Entry> {
  /** The array the entries were built from. */
  source: readonly ServiceInstance[] | undefined = undefined;
  /** One entry per distinct id, in order of first appearance (the object of the last appearance). */
  entries: E[] = [];
  /** What the last sync changed: entries new to the list, gone from it, and given a new instance object. */
  added: E[] = [];
  removed: E[] = [];
  updated: E[] = [];
  private readonly byId = new Map<string, E>();
  private generation = 0;

  constructor(private readonly make: (instance: ServiceInstance, previous: E | undefined) => E) {}

  /** sync rebuilds the entries for `list` unless it is the array they were built from, and returns them. */
  sync(list: readonly ServiceInstance[]): E[] {
    if (list === this.source) return this.entries;
    if (!Array.isArray(list)) throw new TypeError(`pick: instances must be an array, got ${list === null ? 'null' : typeof list}`);
    const gen = ++this.generation;
    const old = this.entries;
    const entries: E[] = [];
    const added: E[] = [];
    const updated: E[] = [];
    let i = 0; // the old entry expected next
    for (let j = 0; j < list.length; j++) {
      const inst = list[j]!;
      const expected = i < old.length ? old[i]! : undefined;
      if (expected !== undefined && expected.instance === inst && expected.seen !== gen) {
        expected.seen = gen;
        expected.index = entries.length;
        entries.push(expected);
        i++;
        continue;
      }
      if (inst === null || typeof inst !== 'object' || typeof inst.id !== 'string') {
        throw new TypeError(`pick: every instance must be an object with a string id, got ${inst === null ? 'null' : typeof inst}`);
      }
      let e = this.byId.get(inst.id);
      if (e === undefined) {
        e = this.make(inst, undefined);
        e.seen = gen;
        e.index = entries.length;
        this.byId.set(inst.id, e);
        entries.push(e);
        added.push(e);
        continue;
      }
      if (e.seen === gen) {
        // A duplicate id (rare): the later object wins, the first place stays.
        if (e.instance !== inst) {
          this.update(e, inst);
          if (!added.includes(e) && !updated.includes(e)) updated.push(e);
        }
        continue;
      }
      if (e.instance !== inst) {
        this.update(e, inst);
        updated.push(e);
      }
      if (e.seen === gen - 1 && old[e.index] === e) i = e.index + 1; // resynchronise the walk after it
      e.seen = gen;
      e.index = entries.length;
      entries.push(e);
    }
    const removed: E[] = [];
    for (let k = 0; k < old.length; k++) {
      const e = old[k]!;
      if (e.seen !== gen) {
        this.byId.delete(e.instance.id);
        removed.push(e);
      }
    }
    this.entries = entries;
    this.added = added;
    this.removed = removed;
    this.updated = updated;
    this.source = list;
    return entries;
  }

  private update(e: E, inst: ServiceInstance): void {
    if (this.make(inst, e) !== e) throw new Error('InstanceTable: make must update and return the previous entry');
  }

  /** get returns the entry for `id` in the current list. */
  get(id: string): E | undefined {
    return this.byId.get(id);
  }
}
