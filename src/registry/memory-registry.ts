/**
 * MemoryRegistry is the embedded default registry: everything in one process's memory.
 * It honours `ttlMs` (an instance not registered again in time expires, and its watchers get `delete`),
 * and its watchers never lose events silently: each has a bounded queue, and one that falls behind
 * gets `WatchResyncError` after its queued events (go-micro's memory registry drops events instead).
 * Time comes from the injected clock; expiry is checked on every call and by an unref'd sweep timer.
 */
import { systemClock, type Clock } from '../core/clock.js';
import { ClosedError, NotFoundError } from '../core/errors.js';
import { clockOption, integer, options as checkOptions, positive } from '../core/validate.js';
import { EventQueue } from './event-queue.js';
import type { RegisterOptions, Registry, RegistryEvent, ServiceInstance, WatchOptions } from './types.js';
import { checkInstance, checkName, sameInstance } from './validate.js';

/** MemoryRegistryOptions configures a MemoryRegistry. */
export interface MemoryRegistryOptions {
  /** The TTL of registrations that give none; 0 means they never expire. Defaults to 0. */
  ttlMs?: number;
  /** Events a watcher may have waiting before it is told to resync (`WatchResyncError`). Defaults to 1 024. */
  watchQueueSize?: number;
  /** How often a timer looks for expired instances (calls check too); 0 disables the timer. Defaults to 1 000. */
  sweepIntervalMs?: number;
  /** The clock for TTLs. Defaults to `systemClock`. */
  clock?: Clock;
}

/** Defaults for MemoryRegistryOptions. */
export const memoryRegistryDefaults = Object.freeze({ ttlMs: 0, watchQueueSize: 1024, sweepIntervalMs: 1000 });

interface Entry {
  instance: ServiceInstance;
  /** Absolute expiry on the clock, Infinity when none. */
  expiresAt: number;
}

interface Watcher {
  service: string | undefined;
  queue: EventQueue;
}

/** MemoryRegistry keeps instances in memory; see the module comment. */
export class MemoryRegistry implements Registry {
  private readonly services = new Map<string, Map<string, Entry>>();
  private readonly watchers = new Set<Watcher>();
  private readonly clock: Clock;
  private readonly ttlMs: number;
  private readonly queueSize: number;
  private readonly timer: ReturnType<typeof setInterval> | undefined;
  /** The earliest expiry of any entry (a lower bound), so most calls skip the scan. */
  private nextExpiry = Infinity;
  private closed = false;

  constructor(options?: MemoryRegistryOptions) {
    const o = checkOptions('MemoryRegistry', options);
    this.clock = clockOption('MemoryRegistry', o.clock, systemClock);
    this.ttlMs = integer('MemoryRegistry', 'ttlMs', o.ttlMs ?? memoryRegistryDefaults.ttlMs, 0);
    this.queueSize = integer('MemoryRegistry', 'watchQueueSize', o.watchQueueSize ?? memoryRegistryDefaults.watchQueueSize, 1);
    const sweep = integer('MemoryRegistry', 'sweepIntervalMs', o.sweepIntervalMs ?? memoryRegistryDefaults.sweepIntervalMs, 0);
    if (sweep > 0) {
      this.timer = setInterval(() => this.expire(), sweep);
      this.timer.unref();
    }
  }

  async register(instance: ServiceInstance, options?: RegisterOptions): Promise<void> {
    const inst = checkInstance('MemoryRegistry.register', instance);
    const ttl = options?.ttlMs === undefined ? this.ttlMs : positive('MemoryRegistry.register', 'ttlMs', options.ttlMs);
    this.open();
    this.expire();
    const now = this.clock.now();
    const expiresAt = ttl > 0 ? now + ttl : Infinity;
    if (expiresAt < this.nextExpiry) this.nextExpiry = expiresAt;
    let byId = this.services.get(inst.name);
    if (byId === undefined) this.services.set(inst.name, (byId = new Map()));
    const old = byId.get(inst.id);
    byId.set(inst.id, { instance: inst, expiresAt });
    if (old === undefined) this.emit(Object.freeze({ type: 'create', instance: inst }));
    else if (!sameInstance(old.instance, inst)) this.emit(Object.freeze({ type: 'update', instance: inst }));
  }

  async deregister(instance: ServiceInstance): Promise<void> {
    const name = checkName('MemoryRegistry.deregister', 'instance.name', instance?.name);
    const id = checkName('MemoryRegistry.deregister', 'instance.id', instance.id);
    this.open();
    this.expire();
    this.remove(name, id);
  }

  async getService(name: string): Promise<ServiceInstance[]> {
    checkName('MemoryRegistry.getService', 'name', name);
    this.open();
    this.expire();
    const byId = this.services.get(name);
    if (byId === undefined) throw new NotFoundError(`service ${name} has no instances`);
    const out: ServiceInstance[] = [];
    for (const e of byId.values()) out.push(e.instance);
    return out;
  }

  async listServices(): Promise<string[]> {
    this.open();
    this.expire();
    return [...this.services.keys()];
  }

  watch(options?: WatchOptions): AsyncIterable<RegistryEvent> {
    const o = checkOptions('MemoryRegistry.watch', options);
    const service = o.service === undefined ? undefined : checkName('MemoryRegistry.watch', 'service', o.service);
    const watcher: Watcher = { service, queue: undefined as unknown as EventQueue };
    watcher.queue = new EventQueue(this.queueSize, o.signal, () => this.watchers.delete(watcher));
    if (this.closed) watcher.queue.end();
    else this.watchers.add(watcher);
    o.onReady?.();
    return watcher.queue;
  }

  /** expire removes every instance whose TTL has passed (watchers get `delete`). Calls run it; so does the sweep timer. */
  expire(): void {
    const now = this.clock.now();
    if (now < this.nextExpiry) return;
    let next = Infinity;
    for (const [name, byId] of this.services) {
      for (const [id, e] of byId) {
        if (e.expiresAt <= now) this.remove(name, id);
        else if (e.expiresAt < next) next = e.expiresAt;
      }
    }
    this.nextExpiry = next;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer !== undefined) clearInterval(this.timer);
    for (const w of [...this.watchers]) w.queue.end();
    this.watchers.clear();
  }

  private remove(name: string, id: string): void {
    const byId = this.services.get(name);
    const e = byId?.get(id);
    if (byId === undefined || e === undefined) return;
    byId.delete(id);
    if (byId.size === 0) this.services.delete(name);
    this.emit(Object.freeze({ type: 'delete', instance: e.instance }));
  }

  private emit(event: RegistryEvent): void {
    for (const w of this.watchers) {
      if (w.service === undefined || w.service === event.instance.name) w.queue.push(event);
    }
  }

  private open(): void {
    if (this.closed) throw new ClosedError('MemoryRegistry is closed');
  }
}
