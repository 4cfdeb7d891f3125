/**
 * InstanceTable: the per-list state every picker keeps. A picker syncs it only when it is handed a
 * different array than last time (identity check), so `pick` on an unchanged list is allocation-free.
 * Per-instance state is keyed by id: kept for instances that stay, dropped for instances that leave.
 */
import { NoInstanceError } from '../core/errors.js';
import type { ServiceInstance } from '../registry/types.js';

/** The largest weight honoured; larger ones are clamped (keeps smooth-WRR sums exact in doubles). */
export const MAX_WEIGHT = 1_000_000;

/** Entry is the state a picker keeps for one instance; `instance` is the latest object for its id. */
export interface Entry {
  instance: ServiceInstance;
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
 * builds the entry for an id, given the entry it had in the previous list (undefined when new).
 */
export class InstanceTable<E extends Entry> {
  /** The array the entries were built from. */
  source: readonly ServiceInstance[] | undefined = undefined;
  /** One entry per distinct id, in order of first appearance (the object of the last appearance). */
  entries: E[] = [];
  private byId = new Map<string, E>();

  constructor(private readonly make: (instance: ServiceInstance, previous: E | undefined) => E) {}

  /** sync rebuilds the entries for `list` unless it is the array they were built from, and returns them. */
  sync(list: readonly ServiceInstance[]): E[] {
    if (list === this.source) return this.entries;
    if (!Array.isArray(list)) throw new TypeError(`pick: instances must be an array, got ${list === null ? 'null' : typeof list}`);
    const last = new Map<string, ServiceInstance>();
    for (const inst of list) {
      if (inst === null || typeof inst !== 'object' || typeof inst.id !== 'string') {
        throw new TypeError(`pick: every instance must be an object with a string id, got ${inst === null ? 'null' : typeof inst}`);
      }
      last.set(inst.id, inst);
    }
    const byId = new Map<string, E>();
    const entries: E[] = [];
    for (const [id, inst] of last) {
      const e = this.make(inst, this.byId.get(id));
      byId.set(id, e);
      entries.push(e);
    }
    this.byId = byId;
    this.entries = entries;
    this.source = list;
    return entries;
  }

  /** get returns the entry for `id` in the current list. */
  get(id: string): E | undefined {
    return this.byId.get(id);
  }
}
