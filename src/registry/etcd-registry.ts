/**
 * EtcdRegistry keeps instances in etcd (reference 004 §一): keys `<prefix>/<name>/<id>`, JSON values,
 * one lease per registry kept alive every TTL/3.
 *
 * Lease loss is noticed at the first failed keep-alive or a keep-alive answered with TTL ≤ 0 (not etcd3's
 * `lost` event, which waits 2 × TTL): a new lease is granted and every instance this registry registered
 * is written again, with no help from the application. An instance whose write fails (etcd down) is
 * remembered and written as soon as etcd answers again, until it is deregistered.
 *
 * Every call is bounded by `dialTimeoutMs`: an unreachable etcd rejects `RegistryUnavailableError` naming the
 * endpoint, never hangs. Values that are not JSON instances are skipped with one warning each.
 */
import { EtcdLeaseInvalidError, type Etcd3 } from 'etcd3';
import { Backoff } from '../core/backoff.js';
import { ClosedError, NotFoundError, RegistryUnavailableError } from '../core/errors.js';
import { fn, integer, options as checkOptions, positive } from '../core/validate.js';
import { EventQueue } from './event-queue.js';
import { Caller, createClient, decode, defaultWarning, rangeEnd, Warner } from './etcd-support.js';
import { EtcdWatch } from './etcd-watch.js';
import type { RegisterOptions, Registry, RegistryEvent, ServiceInstance, ServiceListing, WatchOptions } from './types.js';
import { checkInstance, checkName } from './validate.js';

/** etcd's default --max-txn-ops. */
const MAX_TXN_OPS = 128;
/** Well under etcd's default --max-request-bytes (1.5 MiB): instances may carry 64 KiB of metadata each. */
const MAX_TXN_BYTES = 1024 * 1024;

/** EtcdRegistryOptions configures an EtcdRegistry. */
export interface EtcdRegistryOptions {
  /** etcd endpoints, e.g. `http://127.0.0.1:2379`. Required. */
  hosts: string | string[];
  /** Key prefix; keys are `<prefix>/<name>/<id>`. Defaults to `/bulwark/services`. */
  prefix?: string;
  /** The lease TTL (rounded up to whole seconds, etcd's unit; etcd may raise it to its minimum). Defaults to 15 000. */
  ttlMs?: number;
  /** How long any etcd call may take before it rejects `RegistryUnavailableError`. Defaults to 3 000. */
  dialTimeoutMs?: number;
  /** Events a watcher may have waiting before it is told to resync (`WatchResyncError`). Defaults to 1 024. */
  watchQueueSize?: number;
  /** Receives one message per skipped bad value. Defaults to `process.emitWarning`. */
  onWarning?: (message: string) => void;
}

/** Defaults for EtcdRegistryOptions. */
export const etcdRegistryDefaults = Object.freeze({
  prefix: '/bulwark/services',
  ttlMs: 15_000,
  dialTimeoutMs: 3_000,
  watchQueueSize: 1024,
});

/** EtcdRegistryStats are plain counters, read as a snapshot. */
export interface EtcdRegistryStats {
  /** Leases granted (the first one and every replacement). */
  leasesGranted: number;
  /** Leases given up: a keep-alive failed or answered TTL ≤ 0. */
  leasesLost: number;
  /** Keep-alives etcd answered with TTL > 0. */
  keepAlives: number;
  /** Times every owned instance was written again (after a lease loss or failed write). */
  rewrites: number;
  /** Watches that listed again and emitted the difference (etcd cancelled them: a compacted revision). */
  watchResyncs: number;
}

/** EtcdRegistry is a Registry on etcd; see the module comment. */
export class EtcdRegistry implements Registry {
  /** The first endpoint, as named in errors. */
  readonly endpoint: string;
  private readonly client: Etcd3;
  private readonly caller: Caller;
  private readonly warner: Warner;
  private readonly root: string;
  private readonly ttlSeconds: number;
  private readonly queueSize: number;
  private readonly owned = new Map<string, ServiceInstance>();
  private readonly pendingDeletes = new Set<string>();
  private readonly oldLeases: string[] = [];
  private readonly watches = new Set<EtcdWatch>();
  /** Repair attempts while etcd is unreachable: 100 ms growing to 400 ms, so a returning etcd is used at once. */
  private readonly retry = new Backoff({ initialMs: 100, maxMs: 400, jitter: 'decorrelated' });
  private lease: string | undefined;
  private keepAliveMs = 0;
  private dirty = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private serial: Promise<unknown> = Promise.resolve();
  private closed = false;
  private readonly counters: EtcdRegistryStats = { leasesGranted: 0, leasesLost: 0, keepAlives: 0, rewrites: 0, watchResyncs: 0 };

  constructor(options: EtcdRegistryOptions) {
    const o = checkOptions('EtcdRegistry', options);
    const hosts = typeof o.hosts === 'string' ? [o.hosts] : o.hosts;
    if (!Array.isArray(hosts) || hosts.length === 0 || hosts.some((h) => typeof h !== 'string' || h.length === 0)) {
      throw new TypeError(`EtcdRegistry: hosts must be a non-empty string or array of strings, got ${JSON.stringify(o.hosts)}`);
    }
    const prefix = o.prefix ?? etcdRegistryDefaults.prefix;
    if (typeof prefix !== 'string' || !/^\/?[A-Za-z0-9._:/-]*[A-Za-z0-9._:-]$/.test(prefix)) {
      throw new TypeError(`EtcdRegistry: prefix must be a key path like "/bulwark/services" (no trailing slash), got ${JSON.stringify(prefix)}`);
    }
    const ttlMs = integer('EtcdRegistry', 'ttlMs', o.ttlMs ?? etcdRegistryDefaults.ttlMs, 1000, 24 * 3600 * 1000);
    const dial = integer('EtcdRegistry', 'dialTimeoutMs', o.dialTimeoutMs ?? etcdRegistryDefaults.dialTimeoutMs, 1);
    this.queueSize = integer('EtcdRegistry', 'watchQueueSize', o.watchQueueSize ?? etcdRegistryDefaults.watchQueueSize, 1);
    const sink = o.onWarning === undefined ? defaultWarning : fn<(m: string) => void>('EtcdRegistry', 'onWarning', o.onWarning);
    this.root = `${prefix}/`;
    this.ttlSeconds = Math.ceil(ttlMs / 1000);
    this.endpoint = hosts[0]!;
    this.client = createClient(hosts);
    this.caller = new Caller(hosts.join(','), dial);
    this.warner = new Warner(sink);
  }

  /** stats answers a snapshot of the lease counters. */
  stats(): EtcdRegistryStats {
    return { ...this.counters };
  }

  /**
   * register writes the instance under this registry's lease. `options.ttlMs` is not used: one lease
   * serves every instance of the registry (set `ttlMs` on the registry). When etcd cannot be reached it
   * rejects RegistryUnavailableError, and the instance is still written once etcd answers again.
   */
  async register(instance: ServiceInstance, options?: RegisterOptions): Promise<void> {
    const inst = checkInstance('EtcdRegistry.register', instance);
    if (options?.ttlMs !== undefined) positive('EtcdRegistry.register', 'ttlMs', options.ttlMs);
    this.open();
    const key = this.keyOf(inst.name, inst.id);
    this.owned.set(key, inst);
    this.pendingDeletes.delete(key);
    try {
      await this.bounded('register', this.exclusive(async () => {
        await this.ensureLease();
        await this.put(key, inst);
      }));
    } catch (err) {
      this.dirty = true;
      this.schedule(this.retry.next());
      throw this.caller.unavailable('register', err);
    }
  }

  /** deregister deletes the instance's key; when etcd cannot be reached it rejects and the delete is retried. */
  async deregister(instance: ServiceInstance): Promise<void> {
    const name = checkName('EtcdRegistry.deregister', 'instance.name', instance?.name);
    const id = checkName('EtcdRegistry.deregister', 'instance.id', instance.id);
    this.open();
    const key = this.keyOf(name, id);
    this.owned.delete(key);
    this.pendingDeletes.add(key);
    try {
      await this.bounded('deregister', this.exclusive(() => this.remove(key)));
    } catch (err) {
      this.schedule(this.retry.next());
      throw this.caller.unavailable('deregister', err);
    }
  }

  async getService(name: string): Promise<ServiceInstance[]> {
    const { instances } = await this.getServiceListing(name);
    if (instances.length === 0) throw new NotFoundError(`service ${name} has no instances`);
    return instances;
  }

  /** getServiceListing answers the instances (possibly none) and the etcd revision they were read at; watch events carry mod revisions. */
  async getServiceListing(name: string): Promise<ServiceListing> {
    checkName('EtcdRegistry.getService', 'name', name);
    this.open();
    const p = `${this.root}${name}/`;
    const res = await this.caller.call('range', (o) => this.client.kv.range({ key: Buffer.from(p), range_end: rangeEnd(p) }, o));
    const out: ServiceInstance[] = [];
    for (const kv of res.kvs) {
      const d = decode(this.root, kv);
      if (d.instance !== undefined) out.push(d.instance);
      else this.warner.warn(kv, d.error);
    }
    return { instances: out, revision: Number(res.header.revision) };
  }

  async listServices(): Promise<string[]> {
    this.open();
    const res = await this.caller.call('range', (o) =>
      this.client.kv.range({ key: Buffer.from(this.root), range_end: rangeEnd(this.root), keys_only: true }, o),
    );
    const names = new Set<string>();
    for (const kv of res.kvs) {
      const parts = kv.key.toString().slice(this.root.length).split('/');
      if (parts.length === 2) names.add(parts[0]!);
    }
    return [...names];
  }

  /** watch lists, then watches from the list's revision + 1; see etcd-watch.ts for resume and compaction. */
  watch(options?: WatchOptions): AsyncIterable<RegistryEvent> {
    const o = checkOptions('EtcdRegistry.watch', options);
    const service = o.service === undefined ? undefined : checkName('EtcdRegistry.watch', 'service', o.service);
    let w: EtcdWatch | undefined;
    const queue = new EventQueue(this.queueSize, o.signal, () => {
      if (w === undefined) return;
      this.watches.delete(w);
      void w.stop();
    });
    w = new EtcdWatch({
      client: this.client,
      caller: this.caller,
      warner: this.warner,
      root: this.root,
      onResync: () => void this.counters.watchResyncs++,
    }, service, queue, o.onReady);
    if (this.closed) queue.end();
    if (queue.closed) return queue;
    this.watches.add(w);
    void w.start();
    return queue;
  }

  /** close stops keep-alives and watches, revokes the lease (its keys go with it) and closes the client. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    await Promise.all([...this.watches].map((w) => w.stop()));
    this.watches.clear();
    // bounded as a whole: closing never waits longer than about one dial timeout for a dead etcd
    const revoke = this.exclusive(async () => {
      const leases = this.lease === undefined ? this.oldLeases : [this.lease, ...this.oldLeases];
      this.lease = undefined;
      await Promise.all(leases.map((id) => this.caller.call('lease revoke', (o) => this.client.leaseClient.leaseRevoke({ ID: id }, o)).catch(noop)));
    });
    await this.bounded('close', revoke).catch(noop);
    this.client.close();
  }

  private keyOf(name: string, id: string): string {
    return `${this.root}${name}/${id}`;
  }

  private open(): void {
    if (this.closed) throw new ClosedError('EtcdRegistry is closed');
  }

  /**
   * bounded rejects when `work` has not settled within the dial timeout: a register queued behind a
   * repair that waits on a stopped etcd must not wait for both. The work itself goes on (and is retried).
   */
  private bounded<T>(what: string, work: Promise<T>): Promise<T> {
    work.catch(noop);
    return this.caller.call(what, () => work);
  }

  /** exclusive runs lease and write work one at a time, so a re-register never races a register. */
  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.serial.then(work, work);
    this.serial = run.catch(noop);
    return run;
  }

  private async ensureLease(): Promise<void> {
    if (this.lease !== undefined) return;
    const res = await this.caller.call('lease grant', (o) => this.client.leaseClient.leaseGrant({ TTL: this.ttlSeconds }, o));
    this.lease = res.ID;
    this.counters.leasesGranted++;
    this.keepAliveMs = Math.max(100, (Number(res.TTL) * 1000) / 3);
    this.schedule(this.keepAliveMs);
  }

  /** put writes under the current lease; a lease etcd no longer knows (expired while we were paused) is replaced at once. */
  private async put(key: string, inst: ServiceInstance): Promise<void> {
    const value = Buffer.from(JSON.stringify(inst));
    for (let attempt = 0; ; attempt++) {
      const req = { key: Buffer.from(key), value, lease: this.lease };
      try {
        await this.caller.call('put', (o) => this.client.kv.put(req, o));
        return;
      } catch (err) {
        if (attempt > 0 || !((err as Error).cause instanceof EtcdLeaseInvalidError)) throw err;
        this.loseLease();
        await this.ensureLease();
      }
    }
  }

  /**
   * putAll writes many instances in as few transactions as etcd allows (one round trip each instead of
   * one per instance: after etcd returns, the last of 20 sequential puts landed ~60 ms after the first).
   */
  private async putAll(entries: ReadonlyArray<readonly [string, ServiceInstance]>): Promise<void> {
    let batch: Array<{ key: Buffer; value: Buffer }> = [];
    let bytes = 0;
    for (const [key, inst] of entries) {
      const op = { key: Buffer.from(key), value: Buffer.from(JSON.stringify(inst)) };
      if (batch.length > 0 && (batch.length >= MAX_TXN_OPS || bytes + op.key.length + op.value.length > MAX_TXN_BYTES)) {
        await this.putBatch(batch);
        batch = [];
        bytes = 0;
      }
      batch.push(op);
      bytes += op.key.length + op.value.length;
    }
    if (batch.length > 0) await this.putBatch(batch);
  }

  /** putBatch writes `ops` in one transaction under the current lease, replacing a lease etcd no longer knows once. */
  private async putBatch(ops: ReadonlyArray<{ key: Buffer; value: Buffer }>): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const success = ops.map((op) => ({ request_put: { key: op.key, value: op.value, lease: this.lease } }));
      try {
        await this.caller.call('put', (o) => this.client.kv.txn({ success }, o));
        return;
      } catch (err) {
        if (attempt > 0 || !((err as Error).cause instanceof EtcdLeaseInvalidError)) throw err;
        this.loseLease();
        await this.ensureLease();
      }
    }
  }

  private async remove(key: string): Promise<void> {
    await this.caller.call('delete', (o) => this.client.kv.deleteRange({ key: Buffer.from(key) }, o));
    this.pendingDeletes.delete(key);
  }

  private schedule(ms: number): void {
    if (this.closed) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.maintain(), ms);
    this.timer.unref();
  }

  /** maintain is the keep-alive tick; it also repairs: new lease, rewrites, pending deletes, old leases. */
  private async maintain(): Promise<void> {
    this.timer = undefined;
    if (this.closed) return;
    try {
      await this.exclusive(async () => {
        if (this.lease !== undefined) {
          let ttl: number;
          try {
            ttl = await this.keepAliveOnce(this.lease);
          } catch (err) {
            this.loseLease();
            throw err;
          }
          if (ttl <= 0) this.loseLease();
          else this.counters.keepAlives++;
        }
        if (this.lease === undefined && this.owned.size > 0) await this.ensureLease();
        if (this.dirty) {
          this.counters.rewrites++;
          await this.putAll([...this.owned]);
          this.dirty = false;
        }
        for (const key of [...this.pendingDeletes]) await this.remove(key);
        while (this.oldLeases.length > 0) {
          const id = this.oldLeases[0]!;
          await this.caller.call('lease revoke', (o) => this.client.leaseClient.leaseRevoke({ ID: id }, o)).catch(noop);
          this.oldLeases.shift();
        }
      });
      this.retry.reset();
      if (this.lease !== undefined) this.schedule(this.keepAliveMs);
    } catch {
      this.schedule(this.retry.next());
    }
  }

  private loseLease(): void {
    if (this.lease === undefined) return;
    this.counters.leasesLost++;
    if (this.oldLeases.length < 16) this.oldLeases.push(this.lease);
    this.lease = undefined;
    this.dirty = true;
  }

  /** keepAliveOnce sends one keep-alive and answers the TTL etcd granted (≤ 0: the lease is gone). */
  private keepAliveOnce(id: string): Promise<number> {
    return this.caller.call('lease keep-alive', async (o) => {
      const stream = await this.client.leaseClient.leaseKeepAlive(o);
      return new Promise<number>((resolve, reject) => {
        const cancel = () => (stream as unknown as { cancel?: () => void }).cancel?.();
        const timer = setTimeout(() => {
          cancel();
          reject(new RegistryUnavailableError(`etcd at ${this.caller.endpoint} did not answer a keep-alive`));
        }, this.caller.timeoutMs);
        stream.on('error', (err: Error) => {
          clearTimeout(timer);
          reject(err);
        });
        let answered = false;
        stream.on('data', (res: { TTL: string }) => {
          if (answered) return;
          answered = true;
          clearTimeout(timer);
          resolve(Number(res.TTL));
          cancel();
        });
        stream.write({ ID: id });
      });
    });
  }
}

function noop(): void {}
