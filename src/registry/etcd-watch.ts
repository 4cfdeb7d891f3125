/**
 * EtcdWatch is one watch of EtcdRegistry: list, then watch from the list's revision + 1 (a full pull
 * first, then increments, as go-zero's discov does). The first listing reads at the newest revision the
 * registry had seen when watch() was called (EtcdPool's `revision`), so every change made after anything
 * the registry had seen — every change the registry itself makes once watch() has returned — comes as an
 * event, even when it reaches etcd before the listing (`firstList`). It keeps the view it has reported, so that
 * - an event already applied (mod revision ≤ the last one applied) is never repeated after a reconnect;
 * - when the member serving the stream goes away, the watch moves to another live member (EtcdPool's
 *   choice) and resumes from the last revision seen: no listing, no resync, nothing lost or repeated
 *   (etcd3 alone would retry the same member, or a random one, and resume from the revision it noted at
 *   reconnect time, which skips events replayed after it);
 * - when etcd has compacted the revision to resume from (or cancels the watch for any other reason), it
 *   lists again and emits the difference between the view and the new list as events, then watches on
 *   from the new list's revision + 1.
 *
 * - when the member serving the stream is cut off from the rest of its cluster (alive, answering, but
 *   without a leader: its stream stays open and silent), EtcdRegistry's leader check finds it and the
 *   watch moves to a member with a leader the same way (`move()`), from the last revision seen.
 *
 * A watch keeps its process alive while it is open, whether its stream is up or being reconnected: its
 * reconnect timers are not unref'd. While a stream is up its gRPC socket holds the process; between two
 * attempts nothing else does (grpc-js unrefs its own reconnect timers), so a process whose only work was
 * a watch — `bulwark registry watch` — ended silently, exit 0, the moment its etcd died, and never saw
 * etcd come back. Ending the watch (its signal, `return()`) or closing the registry clears the timers.
 */
import type { IKeyValue, IRangeResponse, IWatchResponse, Watcher } from 'etcd3';
import { Backoff } from '../core/backoff.js';
import type { Clock, TimerHandle } from '../core/clock.js';
import { EventQueue } from './event-queue.js';
import type { EtcdPool, PoolMember } from './etcd-pool.js';
import type { EtcdClient } from './etcd-client.js';
import { rangeEnd, type Decoded } from './etcd-layout.js';
import type { Warner } from './etcd-warnings.js';
import type { RegistryEvent, ServiceInstance } from './types.js';
import { sameInstance } from './validate.js';

interface Seen {
  instance: ServiceInstance;
}

/** EtcdWatchDeps is what a watch needs from its registry. */
export interface EtcdWatchDeps {
  pool: EtcdPool<EtcdClient>;
  clock: Clock;
  warner: Warner;
  /** `<prefix>/` of the registry. */
  root: string;
  /** Reads one key of the registry's layout (etcd-layout.ts). */
  decode: (kv: IKeyValue) => Decoded;
  /** Told of each instance the first listing holds (it is in the view, but no event says so). */
  onListed?: ((instance: ServiceInstance) => void) | undefined;
  /** Called on every resync (a cancelled watch listed again). */
  onResync: () => void;
  /** Called each time the stream moves to another member (or tries its member again) after a disconnect. */
  onMove: () => void;
}

/** EtcdWatch feeds one EventQueue from etcd; see the module comment. */
export class EtcdWatch {
  private readonly view = new Map<string, Seen>();
  private readonly keyPrefix: string;
  private watcher: Watcher | undefined;
  /** The member serving the stream (undefined while none is attached). */
  member: PoolMember<EtcdClient> | undefined;
  /** The highest revision whose changes are reflected in `view`. */
  private revision = 0;
  private stopped = false;
  private readonly retry = new Backoff({ initialMs: 50, maxMs: 1000, jitter: 'decorrelated' });
  private retryTimer: TimerHandle | undefined;
  /** The newest revision the registry had seen when watch() was called (0: none); the first listing reads at it. */
  private readonly since: number;

  constructor(
    private readonly deps: EtcdWatchDeps,
    service: string | undefined,
    readonly queue: EventQueue,
    private readonly onReady: (() => void) | undefined,
  ) {
    this.keyPrefix = service === undefined ? deps.root : `${deps.root}${service}/`;
    this.since = deps.pool.revision;
  }

  /** start lists and starts watching; a failed first list fails the queue (RegistryUnavailableError). */
  async start(): Promise<void> {
    let res: IRangeResponse;
    let revision: number;
    try {
      ({ res, revision } = await this.firstList());
    } catch (err) {
      this.queue.fail(err);
      return;
    }
    if (this.stopped) return;
    for (const kv of res.kvs) {
      const d = this.deps.decode(kv);
      if (d.instance !== undefined) {
        this.view.set(kv.key.toString(), { instance: d.instance });
        this.deps.onListed?.(d.instance);
      } else this.deps.warner.warn(kv, d.error);
    }
    this.revision = revision;
    try {
      this.onReady?.();
    } catch {
      // the caller's hook must not break the watch
    }
    this.attach();
  }

  /** stop cancels the etcd watcher. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.deps.clock.clearTimeout(this.retryTimer);
    this.queue.end();
    const w = this.watcher;
    this.watcher = undefined;
    this.member = undefined;
    if (w !== undefined) {
      w.removeAllListeners();
      w.on('error', noop);
      let timer: TimerHandle | undefined;
      await Promise.race([w.cancel().catch(noop), new Promise((r) => (timer = this.deps.clock.setTimeout(() => r(undefined), 1000).unref()))]);
      this.deps.clock.clearTimeout(timer);
    }
  }

  /**
   * list reads the watched keys, at revision `at` (0: the member's current one). The first listing is
   * serializable: the member answers from what it has applied, without first asking the leader where the
   * log ends (a linearizable read's extra round), so `onReady` comes within milliseconds. A listing a
   * little behind the leader costs nothing: the watch replays everything after the listing's revision.
   * A resync reads linearizably, at the current revision.
   */
  private list(serializable = false, at = 0): Promise<IRangeResponse> {
    const key = Buffer.from(this.keyPrefix);
    const revision = at > 0 ? String(at) : undefined;
    return this.deps.pool.call('range', (c, o) => c.kv.range({ key, range_end: rangeEnd(this.keyPrefix), serializable, revision }, o));
  }

  /**
   * firstList reads the watched keys as of `since`, the newest revision the registry had seen when
   * watch() was called, and answers the revision the listing reflects. Every change the registry makes
   * after watch() (or anyone makes after anything it had seen) has a higher revision, so it comes as an
   * event, whatever the order of the listing and the change on the wire. A serializable read on a member
   * that has not applied `since` yet ("future revision") reads again linearizably (the leader's read index
   * covers `since`); a compacted `since`, or none (0), lists at the member's current revision instead, as
   * a watch of a registry that had seen nothing always did.
   */
  private async firstList(): Promise<{ res: IRangeResponse; revision: number }> {
    if (this.since > 0) {
      try {
        return { res: await this.list(true, this.since), revision: this.since };
      } catch (err) {
        if (!refusedAs(err, 'future revision') && !refusedAs(err, 'compacted')) throw err;
        if (refusedAs(err, 'future revision')) {
          try {
            return { res: await this.list(false, this.since), revision: this.since };
          } catch (again) {
            if (!refusedAs(again, 'compacted')) throw again;
          }
        }
      }
    }
    const res = await this.list(true);
    return { res, revision: Number(res.header.revision) };
  }

  /** attach starts the etcd watcher on a live member, from the last revision seen + 1. */
  private attach(): void {
    this.retryTimer = undefined;
    if (this.stopped) return;
    const m = this.deps.pool.pick()!; // never undefined without exclusions
    const w = m.client
      .watch()
      .prefix(this.keyPrefix)
      .startRevision(String(this.revision + 1))
      .watcher();
    this.watcher = w;
    this.member = m;
    let connected = false;
    w.on('data', (res: IWatchResponse) => {
      if (this.watcher !== w) return;
      for (const ev of res.events) this.apply(ev.type === 'Delete' ? 'delete' : 'put', ev.kv);
      const rev = Number(res.header.revision);
      if (rev > this.revision) this.revision = rev;
    });
    // etcd3 moves its resume revision to the server's current revision when a watch (re)connects, before
    // the replayed events arrive; resume from what we have really seen instead.
    w.on('connected', () => {
      if (this.watcher !== w) return;
      (w.request as { start_revision?: string }).start_revision = String(this.revision + 1);
      connected = true;
      this.retry.reset();
      this.deps.pool.answeredOn(m);
    });
    // The stream broke (the member died, or the connection did): move to another live member at once and
    // resume from the last revision seen. A stream that never connected waits a backoff first, so that a
    // cluster entirely down is not asked in a tight loop.
    w.on('disconnected', (err: Error) => {
      if (this.watcher !== w) return;
      this.drop(w);
      this.deps.pool.failedOn(m, err);
      this.deps.onMove();
      // not unref'd: see the module comment (a watch keeps its process alive while it reconnects)
      this.retryTimer = this.deps.clock.setTimeout(() => this.attach(), connected ? 0 : this.retry.next());
    });
    // etcd cancels a watch whose start revision was compacted; etcd3 reports it as an 'error' without the
    // compact revision (the cancel reason is empty). Whatever the cause, listing again and emitting the
    // difference is correct, so every cancellation leads to a resync (retried with backoff).
    w.on('error', () => {
      if (this.watcher !== w) return;
      this.drop(w);
      void this.resync();
    });
  }

  /**
   * move leaves the member serving the stream for another live one, resuming from the last revision seen
   * (the registry found the member cut off from its cluster: its stream is open but will deliver nothing
   * more). Answers false, and stays, when no other member is live.
   */
  move(): boolean {
    const w = this.watcher;
    const m = this.member;
    if (this.stopped || w === undefined || m === undefined) return false;
    const other = this.deps.pool.pick(new Set([m]));
    if (other === undefined || other.downUntil > this.deps.clock.now()) return false;
    this.drop(w);
    this.deps.onMove();
    this.deps.clock.clearTimeout(this.retryTimer);
    this.attach();
    return true;
  }

  /** drop detaches `w` from etcd3 (which would otherwise reconnect it on its own). */
  private drop(w: Watcher): void {
    this.watcher = undefined;
    this.member = undefined;
    w.removeAllListeners();
    w.on('error', noop);
    void w.cancel().catch(noop);
  }

  private apply(type: 'put' | 'delete', kv: IKeyValue): void {
    const revision = Number(kv.mod_revision);
    if (revision <= this.revision) return; // already reflected: never repeat
    const key = kv.key.toString();
    const old = this.view.get(key);
    if (type === 'delete') {
      if (old === undefined) return;
      this.view.delete(key);
      this.queue.push(Object.freeze({ type: 'delete', instance: old.instance, revision }));
      return;
    }
    const d = this.deps.decode(kv);
    if (d.instance === undefined) {
      this.deps.warner.warn(kv, d.error);
      if (old !== undefined) {
        // the instance this key held is gone; what replaced it is unreadable
        this.view.delete(key);
        this.queue.push(Object.freeze({ type: 'delete', instance: old.instance, revision }));
      }
      return;
    }
    this.view.set(key, { instance: d.instance });
    if (old !== undefined && old.instance.id !== d.instance.id) {
      // the key now holds another instance (go-zero: a new address under the same lease): the old one is gone
      this.queue.push(Object.freeze({ type: 'delete', instance: old.instance, revision }));
      this.queue.push(Object.freeze({ type: 'create', instance: d.instance, revision }));
    } else if (old === undefined) this.queue.push(Object.freeze({ type: 'create', instance: d.instance, revision }));
    else if (!sameInstance(old.instance, d.instance)) this.queue.push(Object.freeze({ type: 'update', instance: d.instance, revision }));
  }

  /** resync lists again and emits the difference with the view (the resume revision was compacted). */
  private async resync(): Promise<void> {
    if (this.stopped) return;
    this.deps.onResync();
    let res: IRangeResponse;
    try {
      res = await this.list();
    } catch {
      this.retryTimer = this.deps.clock.setTimeout(() => void this.resync(), this.retry.next());
      return;
    }
    if (this.stopped) return;
    this.retry.reset();
    const listed = new Map<string, ServiceInstance>();
    for (const kv of res.kvs) {
      const d = this.deps.decode(kv);
      if (d.instance !== undefined) listed.set(kv.key.toString(), d.instance);
      else this.deps.warner.warn(kv, d.error);
    }
    const events: RegistryEvent[] = [];
    const revision = Number(res.header.revision); // the differences are known as of the new listing
    for (const [key, seen] of this.view) {
      if (!listed.has(key)) {
        this.view.delete(key);
        events.push(Object.freeze({ type: 'delete', instance: seen.instance, revision }));
      }
    }
    for (const [key, instance] of listed) {
      const old = this.view.get(key);
      this.view.set(key, { instance });
      if (old !== undefined && old.instance.id !== instance.id)
        events.push(Object.freeze({ type: 'delete', instance: old.instance, revision }), Object.freeze({ type: 'create', instance, revision }));
      else if (old === undefined) events.push(Object.freeze({ type: 'create', instance, revision }));
      else if (!sameInstance(old.instance, instance)) events.push(Object.freeze({ type: 'update', instance, revision }));
    }
    for (const e of events) this.queue.push(e);
    this.revision = Number(res.header.revision);
    this.attach();
  }
}

function noop(): void {}

/** refusedAs: etcd refused the call (RegistryUnavailableError's cause, or the error itself) with `what` in its message (mvcc's "required revision has been compacted" / "… is a future revision"). */
function refusedAs(err: unknown, what: string): boolean {
  for (let e = err; e instanceof Error; e = e.cause) if (e.message.includes(what)) return true;
  return false;
}
