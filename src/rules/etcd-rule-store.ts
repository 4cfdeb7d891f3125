/**
 * EtcdRuleStore: rules in etcd, one key per rule under a prefix (`/bulwark/rules/<scope>/<kind>/<name>`),
 * the fleet's control plane. It runs on the registry's etcd mechanics: one client per member and
 * EtcdPool's failover (a call moves to a live member; a cluster down rejects after `dialTimeoutMs`).
 *
 * - Revisions are etcd's: a record's `revision` is its key's mod revision, `ifRevision` a transaction
 *   comparing it (0: the key must be absent), so concurrent writers are ordered by etcd and the last
 *   write in revision order wins.
 * - A rule written with `ttlMs` (a fault rule) sits on a lease of that length (⌈ttlMs / 1000⌉ s): etcd
 *   deletes it when the lease ends, whatever any process's clock says, and watchers see the delete.
 * - `watch(from)` delivers every change after `from` in revision order, the keys of one revision in one
 *   change. A stream that breaks moves to a live member and resumes from the last revision delivered
 *   (nothing lost, nothing repeated); while no member answers it keeps trying (50 ms doubling to 1 s)
 *   and the watcher keeps what it has. When etcd cancels the watch (its revision was compacted) it lists
 *   again and delivers a resync, then watches on from the listing's revision.
 * - `history(key)` answers the versions of the key's current life (or of none, once deleted) that etcd
 *   still holds (compaction forgets older ones); `rollback` reads the key at any revision not compacted.
 */
import type { IKeyValue, IWatchResponse, Watcher } from 'etcd3';
import { Backoff } from '../core/backoff.js';
import { systemClock, type Clock, type TimerHandle } from '../core/clock.js';
import { ClosedError, RuleConflictError } from '../core/errors.js';
import { clockOption, fn as fnOption, options as optionsObject, positive, showValue, type OptionKeys } from '../core/validate.js';
import { etcdConnection, type EtcdConnection, type EtcdConnectionOptions } from '../registry/etcd-connection.js';
import { EtcdPool } from '../registry/etcd-pool.js';
import { createClient, type EtcdClient } from '../registry/etcd-client.js';
import { rangeEnd } from '../registry/etcd-layout.js';
import type { RuleChange, RuleListing, RulePutOptions, RuleRecord, RuleRecordChange, RuleRemoveOptions, RuleStore, RuleVersion, RuleWatch } from './types.js';

/** EtcdRuleStoreOptions configures an EtcdRuleStore. */
export interface EtcdRuleStoreOptions extends EtcdConnectionOptions {
  /** etcd's members: `etcd://host:port[,host:port]`, `http(s)://host[:port]` or `host:port`, one string or an array. Required. */
  hosts: string | string[];
  /** The prefix of every rule key (ends in `/`). Defaults to `/bulwark/rules/`. */
  prefix?: string;
  /** How long a call may take over every member before it rejects RegistryUnavailableError. Defaults to 3 000. */
  dialTimeoutMs?: number;
  /** How long one attempt on one member may take. Defaults to 1 000. */
  attemptTimeoutMs?: number;
  /** How long a member that did not answer is skipped. Defaults to 1 000. */
  cooldownMs?: number;
  /** The clock of every timer (deadlines, cooldowns, the watch's retries). Defaults to `systemClock`. */
  clock?: Clock;
  /** @internal Builds the client of one member: tests pass fakes. Defaults to an etcd3 client. */
  createClient?: (host: string, connection: EtcdConnection) => EtcdClient;
}

/** Defaults for EtcdRuleStoreOptions. */
export const etcdRuleStoreDefaults = Object.freeze({ prefix: '/bulwark/rules/', dialTimeoutMs: 3_000, attemptTimeoutMs: 1_000, cooldownMs: 1_000 });

const ETCD_RULE_STORE_KEYS = {
  hosts: true,
  tls: true,
  auth: true,
  prefix: true,
  dialTimeoutMs: true,
  attemptTimeoutMs: true,
  cooldownMs: true,
  clock: true,
  createClient: true,
} as const satisfies OptionKeys<EtcdRuleStoreOptions>;

/** EtcdRuleStore keeps rules in etcd; see the module comment. */
export class EtcdRuleStore implements RuleStore {
  /** The prefix of every key. */
  readonly prefix: string;
  private readonly pool: EtcdPool<EtcdClient>;
  private readonly clock: Clock;
  private readonly watches = new Set<EtcdRuleWatch>();
  private closed = false;

  constructor(options: EtcdRuleStoreOptions) {
    const o = optionsObject('EtcdRuleStore', options, ETCD_RULE_STORE_KEYS);
    const { endpoints: hosts, connection } = etcdConnection('EtcdRuleStore', o);
    const prefix = o.prefix ?? etcdRuleStoreDefaults.prefix;
    if (typeof prefix !== 'string' || !prefix.endsWith('/'))
      throw new TypeError(`EtcdRuleStore: prefix must be a string ending in '/', got ${showValue(prefix)}`);
    this.prefix = prefix;
    this.clock = clockOption('EtcdRuleStore', o.clock, systemClock);
    const make =
      o.createClient === undefined ? createClient : fnOption<(h: string, c: EtcdConnection) => EtcdClient>('EtcdRuleStore', 'createClient', o.createClient);
    this.pool = new EtcdPool(
      hosts.map((h) => ({ endpoint: h, client: make(h, connection) })),
      {
        clock: this.clock,
        callTimeoutMs: positive('EtcdRuleStore', 'dialTimeoutMs', o.dialTimeoutMs ?? etcdRuleStoreDefaults.dialTimeoutMs),
        attemptTimeoutMs: positive('EtcdRuleStore', 'attemptTimeoutMs', o.attemptTimeoutMs ?? etcdRuleStoreDefaults.attemptTimeoutMs),
        cooldownMs: positive('EtcdRuleStore', 'cooldownMs', o.cooldownMs ?? etcdRuleStoreDefaults.cooldownMs),
      },
    );
  }

  async list(): Promise<RuleListing> {
    this.check();
    const key = Buffer.from(this.prefix);
    const res = await this.pool.call('range', (c, o) => c.kv.range({ key, range_end: rangeEnd(this.prefix) }, o));
    return { revision: Number(res.header.revision), records: res.kvs.map((kv) => this.record(kv)) };
  }

  async get(key: string): Promise<RuleRecord | undefined> {
    this.check();
    const res = await this.pool.call('range', (c, o) => c.kv.range({ key: this.full(key) }, o));
    const kv = res.kvs[0];
    return kv === undefined ? undefined : this.record(kv);
  }

  async put(key: string, value: string, options?: RulePutOptions): Promise<number> {
    this.check();
    const k = this.full(key);
    let lease: string | undefined;
    if (options?.ttlMs !== undefined) {
      const ttl = Math.max(1, Math.ceil(positive('EtcdRuleStore.put', 'ttlMs', options.ttlMs) / 1000));
      lease = (await this.pool.call('lease grant', (c, o) => c.leaseClient.leaseGrant({ TTL: ttl }, o))).ID;
    }
    const put = { key: k, value: Buffer.from(value), ...(lease === undefined ? {} : { lease }) };
    if (options?.ifRevision === undefined) {
      const res = await this.pool.call('put', (c, o) => c.kv.put(put, o));
      return Number(res.header.revision);
    }
    return this.swap(key, options.ifRevision, { request_put: put });
  }

  async remove(key: string, options?: RuleRemoveOptions): Promise<number> {
    this.check();
    const k = this.full(key);
    if (options?.ifRevision === undefined) {
      const res = await this.pool.call('delete', (c, o) => c.kv.deleteRange({ key: k }, o));
      return Number(res.header.revision);
    }
    return this.swap(key, options.ifRevision, { request_delete_range: { key: k } });
  }

  watch(fromRevision: number, listener: (change: RuleChange) => void): RuleWatch {
    this.check();
    const w = new EtcdRuleWatch(this, this.pool, this.clock, fromRevision, listener);
    this.watches.add(w);
    w.attach();
    return {
      close: async () => {
        this.watches.delete(w);
        await w.stop();
      },
    };
  }

  async history(key: string): Promise<RuleVersion[]> {
    this.check();
    const k = this.full(key);
    const out: RuleVersion[] = [];
    let at = 0;
    // Walk back from the current version through the mod revisions of the key's current life.
    for (let i = 0; i < 1000; i++) {
      const revision = at > 0 ? String(at) : undefined;
      let res;
      try {
        res = await this.pool.call('range', (c, o) => c.kv.range({ key: k, revision }, o));
      } catch (err) {
        if (refusedAs(err, 'compacted')) break;
        throw err;
      }
      const kv = res.kvs[0];
      if (kv === undefined) break;
      out.push({ key, revision: Number(kv.mod_revision), value: kv.value.toString() });
      at = Number(kv.mod_revision) - 1;
      if (at < Number(kv.create_revision)) break;
    }
    return out.reverse();
  }

  /** at answers the key's text as of `revision` (undefined: absent then); RuleConflictError-free, but rejects for a compacted revision. */
  async at(key: string, revision: number): Promise<string | undefined> {
    this.check();
    const res = await this.pool.call('range', (c, o) => c.kv.range({ key: this.full(key), revision: String(revision) }, o));
    return res.kvs[0]?.value.toString();
  }

  /** stats: what each member has seen, and the store's call counters. */
  stats(): { retried: number; unavailable: number; watches: number; resyncs: number; moves: number } {
    let resyncs = 0;
    let moves = 0;
    for (const w of this.watches) {
      resyncs += w.resyncs;
      moves += w.moves;
    }
    return { retried: this.pool.retried, unavailable: this.pool.failed, watches: this.watches.size, resyncs, moves };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.watches].map((w) => w.stop()));
    this.watches.clear();
    for (const m of this.pool.members) m.client.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** record reads one etcd key-value as a RuleRecord. @internal */
  record(kv: IKeyValue): RuleRecord {
    const lease = String(kv.lease ?? '0');
    const r: RuleRecord = { key: kv.key.toString().slice(this.prefix.length), value: kv.value.toString(), revision: Number(kv.mod_revision) };
    if (lease !== '0') r.leased = true;
    return r;
  }

  private full(key: string): Buffer {
    if (typeof key !== 'string' || key === '') throw new TypeError(`EtcdRuleStore: key must be a non-empty string, got ${showValue(key)}`);
    return Buffer.from(this.prefix + key);
  }

  /** swap runs `op` if the key's mod revision is `ifRevision` (0: absent); RuleConflictError otherwise. */
  private async swap(
    key: string,
    ifRevision: number,
    op: { request_put?: { key: Buffer; value: Buffer; lease?: string } } | { request_delete_range?: { key: Buffer } },
  ): Promise<number> {
    const k = this.full(key);
    const res = await this.pool.call('txn', (c, o) =>
      c.kv.txn(
        { compare: [{ key: k, target: 'Mod', result: 'Equal', mod_revision: String(ifRevision) }], success: [op], failure: [{ request_range: { key: k } }] },
        o,
      ),
    );
    if (res.succeeded) return Number(res.header.revision);
    const found = Number(res.responses[0]?.response_range?.kvs[0]?.mod_revision ?? 0);
    throw new RuleConflictError(`rule ${key} is at revision ${found}, not ${ifRevision}`, { revision: found });
  }

  private check(): void {
    if (this.closed) throw new ClosedError('EtcdRuleStore is closed');
  }
}

/** EtcdRuleWatch is one watch of an EtcdRuleStore; see the module comment. */
class EtcdRuleWatch {
  private watcher: Watcher | undefined;
  private stopped = false;
  private timer: TimerHandle | undefined;
  private readonly retry = new Backoff({ initialMs: 50, maxMs: 1000, jitter: 'decorrelated' });
  resyncs = 0;
  moves = 0;

  constructor(
    private readonly store: EtcdRuleStore,
    private readonly pool: EtcdPool<EtcdClient>,
    private readonly clock: Clock,
    /** The last revision delivered. */
    private revision: number,
    private readonly listener: (change: RuleChange) => void,
  ) {}

  /** attach starts an etcd watcher on a live member from the last revision delivered + 1. */
  attach(): void {
    this.timer = undefined;
    if (this.stopped) return;
    const m = this.pool.pick()!;
    const prefix = this.store.prefix;
    const w = m.client
      .watch()
      .prefix(prefix)
      .startRevision(String(this.revision + 1))
      .watcher();
    this.watcher = w;
    let connected = false;
    w.on('data', (res: IWatchResponse) => {
      if (this.watcher !== w) return;
      this.deliver(res);
    });
    // etcd3 moves its resume revision to the server's when a watch (re)connects; resume from what was delivered.
    w.on('connected', () => {
      if (this.watcher !== w) return;
      (w.request as { start_revision?: string }).start_revision = String(this.revision + 1);
      connected = true;
      this.retry.reset();
      this.pool.answeredOn(m);
    });
    w.on('disconnected', (err: Error) => {
      if (this.watcher !== w) return;
      this.drop(w);
      this.pool.failedOn(m, err);
      this.moves++;
      // not unref'd: a watch keeps its process alive while it reconnects (as EtcdRegistry's)
      this.timer = this.clock.setTimeout(() => this.attach(), connected ? 0 : this.retry.next());
    });
    // etcd cancels a watch whose start revision was compacted: list again and resync.
    w.on('error', () => {
      if (this.watcher !== w) return;
      this.drop(w);
      void this.resync();
    });
  }

  /** deliver hands on the events of one response, one change per revision. */
  private deliver(res: IWatchResponse): void {
    let batch: RuleRecordChange[] = [];
    let at = 0;
    const flush = () => {
      if (batch.length === 0) return;
      this.revision = at;
      this.emit({ type: 'changes', revision: at, changes: batch });
      batch = [];
    };
    for (const ev of res.events) {
      const revision = Number(ev.kv.mod_revision);
      if (revision <= this.revision) continue; // delivered before a reconnect: never repeat
      if (revision !== at) flush();
      at = revision;
      if (ev.type === 'Delete') batch.push({ key: ev.kv.key.toString().slice(this.store.prefix.length), value: undefined, revision });
      else batch.push(this.store.record(ev.kv));
    }
    flush();
  }

  private emit(change: RuleChange): void {
    try {
      this.listener(change);
    } catch {
      // the listener's failure must not break the watch
    }
  }

  /** resync lists again and delivers the whole state (the resume revision was compacted). */
  private async resync(): Promise<void> {
    if (this.stopped) return;
    this.resyncs++;
    let listing: RuleListing;
    try {
      listing = await this.store.list();
    } catch {
      this.timer = this.clock.setTimeout(() => void this.resync(), this.retry.next());
      return;
    }
    if (this.stopped) return;
    this.retry.reset();
    this.revision = listing.revision;
    this.emit({ type: 'resync', revision: listing.revision, records: listing.records });
    this.attach();
  }

  private drop(w: Watcher): void {
    this.watcher = undefined;
    w.removeAllListeners();
    w.on('error', noop);
    void w.cancel().catch(noop);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.clock.clearTimeout(this.timer);
    const w = this.watcher;
    if (w === undefined) return;
    this.watcher = undefined;
    w.removeAllListeners();
    w.on('error', noop);
    let timer: TimerHandle | undefined;
    await Promise.race([w.cancel().catch(noop), new Promise((r) => (timer = this.clock.setTimeout(() => r(undefined), 1000)))]);
    this.clock.clearTimeout(timer);
  }
}

function noop(): void {}

/** refusedAs: etcd refused the call with `what` in its message (mvcc's "required revision has been compacted"). */
function refusedAs(err: unknown, what: string): boolean {
  for (let e = err; e instanceof Error; e = e.cause) if (e.message.includes(what)) return true;
  return false;
}
