/**
 * RecordingRuleStore: a RuleStore in memory that remembers every write, for the dashboard's control
 * tests (what the controls wrote, and that a refused value wrote nothing). bulwark/rules' own stores
 * are tested by that module; this one only holds keys and revisions.
 */
import type { RuleChange, RuleListing, RulePutOptions, RuleRecord, RuleRemoveOptions, RuleStore, RuleWatch } from '../../src/rules/types.js';

export class RecordingRuleStore implements RuleStore {
  readonly writes: Array<{ op: 'put' | 'remove'; key: string; value?: string; ttlMs?: number }> = [];
  private readonly records = new Map<string, RuleRecord>();
  private revision = 0;
  /** onWrite, when set, hears each write (the dashboard child prints it). */
  onWrite: ((w: { op: 'put' | 'remove'; key: string; value?: string; ttlMs?: number }) => void) | undefined;

  list(): Promise<RuleListing> {
    return Promise.resolve({ revision: this.revision, records: [...this.records.values()] });
  }

  get(key: string): Promise<RuleRecord | undefined> {
    return Promise.resolve(this.records.get(key));
  }

  put(key: string, value: string, options?: RulePutOptions): Promise<number> {
    this.revision++;
    this.records.set(key, { key, value, revision: this.revision });
    const w = { op: 'put' as const, key, value, ...(options?.ttlMs === undefined ? {} : { ttlMs: options.ttlMs }) };
    this.writes.push(w);
    this.onWrite?.(w);
    return Promise.resolve(this.revision);
  }

  remove(key: string, _options?: RuleRemoveOptions): Promise<number> {
    if (this.records.delete(key)) this.revision++;
    const w = { op: 'remove' as const, key };
    this.writes.push(w);
    this.onWrite?.(w);
    return Promise.resolve(this.revision);
  }

  watch(_fromRevision: number, _listener: (change: RuleChange) => void): RuleWatch {
    return { close: () => Promise.resolve() };
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
