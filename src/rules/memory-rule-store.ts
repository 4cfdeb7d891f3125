/**
 * MemoryRuleStore: rules in this process (the embedded default: the demo, tests, a single process).
 * Revisions increase by one per write, as etcd's do; a rule written with `ttlMs` is deleted by a timer
 * on the store's clock when its life ends (a ManualClock drives it in tests). It keeps the changes of
 * its last `historyLimit` revisions, for `watch` to replay and `history` to show; `compact(revision)`
 * forgets those up to a revision, as etcd's compaction does, so a watch from before it gets a resync.
 */
import { systemClock, type Clock, type TimerHandle } from '../core/clock.js';
import { ClosedError, RuleConflictError } from '../core/errors.js';
import { clockOption, integer, options as optionsObject, type OptionKeys } from '../core/validate.js';
import type { RuleChange, RuleListing, RulePutOptions, RuleRecord, RuleRecordChange, RuleRemoveOptions, RuleStore, RuleVersion, RuleWatch } from './types.js';

/** MemoryRuleStoreOptions configures a MemoryRuleStore. */
export interface MemoryRuleStoreOptions {
  /** The clock of rule lives. Defaults to `systemClock`. */
  clock?: Clock;
  /** Revisions whose changes are kept for replay and history. Defaults to 1 000. */
  historyLimit?: number;
}

/** Defaults for MemoryRuleStoreOptions. */
export const memoryRuleStoreDefaults = Object.freeze({ historyLimit: 1_000 });

const MEMORY_RULE_STORE_KEYS = { clock: true, historyLimit: true } as const satisfies OptionKeys<MemoryRuleStoreOptions>;

interface Entry {
  record: RuleRecord;
  timer: TimerHandle | undefined;
}

/** MemoryRuleStore holds rules in memory; see the module comment. */
export class MemoryRuleStore implements RuleStore {
  private readonly clock: Clock;
  private readonly historyLimit: number;
  private readonly entries = new Map<string, Entry>();
  /** One entry per revision, oldest first: the changes made at it. */
  private readonly log: Array<{ revision: number; changes: RuleRecordChange[] }> = [];
  private readonly watchers = new Set<(change: RuleChange) => void>();
  private rev = 0;
  /** Changes at or below this revision are no longer in the log. */
  private compacted = 0;
  private closed = false;

  constructor(options?: MemoryRuleStoreOptions) {
    const o = optionsObject('MemoryRuleStore', options, MEMORY_RULE_STORE_KEYS);
    this.clock = clockOption('MemoryRuleStore', o.clock, systemClock);
    this.historyLimit = integer('MemoryRuleStore', 'historyLimit', o.historyLimit ?? memoryRuleStoreDefaults.historyLimit, 1);
  }

  /** revision is the store's current revision (0 before the first write). */
  get revision(): number {
    return this.rev;
  }

  async list(): Promise<RuleListing> {
    this.check();
    return { revision: this.rev, records: [...this.entries.values()].map((e) => ({ ...e.record })).sort(byKey) };
  }

  async get(key: string): Promise<RuleRecord | undefined> {
    this.check();
    const e = this.entries.get(key);
    return e === undefined ? undefined : { ...e.record };
  }

  async put(key: string, value: string, options?: RulePutOptions): Promise<number> {
    this.check();
    this.compare(key, options?.ifRevision);
    const old = this.entries.get(key);
    if (old !== undefined) this.clock.clearTimeout(old.timer);
    const revision = ++this.rev;
    const ttl = options?.ttlMs;
    const record: RuleRecord = ttl === undefined ? { key, value, revision } : { key, value, revision, leased: true, expiresAt: this.clock.now() + ttl };
    const timer = ttl === undefined ? undefined : this.clock.setTimeout(() => this.expire(key, revision), ttl);
    (timer as { unref?: () => void } | undefined)?.unref?.();
    this.entries.set(key, { record, timer });
    this.commit(revision, [{ ...record }]);
    return revision;
  }

  async remove(key: string, options?: RuleRemoveOptions): Promise<number> {
    this.check();
    this.compare(key, options?.ifRevision);
    return this.delete(key) ?? this.rev;
  }

  /**
   * apply writes several keys at one revision (undefined deletes), as one etcd transaction does: a
   * watcher gets them in one change. Answers the revision.
   */
  async apply(writes: Record<string, string | undefined>): Promise<number> {
    this.check();
    const revision = ++this.rev;
    const changes: RuleRecordChange[] = [];
    for (const [key, value] of Object.entries(writes)) {
      const old = this.entries.get(key);
      if (old !== undefined) this.clock.clearTimeout(old.timer);
      if (value === undefined) {
        if (old === undefined) continue;
        this.entries.delete(key);
        changes.push({ key, value: undefined, revision });
      } else {
        const record = { key, value, revision };
        this.entries.set(key, { record, timer: undefined });
        changes.push({ ...record });
      }
    }
    this.commit(revision, changes);
    return revision;
  }

  watch(fromRevision: number, listener: (change: RuleChange) => void): RuleWatch {
    this.check();
    if (fromRevision < this.compacted) {
      listener({ type: 'resync', revision: this.rev, records: [...this.entries.values()].map((e) => ({ ...e.record })).sort(byKey) });
    } else {
      for (const step of this.log)
        if (step.revision > fromRevision) listener({ type: 'changes', revision: step.revision, changes: step.changes.map((c) => ({ ...c })) });
    }
    this.watchers.add(listener);
    return { close: async () => void this.watchers.delete(listener) };
  }

  async history(key: string): Promise<RuleVersion[]> {
    this.check();
    const out: RuleVersion[] = [];
    for (const step of this.log) for (const c of step.changes) if (c.key === key) out.push({ key, revision: c.revision, value: c.value });
    return out;
  }

  async at(key: string, revision: number): Promise<string | undefined> {
    this.check();
    if (revision < this.compacted) throw new RangeError(`MemoryRuleStore: revision ${revision} was compacted (the oldest kept is ${this.compacted + 1})`);
    let value: string | undefined;
    for (const step of this.log) {
      if (step.revision > revision) break;
      for (const c of step.changes) if (c.key === key) value = c.value;
    }
    return value;
  }

  /** compact forgets the changes at or below `revision` (etcd's compaction): a watch from before it is resynced. */
  compact(revision: number): void {
    while (this.log.length > 0 && this.log[0]!.revision <= revision) this.log.shift();
    this.compacted = Math.max(this.compacted, Math.min(revision, this.rev));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const e of this.entries.values()) this.clock.clearTimeout(e.timer);
    this.watchers.clear();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private check(): void {
    if (this.closed) throw new ClosedError('MemoryRuleStore is closed');
  }

  private compare(key: string, ifRevision: number | undefined): void {
    if (ifRevision === undefined) return;
    const found = this.entries.get(key)?.record.revision ?? 0;
    if (found !== ifRevision) throw new RuleConflictError(`rule ${key} is at revision ${found}, not ${ifRevision}`, { revision: found });
  }

  /** expire deletes a rule whose life ended, unless it was written again since. */
  private expire(key: string, revision: number): void {
    if (this.closed || this.entries.get(key)?.record.revision !== revision) return;
    this.delete(key);
  }

  private delete(key: string): number | undefined {
    const old = this.entries.get(key);
    if (old === undefined) return undefined;
    this.clock.clearTimeout(old.timer);
    this.entries.delete(key);
    const revision = ++this.rev;
    this.commit(revision, [{ key, value: undefined, revision }]);
    return revision;
  }

  private commit(revision: number, changes: RuleRecordChange[]): void {
    this.log.push({ revision, changes });
    if (this.log.length > this.historyLimit) this.compacted = this.log.shift()!.revision;
    for (const w of [...this.watchers]) w({ type: 'changes', revision, changes: changes.map((c) => ({ ...c })) });
  }
}

function byKey(a: RuleRecord, b: RuleRecord): number {
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}
