/**
 * EtcdFleetStore: the fleet on etcd (etcd3), the control plane the registry already uses. Per
 * dependency key, under `<prefix><key>/`:
 *
 * - `r/<caller>` each process's report ("gen|calls|failures"), put under the process's lease: a process
 *   that dies drops out when its lease expires (etcd's TTL is in whole seconds: ⌈ttlMs / 1000⌉, at least 2);
 * - `g` the generation; `p/<gen>` the current probe permit period (JSON: start, taken), taken in
 *   transactions that compare the key's revision (retried on a conflict);
 * - `p/<gen>/<start>/o` and `…/f`, a period's probe results, counted by the keys' versions: the probe
 *   whose success is the period's last one needed (the `o` key at version needed − 1, no `f` key, `g`
 *   still at gen) moves the generation on in the same transaction, one round trip without a read and
 *   without a conflict to retry; a new period deletes the results of the ones before, a new generation
 *   every permit key;
 * - one watch on the prefix delivers reports, departures (a deleted `r/` key) and generations.
 *
 * Permit periods are timed on this process's wall clock (etcd has no clock of its own to read): the
 * hosts' clocks should agree to well within `openMs`. Every operation is bounded by `timeoutMs`.
 */
import { Etcd3, EtcdLeaseInvalidError, LeaseState, type IOptions, type Lease, type Watcher, type IKeyValue } from 'etcd3';
import type { Clock } from '../core/clock.js';
import { systemClock, wallClock } from '../core/clock.js';
import { RegistryDeniedError } from '../core/errors.js';
import { etcd3Options, etcdConnection, type EtcdAuthOptions, type EtcdTlsOptions } from '../registry/etcd-connection.js';
import { denied } from '../registry/etcd-pool.js';
import type { Disposer } from '../core/events.js';
import { clockOption, options as optionsObject, positive, showValue } from '../core/validate.js';
import type { BreakerFleetOptions, FleetLink, FleetMember } from '../breaker/types.js';
import { newCallerId } from './caller-id.js';
import { FleetView, fleetDefaults } from './fleet-view.js';
import type { FleetReport } from './quorum.js';
import { withTimeout } from './store-timeout.js';
import type { FleetEvent, FleetSnapshot, FleetStore, PermitAnswer } from './types.js';

/** EtcdFleetStoreOptions configures an EtcdFleetStore. */
export interface EtcdFleetStoreOptions {
  /**
   * etcd's members, in the registry's forms (`etcd://host:port[,host:port]`, `http(s)://host[:port]`,
   * `host:port`; one string or a list); or an etcd3 client (not closed by the store). Required.
   */
  etcd: string | string[] | Etcd3;
  /** TLS settings, as EtcdRegistry's (`https://` endpoints use TLS with or without them); not with an etcd3 client. Defaults to none. */
  tls?: EtcdTlsOptions;
  /** An etcd user and password, as EtcdRegistry's; not with an etcd3 client. Defaults to none. */
  auth?: EtcdAuthOptions;
  /** Prefix of every key. Defaults to 'bulwark/fleet/'. */
  prefix?: string;
  /** This process's caller id (no '/'). Defaults to a fresh one (host, pid, random). */
  callerId?: string;
  /** Milliseconds an operation may wait for etcd before it counts as failed. Defaults to 1 000. */
  timeoutMs?: number;
  /** The time source of timeouts and the views' timers. Defaults to `systemClock`. */
  clock?: Clock;
  /** The wall clock permit periods are timed on. Defaults to `wallClock`. */
  wall?: Clock;
}

/** gRPC reconnects fast after etcd returns (its default first backoff is 1 s). */
const GRPC_OPTIONS: NonNullable<IOptions['grpcOptions']> = { 'grpc.initial_reconnect_backoff_ms': 100, 'grpc.max_reconnect_backoff_ms': 1000 };
/** Run each call once: a failed call is the view's to retry, at its own rate. */
const once = {
  execute: <T>(fn: (ctx: { signal: AbortSignal; attempt: number }) => PromiseLike<T> | T) =>
    Promise.resolve().then(() => fn({ signal: new AbortController().signal, attempt: 1 })),
};
type IBackoff = NonNullable<NonNullable<IOptions['faultHandling']>['watchBackoff']>;
/** etcd3's watch reconnect backoff: constant and short, so the view's watch returns soon after etcd does. */
const WATCH_BACKOFF: IBackoff = { duration: 200, next: () => WATCH_BACKOFF };
/** Transaction attempts on a conflicting revision before a permit request gives up. */
const TXN_ATTEMPTS = 8;

interface Permits {
  /** The period's start (the wall clock of the process that began it). */
  s: number;
  /** Permits taken in it. */
  t: number;
}

/** EtcdFleetStore keeps a fleet on etcd; see the module comment. */
export class EtcdFleetStore implements FleetStore {
  readonly callerId: string;
  private readonly client: Etcd3;
  private readonly owned: boolean;
  private readonly prefix: string;
  private readonly timeoutMs: number;
  private readonly clock: Clock;
  private readonly wall: Clock;
  private lease: Lease | undefined;
  private leaseTtl = 0;
  private readonly watchers = new Set<Watcher>();
  /** By dependency key: the generation and period of this process's last permit, where its probe's result is counted. */
  private readonly periods = new Map<string, { gen: number; start: number }>();
  private closed = false;

  constructor(options: EtcdFleetStoreOptions) {
    const o = optionsObject('EtcdFleetStore', options);
    const e = o.etcd;
    this.timeoutMs = positive('EtcdFleetStore', 'timeoutMs', o.timeoutMs ?? 1_000);
    if (e instanceof Etcd3) {
      if (o.tls !== undefined || o.auth !== undefined)
        throw new TypeError(
          `EtcdFleetStore: tls and auth are for endpoints; an etcd3 client brings its own, got ${o.tls !== undefined ? 'tls' : 'auth'} beside one`,
        );
      this.client = e;
      this.owned = false;
    } else if (typeof e === 'string' || Array.isArray(e)) {
      const { endpoints, connection } = etcdConnection('EtcdFleetStore', { hosts: e, tls: o.tls, auth: o.auth });
      const base: IOptions = {
        hosts: endpoints,
        grpcOptions: GRPC_OPTIONS,
        faultHandling: { host: () => once as never, global: once as never, watchBackoff: WATCH_BACKOFF },
      };
      this.client = new Etcd3(etcd3Options(base, connection, this.timeoutMs));
      this.owned = true;
    } else throw new TypeError(`EtcdFleetStore: etcd must be endpoints or an etcd3 client, got ${showValue(e)}`);
    const id = o.callerId ?? newCallerId();
    if (typeof id !== 'string' || id === '' || id.includes('/'))
      throw new TypeError(`EtcdFleetStore: callerId must be a non-empty string without '/', got ${showValue(id)}`);
    this.callerId = id;
    const prefix = o.prefix ?? 'bulwark/fleet/';
    if (typeof prefix !== 'string') throw new TypeError(`EtcdFleetStore: prefix must be a string, got ${showValue(prefix)}`);
    this.prefix = prefix;
    this.clock = clockOption('EtcdFleetStore', o.clock, systemClock);
    this.wall = clockOption('EtcdFleetStore', o.wall, wallClock, 'wall');
    // Connect now (etcd3 connects at the first call): a store made at start-up is ready when a
    // dependency dies, instead of paying for the connection in the first report of its failures.
    void this.bound(this.client.get(`${this.prefix}g`).exec(), 'connect').catch(() => undefined);
  }

  join(member: FleetMember, options: BreakerFleetOptions): FleetLink {
    // The lease is granted at the join, not at the first publish (a raft write of its own before that report).
    const view = new FleetView(this, member, options, this.clock);
    if (!this.closed) this.leaseFor(options.ttlMs ?? fleetDefaults.ttlMs);
    return view;
  }

  async publish(key: string, report: FleetReport, ttlMs: number): Promise<void> {
    if (this.closed) throw new Error('EtcdFleetStore: closed');
    const lease = this.leaseFor(ttlMs);
    try {
      // A put that names the granted lease's id: etcd3's lease.put() makes a client per put and took
      // 2.3× the CPU (854 against 364 µs a put) and 2.8× the time of this one on loopback.
      const id = await this.bound(lease.grant(), 'lease');
      await this.bound(
        this.client
          .put(`${this.base(key)}r/${report.caller}`)
          .value(`${report.gen}|${report.calls}|${report.failures}`)
          .lease(id)
          .exec(),
        'publish',
      );
    } catch (err) {
      // A lease etcd no longer has is dropped (and 'lost' drops one whose keepalive failed), and so is one
      // still waiting for its grant (which may never come, as over a partition): the next publish asks for
      // a new one. A slow answer is not that: a granted lease is kept, and its keepalive decides.
      if (err instanceof EtcdLeaseInvalidError || lease.state === LeaseState.Pending) this.dropLease(lease);
      throw err;
    }
  }

  async snapshot(key: string): Promise<FleetSnapshot> {
    const base = this.base(key);
    const res = await this.bound(this.client.getAll().prefix(base).exec(), 'snapshot');
    let gen = 0;
    const reports: FleetReport[] = [];
    for (const kv of res.kvs) {
      const ev = this.parse(base, kv);
      if (ev?.type === 'generation') gen = ev.gen;
      else if (ev?.type === 'report') reports.push(ev.report);
    }
    return { gen, reports };
  }

  watch(key: string, listener: (event: FleetEvent) => void, onStatus: (up: boolean) => void): Disposer {
    const base = this.base(key);
    let w: Watcher | undefined;
    let stopped = false;
    this.client
      .watch()
      .prefix(base)
      .create()
      .then(
        (watcher) => {
          if (stopped || this.closed) {
            void watcher.cancel().catch(() => undefined);
            return;
          }
          w = watcher;
          this.watchers.add(watcher);
          watcher.on('put', (kv: IKeyValue) => {
            const ev = this.parse(base, kv);
            if (ev !== undefined) listener(ev);
          });
          watcher.on('delete', (kv: IKeyValue) => {
            const k = kv.key.toString();
            if (k.startsWith(`${base}r/`)) listener({ type: 'gone', caller: k.slice(base.length + 2) });
          });
          watcher.on('disconnected', () => onStatus(false));
          watcher.on('connected', () => onStatus(true));
          watcher.on('error', () => onStatus(false));
          // The first 'connected' came before create() answered: say so now, so that the view reads a
          // snapshot taken with the watch on (reports put between its first snapshot and now are in it).
          // Once the lease its reports go under is granted too (or failed: the next publish asks again):
          // a view that says it is available publishes with one put, not a lease grant (a raft write of
          // its own, 0.4–1.3 s on a busy test machine) and then the put.
          const lease = this.lease;
          const up = () => {
            if (!stopped && !this.closed) onStatus(true);
          };
          if (lease === undefined) up();
          else void withTimeout(lease.grant(), this.timeoutMs, this.clock, 'EtcdFleetStore lease').then(up, up);
        },
        () => onStatus(false),
      );
    return () => {
      stopped = true;
      if (w !== undefined) {
        this.watchers.delete(w);
        void w.cancel().catch(() => undefined);
      }
    };
  }

  async takePermit(key: string, gen: number, limit: number, periodMs: number): Promise<PermitAnswer> {
    const k = `${this.base(key)}p/${gen}`;
    let kv = (await this.bound(this.client.get(k).exec(), 'permit')).kvs[0];
    for (let i = 0; i < TXN_ATTEMPTS; i++) {
      const now = this.wall.now();
      let p: Permits | undefined = kv === undefined ? undefined : (JSON.parse(kv.value.toString()) as Permits);
      const begins = p === undefined || now - p.s >= periodMs;
      if (begins) p = { s: now, t: 0 };
      const left = p!.s + periodMs - now;
      if (p!.t >= limit) return { granted: false, periodLeftMs: left, periodStart: p!.s };
      p!.t++;
      const cmp = kv === undefined ? this.client.if(k, 'Create', '==', 0) : this.client.if(k, 'Mod', '==', kv.mod_revision);
      const put = this.client.put(k).value(JSON.stringify(p));
      // A conflict answers the key as it is now (the else branch), so a retry needs no read of its own. A
      // period that begins drops the probe results of the periods before it.
      const r = await this.bound((begins ? cmp.then(put, this.client.delete().prefix(`${k}/`)) : cmp.then(put)).else(this.client.get(k)).commit(), 'permit');
      if (r.succeeded) {
        this.periods.set(key, { gen, start: p!.s });
        return { granted: true, periodLeftMs: left, periodStart: p!.s };
      }
      kv = r.responses[0]?.response_range?.kvs[0];
    }
    throw new Error('EtcdFleetStore permit: too many conflicting transactions');
  }

  /**
   * probeResult counts the outcome in the period of this process's last permit, as a put of its `o` or `f`
   * key: one transaction, no read before it and no conflict to retry. The success that is the period's
   * last one needed finds `o` at version needed − 1, no `f` and `g` at gen, and moves the generation on in
   * the same transaction (dropping every permit key); two probes that end together are ordered by etcd, and
   * the second is the one that closes. It was a read of both keys and a transaction on their revisions,
   * which one of two probes ending together lost and retried: three round trips, 1.3 s under load.
   */
  async probeResult(key: string, gen: number, ok: boolean, needed: number): Promise<number> {
    const base = this.base(key);
    const gk = `${base}g`;
    const period = this.periods.get(key);
    const generation = (kv: IKeyValue | undefined) => (kv === undefined ? 0 : Number(kv.value.toString()));
    if (period === undefined || period.gen !== gen) return generation((await this.bound(this.client.get(gk).exec(), 'probe')).kvs[0]); // no permit of ours in gen
    const rk = `${base}p/${gen}/${period.start}/`;
    // The generation still gen: g absent for 0 (it is written from 1 on).
    const atGen = gen === 0 ? this.client.if(gk, 'Version', '==', 0) : this.client.if(gk, 'Value', '==', String(gen));
    const r = ok
      ? await this.bound(
          atGen
            .and(`${rk}o`, 'Version', '==', needed - 1)
            .and(`${rk}f`, 'Version', '==', 0)
            .then(this.client.put(gk).value(String(gen + 1)), this.client.delete().prefix(`${base}p/`))
            .else(this.client.put(`${rk}o`).value('1'), this.client.get(gk))
            .commit(),
          'probe',
        )
      : await this.bound(
          atGen
            .then(this.client.put(`${rk}f`).value('1'))
            .else(this.client.get(gk))
            .commit(),
          'probe',
        );
    if (r.succeeded) return ok ? gen + 1 : gen;
    return generation(r.responses[ok ? 1 : 0]?.response_range?.kvs[0]);
  }

  async leave(key: string): Promise<void> {
    this.periods.delete(key);
    await this.bound(
      this.client
        .delete()
        .key(`${this.base(key)}r/${this.callerId}`)
        .exec(),
      'leave',
    );
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const w of this.watchers) void w.cancel().catch(() => undefined);
    this.watchers.clear();
    const lease = this.lease;
    this.lease = undefined;
    if (lease !== undefined) await withTimeout(lease.revoke(), this.timeoutMs, this.clock, 'EtcdFleetStore revoke').catch(() => undefined);
    if (this.owned) this.client.close();
  }

  private base(key: string): string {
    return `${this.prefix}${key}/`;
  }

  private leaseFor(ttlMs: number): Lease {
    const ttl = Math.max(2, Math.ceil(ttlMs / 1000));
    if (this.lease !== undefined && this.leaseTtl === ttl) return this.lease;
    if (this.lease !== undefined) this.dropLease(this.lease);
    const lease = this.client.lease(ttl, { autoKeepAlive: true });
    lease.on('lost', () => this.dropLease(lease));
    this.lease = lease;
    this.leaseTtl = ttl;
    return lease;
  }

  private dropLease(lease: Lease): void {
    if (this.lease !== lease) return;
    this.lease = undefined;
    lease.release();
  }

  private parse(base: string, kv: IKeyValue): FleetEvent | undefined {
    const k = kv.key.toString();
    const v = kv.value.toString();
    if (k === `${base}g`) return { type: 'generation', gen: Number(v) };
    if (!k.startsWith(`${base}r/`)) return undefined;
    const [g, c, f] = v.split('|').map(Number);
    if (!Number.isFinite(g) || !Number.isFinite(c) || !Number.isFinite(f)) return undefined;
    return { type: 'report', report: { caller: k.slice(base.length + 2), gen: g!, calls: c!, failures: f! } };
  }

  /**
   * bound limits `p` to `timeoutMs`; etcd's refusal of who we are (see etcd-pool's `denied`) rejects
   * RegistryDeniedError, so that a wrong password or CA reads as such, not as an etcd down.
   */
  private bound<T>(p: Promise<T>, what: string): Promise<T> {
    if (this.closed) return Promise.reject(new Error('EtcdFleetStore: closed'));
    return withTimeout(p, this.timeoutMs, this.clock, `EtcdFleetStore ${what}`).catch((err: unknown) => {
      throw denied(err) ? new RegistryDeniedError(`EtcdFleetStore ${what}: etcd refused: ${(err as Error).message}`, { cause: err }) : err;
    });
  }
}
