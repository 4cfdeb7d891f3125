/**
 * MemoryRegistry is the embedded default registry: everything in one process's memory.
 * It honours `ttlMs` (an instance not registered again in time expires, and its watchers get `delete`),
 * and its watchers never lose events silently: each has a bounded queue, and one that falls behind
 * gets `WatchResyncError` after its queued events (go-micro's memory registry drops events instead).
 * Time comes from the injected clock; expiry is checked on every call and by an unref'd sweep timer set
 * on that clock. An event costs O(watchers of its service): watchers are kept per service.
 */
import { throwIfAborted } from '../core/abort.js';
import { systemClock, type Clock, type TimerHandle } from '../core/clock.js';
import { ClosedError, NotFoundError } from '../core/errors.js';
import { clockOption, integer, options as checkOptions, positive, type OptionKeys } from '../core/validate.js';
import { EventQueue } from './event-queue.js';
import type {
  CallOptions,
  MemoryRegistryOptions,
  MemoryRegistryStats,
  RegisterOptions,
  Registry,
  RegistryEvent,
  ServiceInstance,
  WatchOptions,
} from './types.js';
import { checkInstance, checkName, sameInstance, watchEvent } from './validate.js';

/** The keys of MemoryRegistryOptions, all of them: any other is refused (see `options`). */
const MEMORY_REGISTRY_KEYS = {
  ttlMs: true,
  watchQueueSize: true,
  sweepIntervalMs: true,
  clock: true,
} as const satisfies OptionKeys<MemoryRegistryOptions>;

/** Defaults for MemoryRegistryOptions. */
export const memoryRegistryDefaults = Object.freeze({ ttlMs: 0, watchQueueSize: 1024, sweepIntervalMs: 1000 });

interface Entry {
  instance: ServiceInstance;
  /** Absolute expiry on the clock, Infinity when none. */
  expiresAt: number;
}

/** MemoryRegistry keeps instances in memory; see the module comment. */
export class MemoryRegistry implements Registry {
  private readonly services = new Map<string, Map<string, Entry>>();
  /** Watchers of one service, by service; watchers of every service in `everything`. */
  private readonly watchers = new Map<string, Set<EventQueue>>();
  private readonly everything = new Set<EventQueue>();
  private watcherCount = 0;
  private readonly clock: Clock;
  private readonly ttlMs: number;
  private readonly queueSize: number;
  private readonly timer: TimerHandle | undefined;
  private readonly counters = { events: 0, expired: 0 };
  /** The earliest expiry of any entry (a lower bound), so most calls skip the scan. */
  private nextExpiry = Infinity;
  private closed = false;

  constructor(options?: MemoryRegistryOptions) {
    const o = checkOptions('MemoryRegistry', options, MEMORY_REGISTRY_KEYS);
    this.clock = clockOption('MemoryRegistry', o.clock, systemClock);
    this.ttlMs = integer('MemoryRegistry', 'ttlMs', o.ttlMs ?? memoryRegistryDefaults.ttlMs, 0);
    this.queueSize = integer('MemoryRegistry', 'watchQueueSize', o.watchQueueSize ?? memoryRegistryDefaults.watchQueueSize, 1);
    const sweep = integer('MemoryRegistry', 'sweepIntervalMs', o.sweepIntervalMs ?? memoryRegistryDefaults.sweepIntervalMs, 0);
    if (sweep > 0) {
      this.timer = this.clock.setInterval(() => this.expire(), sweep);
      this.timer.unref();
    }
  }

  /** register adds or updates an instance and renews its TTL; rejects AbortedError when `signal` is already aborted. */
  async register(instance: ServiceInstance, options?: RegisterOptions): Promise<void> {
    const inst = checkInstance('MemoryRegistry.register', instance);
    const ttl = options?.ttlMs === undefined ? this.ttlMs : positive('MemoryRegistry.register', 'ttlMs', options.ttlMs);
    throwIfAborted(options?.signal);
    this.open();
    this.expire();
    const now = this.clock.now();
    const expiresAt = ttl > 0 ? now + ttl : Infinity;
    if (expiresAt < this.nextExpiry) this.nextExpiry = expiresAt;
    let byId = this.services.get(inst.name);
    if (byId === undefined) this.services.set(inst.name, (byId = new Map()));
    const old = byId.get(inst.id);
    if (old === undefined) {
      byId.set(inst.id, { instance: inst, expiresAt });
      this.emit(watchEvent('create', inst));
    } else {
      // Updated in place: an entry per update would come from the allocation site of the long-lived
      // entries, which V8 then allocates straight into the old generation (see watchEvent).
      const before = old.instance;
      old.instance = inst;
      old.expiresAt = expiresAt;
      if (!sameInstance(before, inst)) this.emit(watchEvent('update', inst));
    }
  }

  /** deregister removes an instance (watchers get `delete`); rejects AbortedError when `signal` is already aborted. */
  async deregister(instance: ServiceInstance, options?: CallOptions): Promise<void> {
    const name = checkName('MemoryRegistry.deregister', 'instance.name', instance?.name);
    const id = checkName('MemoryRegistry.deregister', 'instance.id', instance.id);
    throwIfAborted(options?.signal);
    this.open();
    this.expire();
    this.remove(name, id);
  }

  /** getService answers a fresh array of the service's instances; rejects NotFoundError when it has none, AbortedError when `signal` is already aborted. */
  async getService(name: string, options?: CallOptions): Promise<ServiceInstance[]> {
    checkName('MemoryRegistry.getService', 'name', name);
    throwIfAborted(options?.signal);
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
    let set = this.everything;
    if (service !== undefined) {
      const known = this.watchers.get(service);
      if (known !== undefined) set = known;
      else this.watchers.set(service, (set = new Set()));
    }
    const queue: EventQueue = new EventQueue(this.queueSize, o.signal, () => {
      if (!set.delete(queue)) return;
      this.watcherCount--;
      if (set.size === 0 && service !== undefined && this.watchers.get(service) === set) this.watchers.delete(service);
    });
    if (this.closed) queue.end();
    else {
      set.add(queue);
      this.watcherCount++;
    }
    o.onReady?.();
    return queue;
  }

  /** stats answers a snapshot of the counters. */
  stats(): MemoryRegistryStats {
    let instances = 0;
    for (const byId of this.services.values()) instances += byId.size;
    return { services: this.services.size, instances, watchers: this.watcherCount, events: this.counters.events, expired: this.counters.expired };
  }

  /** expire removes every instance whose TTL has passed (watchers get `delete`). Calls run it; so does the sweep timer. */
  expire(): void {
    const now = this.clock.now();
    if (now < this.nextExpiry) return;
    let next = Infinity;
    for (const [name, byId] of this.services) {
      for (const [id, e] of byId) {
        if (e.expiresAt <= now) {
          this.counters.expired++;
          this.remove(name, id);
        } else if (e.expiresAt < next) next = e.expiresAt;
      }
    }
    this.nextExpiry = next;
  }

  /** close ends every watch and stops the sweep timer; later calls reject ClosedError. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.clock.clearTimeout(this.timer);
    for (const q of [...this.everything]) q.end();
    for (const set of [...this.watchers.values()]) for (const q of [...set]) q.end();
    this.watchers.clear();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  private remove(name: string, id: string): void {
    const byId = this.services.get(name);
    const e = byId?.get(id);
    if (byId === undefined || e === undefined) return;
    byId.delete(id);
    if (byId.size === 0) this.services.delete(name);
    this.emit(watchEvent('delete', e.instance));
  }

  private emit(event: RegistryEvent): void {
    this.counters.events++;
    const set = this.watchers.get(event.instance.name);
    if (set !== undefined) for (const q of set) q.push(event);
    for (const q of this.everything) q.push(event);
  }

  private open(): void {
    if (this.closed) throw new ClosedError('MemoryRegistry is closed');
  }
}
