/**
 * EtcdRegistry keeps instances in etcd: keys `<prefix>/<name>/<id>`, JSON values, one lease per distinct
 * TTL kept alive every TTL/3 (go-zero's discov publisher does the same with one lease per publisher).
 * That is the `bulwark` layout; the `go-zero` and `go-micro` layouts (etcd-layout.ts) read and write what
 * those frameworks do, the go-zero one with a lease per instance, its key naming the lease.
 *
 * Calls go to a live member of the cluster (etcd-pool.ts): a member that does not answer is skipped for
 * the call and for `cooldownMs` after, the call goes on with the others within its own deadline
 * (`dialTimeoutMs`), and only "no member answered in time" rejects `RegistryUnavailableError`.
 *
 * `register()` and `deregister()` change the desired state at once and then confirm it in etcd:
 * - they resolve once etcd holds the change;
 * - they reject `RegistryPendingError` (a `RegistryUnavailableError`) when it is not confirmed within
 *   `dialTimeoutMs`: the registry keeps trying in the background (100–400 ms apart) until it is written,
 *   or until a later `register()`/`deregister()` of the same instance replaces the wish;
 * - `AbortedError` when the caller's signal aborts the wait: the change is still being made the same way;
 * - `TypeError`/`RangeError` for a bad argument and `ClosedError` after `close()`: then nothing is recorded.
 * A rejection is never "no", always "not confirmed yet, still trying" (go-zero's publisher keeps its key
 * registered until it is stopped in the same way).
 *
 * A lease counts as lost only when etcd says so (a keep-alive answered TTL ≤ 0, a write refused with
 * "lease not found") or when its TTL has passed since the last keep-alive etcd confirmed. A keep-alive that
 * no member answered is retried (100 ms growing to 400 ms) and does not give up the lease: one dead member
 * never costs a new lease. A lost lease is replaced and every instance under it written again, with no help
 * from the application. Values that are not JSON instances are skipped with one warning each.
 */
import { EtcdLeaseInvalidError } from 'etcd3';
import { throwIfAborted } from '../core/abort.js';
import { Backoff } from '../core/backoff.js';
import { systemClock, type Clock, type TimerHandle } from '../core/clock.js';
import { AbortedError, ClosedError, NotFoundError, RegistryPendingError } from '../core/errors.js';
import { clockOption, finite, fn, integer, options as checkOptions, type OptionKeys } from '../core/validate.js';
import { EventQueue } from './event-queue.js';
import { EtcdPool, type PoolMember } from './etcd-pool.js';
import { etcdRegistryDefaults, type EtcdRegistryOptions, type EtcdRegistryStats } from './etcd-registry-options.js';
import { createClient, type EtcdClient } from './etcd-client.js';
import { defaultWarning, Warner } from './etcd-warnings.js';
import { CollapsingQueue } from './collapsing-queue.js';
import { etcdLayout, rangeEnd, type EtcdLayout } from './etcd-layout.js';
import { EtcdWatch } from './etcd-watch.js';
import type { CallOptions, RegisterOptions, Registry, RegistryEvent, ServiceInstance, ServiceListing, WatchOptions } from './types.js';
import { checkInstance, checkName } from './validate.js';
import { etcdConnection } from './etcd-connection.js';
import type { MetricsDescription } from '../core/metrics-description.js';

/** The keys of EtcdRegistryOptions, all of them: any other is refused (see `options`). */
const ETCD_REGISTRY_KEYS = {
  hosts: true,
  tls: true,
  auth: true,
  prefix: true,
  ttlMs: true,
  dialTimeoutMs: true,
  attemptTimeoutMs: true,
  cooldownMs: true,
  watchQueueSize: true,
  onWarning: true,
  clock: true,
  createClient: true,
  layout: true,
} as const satisfies OptionKeys<EtcdRegistryOptions>;

/** etcd's default --max-txn-ops. */
const MAX_TXN_OPS = 128;
/** Well under etcd's default --max-request-bytes (1.5 MiB): instances may carry 64 KiB of metadata each. */
const MAX_TXN_BYTES = 1024 * 1024;
/** Lease TTLs etcd accepts from us: 1 s (its unit) to one day. */
const MIN_TTL_MS = 1000;
const MAX_TTL_MS = 24 * 3600 * 1000;
/** Leases given up but not yet revoked, at most. */
const MAX_OLD_LEASES = 16;
/**
 * How often each member serving a watch is asked a linearizable read (one per member, however many
 * watches it serves), and how long it has to answer. A member cut off from its peers keeps its watch
 * streams open and silent; etcd itself cancels require-leader streams only after about three leaderless
 * election-timeout checks (4–5 × the election timeout), and etcd3 cannot set that metadata. A
 * linearizable read needs a leader: a member without one does not answer it. Every 500 ms (after the
 * previous check), 1 000 ms to answer: the watches leave such a member within about 2.5 s of the cut,
 * at most 2 reads a second per member serving watches.
 */
const LEADER_CHECK_MS = 500;
const LEADER_CHECK_TIMEOUT_MS = 1_000;

export { etcdRegistryDefaults, type EtcdMemberStats, type EtcdRegistryOptions, type EtcdRegistryStats } from './etcd-registry-options.js';

interface Owned {
  readonly instance: ServiceInstance;
  readonly ttlSeconds: number;
  /** The key of its lease in `leases`: the TTL, or the instance's own key when each instance holds a lease. */
  readonly leaseKey: number | string;
}

/** Lease is the lease of one TTL: its id (undefined until granted or after it was lost) and its keep-alive times. */
interface Lease {
  readonly key: number | string;
  readonly ttlSeconds: number;
  id: string | undefined;
  /** The TTL etcd granted, ms. */
  grantedMs: number;
  /** When the last keep-alive etcd answered was sent (or the grant): the lease lives until this + grantedMs. */
  confirmedAt: number;
  /** When the next keep-alive is due. */
  dueAt: number;
  /** Instances under it must be written again. */
  dirty: boolean;
}

/** EtcdRegistry is a Registry on etcd; see the module comment. */
export class EtcdRegistry implements Registry {
  /** The first endpoint. */
  readonly endpoint: string;
  /** How instances map to keys and values, and what they carry (etcd-layout.ts). */
  readonly layout: EtcdLayout;
  private readonly pool: EtcdPool<EtcdClient>;
  private readonly clock: Clock;
  private readonly warner: Warner;
  private readonly root: string;
  private readonly ttlSeconds: number;
  private readonly timeoutMs: number;
  private readonly queueSize: number;
  private readonly owned = new Map<string, Owned>();
  private readonly leases = new Map<number | string, Lease>();
  private readonly pendingDeletes = new Set<string>();
  private readonly unconfirmed = new Set<string>();
  private readonly oldLeases: string[] = [];
  private readonly watches = new Set<EtcdWatch>();
  /** Repairs while no member answers: 100 ms growing to 400 ms, so a returning cluster is used at once. */
  private readonly retry = new Backoff({ initialMs: 100, maxMs: 400, jitter: 'decorrelated' });
  private timer: TimerHandle | undefined;
  private timerAt = Infinity;
  /** The leader check's timer (set while a watch is open). */
  private checkTimer: TimerHandle | undefined;
  private checking = false;
  /** Members that failed a leader check: checked again until they answer, and skipped by calls meanwhile. */
  private readonly suspects = new Set<PoolMember<EtcdClient>>();
  private serial: Promise<unknown> = Promise.resolve();
  private closed = false;
  private readonly counters = {
    leasesGranted: 0,
    leasesLost: 0,
    keepAlives: 0,
    keepAliveFailures: 0,
    rewrites: 0,
    watchResyncs: 0,
    watchMoves: 0,
    leaderChecks: 0,
    leaderCheckFailures: 0,
  };

  constructor(options: EtcdRegistryOptions) {
    const o = checkOptions('EtcdRegistry', options, ETCD_REGISTRY_KEYS);
    const { endpoints: hosts, connection } = etcdConnection('EtcdRegistry', o);
    this.layout = etcdLayout('EtcdRegistry', o.layout ?? etcdRegistryDefaults.layout);
    const prefix = o.prefix ?? this.layout.defaultPrefix;
    // go-zero keys may start with the service name itself (its `Key`): no prefix
    const noPrefix = prefix === '' && this.layout.defaultPrefix === '';
    if (typeof prefix !== 'string' || (!noPrefix && !/^\/?[A-Za-z0-9._:/-]*[A-Za-z0-9._:-]$/.test(prefix))) {
      throw new TypeError(`EtcdRegistry: prefix must be a key path like "/bulwark/services" (no trailing slash), got ${JSON.stringify(prefix)}`);
    }
    const ttlMs = integer('EtcdRegistry', 'ttlMs', o.ttlMs ?? etcdRegistryDefaults.ttlMs, MIN_TTL_MS, MAX_TTL_MS);
    this.timeoutMs = integer('EtcdRegistry', 'dialTimeoutMs', o.dialTimeoutMs ?? etcdRegistryDefaults.dialTimeoutMs, 1);
    const attemptMs = integer('EtcdRegistry', 'attemptTimeoutMs', o.attemptTimeoutMs ?? etcdRegistryDefaults.attemptTimeoutMs, 1);
    const cooldownMs = integer('EtcdRegistry', 'cooldownMs', o.cooldownMs ?? etcdRegistryDefaults.cooldownMs, 0);
    this.queueSize = integer('EtcdRegistry', 'watchQueueSize', o.watchQueueSize ?? etcdRegistryDefaults.watchQueueSize, 1);
    const sink = o.onWarning === undefined ? defaultWarning : fn<(m: string) => void>('EtcdRegistry', 'onWarning', o.onWarning);
    this.clock = clockOption('EtcdRegistry', o.clock, systemClock);
    this.root = prefix === '' ? '' : `${prefix}/`;
    this.ttlSeconds = Math.ceil(ttlMs / 1000);
    this.endpoint = hosts[0]!;
    this.warner = new Warner(sink);
    this.pool = new EtcdPool(
      hosts.map((h) => ({ endpoint: h, client: (o.createClient ?? createClient)(h, connection) })),
      { clock: this.clock, callTimeoutMs: this.timeoutMs, attemptTimeoutMs: attemptMs, cooldownMs },
    );
  }

  /**
   * describeMetrics answers the registry's families (`etcd_registry_…`: leases, keep-alives, rewrites,
   * watch resyncs and moves, retries, and per etcd member whether it is up, its attempts and failures),
   * read from its stats at scrape time.
   */
  describeMetrics(): MetricsDescription {
    const totals: [string, keyof EtcdRegistryStats, string][] = [
      ['etcd_registry_leases_granted_total', 'leasesGranted', 'Leases granted (first ones and replacements).'],
      ['etcd_registry_leases_lost_total', 'leasesLost', 'Leases given up (gone in etcd, or TTL passed without a confirmed keep-alive).'],
      ['etcd_registry_keepalives_total', 'keepAlives', 'Keep-alives etcd answered.'],
      ['etcd_registry_keepalive_failures_total', 'keepAliveFailures', 'Keep-alives no member answered.'],
      ['etcd_registry_rewrites_total', 'rewrites', 'Times every instance under a lease was written again.'],
      ['etcd_registry_watch_resyncs_total', 'watchResyncs', 'Watches that listed again after a compacted revision.'],
      ['etcd_registry_watch_moves_total', 'watchMoves', 'Times a watch stream broke and resumed on a member.'],
      ['etcd_registry_retried_total', 'retried', 'Attempts that failed on a member and were retried.'],
      ['etcd_registry_unavailable_total', 'unavailable', 'Calls no member answered within their deadline.'],
    ];
    const endpoint = ['endpoint'];
    return {
      kind: 'EtcdRegistry',
      families: [
        ...totals.map(([name, , help]) => ({ name, type: 'counter' as const, help, labelNames: [] })),
        { name: 'etcd_registry_leases', type: 'gauge', help: 'Leases held now.', labelNames: [] },
        { name: 'etcd_registry_pending_changes', type: 'gauge', help: 'register/deregister changes not yet confirmed in etcd.', labelNames: [] },
        {
          name: 'etcd_registry_member_up',
          type: 'gauge',
          help: '1 while calls go to an etcd member, 0 while it is skipped after a failure.',
          labelNames: endpoint,
        },
        { name: 'etcd_registry_member_attempts_total', type: 'counter', help: 'Attempts sent to an etcd member.', labelNames: endpoint },
        { name: 'etcd_registry_member_failures_total', type: 'counter', help: 'Attempts that failed on an etcd member.', labelNames: endpoint },
      ],
      collect: (emit) => {
        const s = this.stats();
        for (const [name, field] of totals) emit(name, {}, s[field] as number);
        emit('etcd_registry_leases', {}, s.leases);
        emit('etcd_registry_pending_changes', {}, s.pending);
        for (const m of s.members ?? []) {
          emit('etcd_registry_member_up', { endpoint: m.endpoint }, m.live ? 1 : 0);
          emit('etcd_registry_member_attempts_total', { endpoint: m.endpoint }, m.attempts);
          emit('etcd_registry_member_failures_total', { endpoint: m.endpoint }, m.failures);
        }
      },
      closed: () => this.closed,
    };
  }

  /** stats answers a fresh snapshot of the counters, and what each member has seen. */
  stats(): EtcdRegistryStats {
    const now = this.clock.now();
    const members = this.pool.members.map((m) => {
      let watches = 0;
      for (const w of this.watches) if (w.member === m) watches++;
      return { endpoint: m.endpoint, live: m.downUntil <= now, attempts: m.attempts, failures: m.failures, watches };
    });
    let leases = 0;
    for (const l of this.leases.values()) if (l.id !== undefined) leases++;
    return { ...this.counters, leases, retried: this.pool.retried, unavailable: this.pool.failed, pending: this.unconfirmed.size, members };
  }

  /**
   * register writes the instance under the lease of its TTL (`options.ttlMs`, rounded up to whole
   * seconds, else the registry's) and keeps it there until `deregister()` or `close()`. See the module
   * comment for what its rejections mean: RegistryPendingError says "still trying".
   */
  async register(instance: ServiceInstance, options?: RegisterOptions): Promise<void> {
    const inst = checkInstance('EtcdRegistry.register', instance);
    const o = checkOptions('EtcdRegistry.register', options);
    const ttlSeconds = o.ttlMs === undefined ? this.ttlSeconds : Math.ceil(finite('EtcdRegistry.register', 'ttlMs', o.ttlMs, MIN_TTL_MS, MAX_TTL_MS) / 1000);
    throwIfAborted(o.signal);
    this.open();
    const key = this.keyOf(inst.name, inst.id);
    const entry: Owned = { instance: inst, ttlSeconds, leaseKey: this.layout.leasePerInstance ? key : ttlSeconds };
    this.owned.set(key, entry);
    this.pendingDeletes.delete(this.writtenKey(key, inst.name, inst.id) ?? key);
    this.unconfirmed.add(key);
    const work = this.exclusive(async () => {
      if (this.owned.get(key) !== entry) return; // replaced or deregistered meanwhile: that later call writes
      const lease = this.leaseFor(entry.leaseKey, ttlSeconds);
      try {
        await this.ensureLease(lease);
        await this.put(key, inst, lease);
      } catch (err) {
        lease.dirty = true;
        throw err;
      }
      if (this.owned.get(key) === entry) this.unconfirmed.delete(key);
    });
    return this.confirm(`register of ${inst.name}/${inst.id}`, work, o.signal);
  }

  /** deregister deletes the instance's key; rejections mean the same as register's (the delete goes on). */
  async deregister(instance: ServiceInstance, options?: CallOptions): Promise<void> {
    const name = checkName('EtcdRegistry.deregister', 'instance.name', instance?.name);
    const id = checkName('EtcdRegistry.deregister', 'instance.id', instance.id);
    const signal = checkOptions('EtcdRegistry.deregister', options).signal;
    throwIfAborted(signal);
    this.open();
    const key = this.keyOf(name, id);
    this.owned.delete(key);
    const written = this.writtenKey(key, name, id);
    if (written === undefined) return; // a key that names its lease was never written: nothing to delete
    this.pendingDeletes.add(written);
    this.unconfirmed.add(written);
    return this.confirm(
      `deregister of ${name}/${id}`,
      this.exclusive(() => this.remove(written, key)),
      signal,
    );
  }

  /** getService answers the service's instances; NotFoundError when it has none. */
  async getService(name: string, options?: CallOptions): Promise<ServiceInstance[]> {
    const { instances } = await this.getServiceListing(name, options);
    if (instances.length === 0) throw new NotFoundError(`service ${name} has no instances`);
    return instances;
  }

  /** getServiceListing answers the instances (possibly none) and the etcd revision they were read at; watch events carry mod revisions. */
  async getServiceListing(name: string, options?: CallOptions): Promise<ServiceListing> {
    checkName('EtcdRegistry.getService', 'name', name);
    const signal = checkOptions('EtcdRegistry.getService', options).signal;
    this.open();
    const p = `${this.root}${name}/`;
    const res = await this.pool.call('range', (c, o) => c.kv.range({ key: Buffer.from(p), range_end: rangeEnd(p) }, o), signal);
    const out: ServiceInstance[] = [];
    // go-zero: keys holding one address are one instance (a Set only for that layout: no cost for the others)
    const ids = this.layout.collapseDuplicates ? new Set<string>() : undefined;
    for (const kv of res.kvs) {
      const d = this.layout.decode(this.root, kv);
      if (d.instance === undefined) this.warner.warn(kv, d.error);
      else if (ids === undefined) out.push(d.instance);
      else if (!ids.has(d.instance.id)) {
        ids.add(d.instance.id);
        out.push(d.instance);
      }
    }
    return { instances: out, revision: Number(res.header.revision) };
  }

  /** listServices answers the names of services with at least one instance. */
  async listServices(): Promise<string[]> {
    this.open();
    if (this.root === '')
      throw new TypeError(`EtcdRegistry.listServices: the ${this.layout.name} layout without a prefix has no common key start; give a prefix`);
    const res = await this.pool.call('range', (c, o) => c.kv.range({ key: Buffer.from(this.root), range_end: rangeEnd(this.root), keys_only: true }, o));
    const names = new Set<string>();
    for (const kv of res.kvs) {
      const parts = kv.key.toString().slice(this.root.length).split('/');
      if (parts.length === 2) names.add(parts[0]!);
    }
    return [...names];
  }

  /** watch lists, then watches from the list's revision + 1; see etcd-watch.ts for moving between members, resume and compaction. */
  watch(options?: WatchOptions): AsyncIterable<RegistryEvent> {
    const o = checkOptions('EtcdRegistry.watch', options);
    const service = o.service === undefined ? undefined : checkName('EtcdRegistry.watch', 'service', o.service);
    if (service === undefined && this.root === '') {
      throw new TypeError(`EtcdRegistry.watch: the ${this.layout.name} layout without a prefix needs a service to watch, got none`);
    }
    let w: EtcdWatch | undefined;
    const collapse = this.layout.collapseDuplicates;
    const queue = new (collapse ? CollapsingQueue : EventQueue)(this.queueSize, o.signal, () => {
      if (w === undefined) return;
      this.watches.delete(w);
      void w.stop();
      if (this.watches.size === 0) this.stopLeaderCheck();
    });
    w = new EtcdWatch(
      {
        pool: this.pool,
        clock: this.clock,
        warner: this.warner,
        root: this.root,
        decode: (kv) => this.layout.decode(this.root, kv),
        onListed: collapse ? (i) => (queue as CollapsingQueue).hold(i) : undefined,
        onResync: () => void this.counters.watchResyncs++,
        onMove: () => void this.counters.watchMoves++,
      },
      service,
      queue,
      o.onReady,
    );
    if (this.closed) queue.end();
    if (queue.closed) return queue;
    this.watches.add(w);
    void w.start();
    this.startLeaderCheck();
    return queue;
  }

  /** startLeaderCheck sets the leader check's timer, unless it is set (it runs while a watch is open). */
  private startLeaderCheck(): void {
    // with one member there is nowhere to move to: its calls and watch wait for it as they are
    if (this.checkTimer !== undefined || this.closed || this.pool.members.length < 2) return;
    this.checkTimer = this.clock.setTimeout(() => void this.checkLeaders(), LEADER_CHECK_MS).unref();
  }

  private stopLeaderCheck(): void {
    this.clock.clearTimeout(this.checkTimer);
    this.checkTimer = undefined;
  }

  /**
   * checkLeaders asks each member serving a watch for a linearizable read; the watches of a member that
   * does not answer it within LEADER_CHECK_TIMEOUT_MS move to a member that is live (see LEADER_CHECK_MS),
   * and the member is asked again at every check until it answers, skipped by lookups and keep-alives
   * meanwhile (with several members; one member alone is not checked: there is nowhere to move to).
   */
  private async checkLeaders(): Promise<void> {
    this.checkTimer = undefined;
    if (this.closed || this.checking || this.watches.size === 0) return;
    this.checking = true;
    try {
      const checked = new Set(this.suspects);
      for (const w of this.watches) if (w.member !== undefined) checked.add(w.member);
      const key = Buffer.from(this.root);
      const end = rangeEnd(this.root);
      await Promise.all(
        [...checked].map(async (m) => {
          this.counters.leaderChecks++;
          const ok = await this.pool.probe(
            m,
            'leader check',
            (c, o) => c.kv.range({ key, range_end: end, limit: 1, keys_only: true }, o),
            LEADER_CHECK_TIMEOUT_MS,
          );
          if (ok) {
            this.suspects.delete(m);
            return;
          }
          if (this.closed) return;
          this.counters.leaderCheckFailures++;
          // skipped by calls until the next check could say otherwise, not only for the cooldown
          this.suspects.add(m);
          m.downUntil = Math.max(m.downUntil, this.clock.now() + LEADER_CHECK_MS + LEADER_CHECK_TIMEOUT_MS);
          for (const w of this.watches) if (w.member === m) w.move();
        }),
      );
    } finally {
      this.checking = false;
    }
    if (this.watches.size > 0) this.startLeaderCheck();
  }

  /** close stops keep-alives and watches, revokes the leases (their keys go with them) and closes the clients; idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.stopLeaderCheck();
    await Promise.all([...this.watches].map((w) => w.stop()));
    this.watches.clear();
    // bounded as a whole: closing never waits longer than about one call deadline for a dead cluster
    const revoke = this.exclusive(async () => {
      const ids = [...this.oldLeases];
      for (const l of this.leases.values()) if (l.id !== undefined) ids.push(l.id);
      this.leases.clear();
      this.oldLeases.length = 0;
      await Promise.all(ids.map((id) => this.revoke(id)));
    });
    await this.confirm('close', revoke, undefined).catch(noop);
    for (const m of this.pool.members) m.client.close();
  }

  /** Symbol.asyncDispose closes the registry, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** keyOf is the registry's own handle of an instance (its key in every layout whose key names the id). */
  private keyOf(name: string, id: string): string {
    return `${this.root}${name}/${id}`;
  }

  /** writtenKey is the key the instance of handle `key` is written under now, if known (a key naming a lease needs the lease). */
  private writtenKey(key: string, name: string, id: string): string | undefined {
    if (!this.layout.leasePerInstance) return key;
    const leaseId = this.leases.get(key)?.id;
    return leaseId === undefined ? undefined : this.layout.key(this.root, { name, id, address: '' }, leaseId);
  }

  private open(): void {
    if (this.closed) throw new ClosedError('EtcdRegistry is closed');
  }

  /**
   * confirm waits for `work` at most the call deadline (and until `signal` aborts). When it fails or takes
   * longer, the repair loop carries the change out: the caller hears RegistryPendingError (or AbortedError).
   */
  private confirm(what: string, work: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
    work.catch(() => this.wake(this.retry.next()));
    return new Promise<void>((resolve, reject) => {
      const finish = () => {
        this.clock.clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      const onAbort = () => {
        finish();
        reject(new AbortedError(`${what} aborted (etcd is still being updated)`, { cause: signal!.reason }));
      };
      const timer = this.clock.setTimeout(() => {
        finish();
        reject(new RegistryPendingError(`${what} not confirmed by etcd within ${this.timeoutMs} ms (${this.pool.endpoints}); still trying`));
      }, this.timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      work.then(
        () => {
          finish();
          resolve();
        },
        (err: unknown) => {
          finish();
          const msg = err instanceof Error ? err.message : String(err);
          reject(new RegistryPendingError(`${what} not confirmed by etcd: ${msg}; still trying`, { cause: err }));
        },
      );
    });
  }

  /** exclusive runs lease and write work one at a time, so a repair never races a register. */
  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.serial.then(work, work);
    this.serial = run.catch(noop);
    return run;
  }

  /** leaseFor answers the lease of a TTL (or of one instance), creating its record (not yet granted) on first use. */
  private leaseFor(key: number | string, ttlSeconds: number): Lease {
    let lease = this.leases.get(key);
    if (lease !== undefined && lease.ttlSeconds !== ttlSeconds) {
      // an instance's own lease (go-zero) and the instance registered again with another TTL: a new lease,
      // and so a new key, replace it; the old key goes when the old lease is revoked
      this.leases.delete(key);
      if (lease.id !== undefined && this.oldLeases.length < MAX_OLD_LEASES) this.oldLeases.push(lease.id);
      lease = undefined;
    }
    if (lease === undefined) {
      lease = { key, ttlSeconds, id: undefined, grantedMs: ttlSeconds * 1000, confirmedAt: 0, dueAt: Infinity, dirty: false };
      this.leases.set(key, lease);
    }
    return lease;
  }

  private async ensureLease(lease: Lease): Promise<void> {
    if (lease.id !== undefined) return;
    const sentAt = this.clock.now();
    const res = await this.pool.call('lease grant', (c, o) => c.leaseClient.leaseGrant({ TTL: lease.ttlSeconds }, o));
    lease.id = res.ID;
    lease.grantedMs = Number(res.TTL) * 1000;
    lease.confirmedAt = sentAt;
    lease.dueAt = sentAt + Math.max(100, lease.grantedMs / 3);
    this.counters.leasesGranted++;
    this.wake(lease.dueAt - this.clock.now());
  }

  private loseLease(lease: Lease): void {
    if (lease.id === undefined) return;
    this.counters.leasesLost++;
    if (this.oldLeases.length < MAX_OLD_LEASES) this.oldLeases.push(lease.id);
    lease.id = undefined;
    lease.dirty = true;
  }

  /** put writes under the lease; a lease etcd no longer knows (expired while we were paused) is replaced at once. */
  private async put(key: string, inst: ServiceInstance, lease: Lease): Promise<void> {
    const value = this.layout.encode(inst);
    await this.underLease(lease, (id) =>
      this.pool.call('put', (c, o) =>
        c.kv.put({ key: Buffer.from(this.layout.leasePerInstance ? this.layout.key(this.root, inst, id) : key), value, lease: id }, o),
      ),
    );
  }

  /**
   * putAll writes many instances in as few transactions as etcd allows (one round trip each instead of
   * one per instance: after etcd returns, the last of 20 sequential puts landed ~60 ms after the first).
   */
  private async putAll(entries: ReadonlyArray<readonly [string, ServiceInstance]>, lease: Lease): Promise<void> {
    let batch: Array<{ key: Buffer; value: Buffer }> = [];
    let bytes = 0;
    for (const [key, inst] of entries) {
      const op = { key: Buffer.from(key), value: this.layout.encode(inst) };
      if (batch.length > 0 && (batch.length >= MAX_TXN_OPS || bytes + op.key.length + op.value.length > MAX_TXN_BYTES)) {
        await this.putBatch(batch, lease);
        batch = [];
        bytes = 0;
      }
      batch.push(op);
      bytes += op.key.length + op.value.length;
    }
    if (batch.length > 0) await this.putBatch(batch, lease);
  }

  /** putBatch writes `ops` in one transaction under the lease. */
  private putBatch(ops: ReadonlyArray<{ key: Buffer; value: Buffer }>, lease: Lease): Promise<unknown> {
    return this.underLease(lease, (id) => {
      const success = ops.map((op) => ({ request_put: { key: op.key, value: op.value, lease: id } }));
      return this.pool.call('put', (c, o) => c.kv.txn({ success }, o));
    });
  }

  /** underLease runs `write` with the lease's id; when etcd answers "lease not found", it takes a new lease and writes once more. */
  private async underLease<T>(lease: Lease, write: (id: string) => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      await this.ensureLease(lease);
      try {
        return await write(lease.id!);
      } catch (err) {
        if (attempt > 0 || !((err as Error).cause instanceof EtcdLeaseInvalidError)) throw err;
        this.loseLease(lease);
      }
    }
  }

  /** remove deletes `key`; `handle` is the instance's own key when the written key names a lease. */
  private async remove(key: string, handle = key): Promise<void> {
    await this.pool.call('delete', (c, o) => c.kv.deleteRange({ key: Buffer.from(key) }, o));
    this.pendingDeletes.delete(key);
    if (!this.owned.has(handle)) this.unconfirmed.delete(key);
  }

  private revoke(id: string): Promise<void> {
    return this.pool.call('lease revoke', (c, o) => c.leaseClient.leaseRevoke({ ID: id }, o)).then(noop, noop);
  }

  /** wake makes the maintenance tick run within `ms` (an earlier tick already set is kept). */
  private wake(ms: number): void {
    if (this.closed) return;
    const at = this.clock.now() + Math.max(0, ms);
    if (this.timer !== undefined && this.timerAt <= at) return;
    this.clock.clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = this.clock.setTimeout(() => void this.maintain(), Math.max(0, ms)).unref();
  }

  /** maintain is the keep-alive tick; it also repairs: new leases, rewrites, pending deletes, unused and old leases. */
  private async maintain(): Promise<void> {
    this.timer = undefined;
    this.timerAt = Infinity;
    if (this.closed) return;
    const ok = await this.exclusive(async () => {
      let ok = true;
      for (const lease of [...this.leases.values()]) {
        try {
          await this.tend(lease);
        } catch {
          ok = false;
        }
      }
      for (const key of [...this.pendingDeletes]) {
        try {
          await this.remove(key);
        } catch {
          ok = false;
        }
      }
      // revoke given-up leases only once every instance is written under its new lease: revoking deletes the keys still on them
      if (ok) while (this.oldLeases.length > 0) await this.revoke(this.oldLeases.shift()!);
      return ok;
    });
    if (this.closed) return;
    if (!ok) return this.wake(this.retry.next()); // a failed keep-alive is due again: retry soon, not at once
    this.retry.reset();
    let next = Infinity;
    for (const l of this.leases.values()) if (l.id !== undefined) next = Math.min(next, l.dueAt - this.clock.now());
    if (next !== Infinity) this.wake(next);
  }

  /** tend keeps one lease alive when due, replaces it when lost, writes its instances again when needed, and drops it when unused. */
  private async tend(lease: Lease): Promise<void> {
    const entries: Array<[string, ServiceInstance]> = [];
    for (const [key, o] of this.owned) if (o.leaseKey === lease.key) entries.push([key, o.instance]);
    if (entries.length === 0) {
      this.leases.delete(lease.key);
      if (lease.id !== undefined && this.oldLeases.length < MAX_OLD_LEASES) this.oldLeases.push(lease.id);
      return;
    }
    if (lease.id !== undefined && this.clock.now() >= lease.dueAt) await this.keepAlive(lease);
    if (lease.id === undefined || lease.dirty) {
      lease.dirty = true;
      await this.ensureLease(lease);
      this.counters.rewrites++;
      // a lease of its own: one instance, whose key names the lease (put, not putAll: the lease may change on the way)
      if (this.layout.leasePerInstance) await this.put(entries[0]![0], entries[0]![1], lease);
      else await this.putAll(entries, lease);
      lease.dirty = false;
      for (const [key, inst] of entries) if (this.owned.get(key)?.instance === inst) this.unconfirmed.delete(key);
    }
  }

  /**
   * keepAlive renews the lease on any member that answers. The lease is lost only when etcd answers that
   * it is gone (TTL ≤ 0) or when its TTL has passed since the last renewal etcd confirmed; a keep-alive
   * no member answered just fails (and is tried again soon).
   */
  private async keepAlive(lease: Lease): Promise<void> {
    const id = lease.id!;
    const sentAt = this.clock.now();
    let ttl: number;
    try {
      ttl = await this.pool.call('lease keep-alive', (c, o) => c.keepAlive(id, o));
    } catch (err) {
      if ((err as Error).cause instanceof EtcdLeaseInvalidError) {
        this.loseLease(lease); // etcd answered: the lease is gone
        return;
      }
      this.counters.keepAliveFailures++;
      if (this.clock.now() - lease.confirmedAt >= lease.grantedMs) this.loseLease(lease);
      throw err;
    }
    if (lease.id !== id) return;
    if (ttl <= 0) {
      this.loseLease(lease);
      return;
    }
    this.counters.keepAlives++;
    lease.grantedMs = ttl * 1000;
    lease.confirmedAt = sentAt;
    lease.dueAt = sentAt + Math.max(100, lease.grantedMs / 3);
  }
}

function noop(): void {}
