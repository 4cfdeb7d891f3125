/** Fixtures shared by the RegistryCache tests: a fault-injecting fake registry and a cache over it. (No tests here.) */
import { ManualClock } from '../../src/core/clock.js';
import { NotFoundError } from '../../src/core/errors.js';
import { EventQueue } from '../../src/registry/event-queue.js';
import { RegistryCache } from '../../src/registry/registry-cache.js';
import type { Registry, RegistryCacheOptions, RegistryEvent, ServiceInstance, WatchOptions } from '../../src/registry/types.js';
export const inst = (id: string, name = 'api'): ServiceInstance => Object.freeze({ id, name, address: `127.0.0.1:${8000 + id.length}` });
export const flush = async (n = 5) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

/** FakeRegistry injects faults: failures, empty answers, held calls; its watches are driven by the test. */
export class FakeRegistry implements Registry {
  services = new Map<string, ServiceInstance[]>();
  calls = 0;
  fail: Error | undefined;
  /** When set, getService waits for `release()`. */
  hold = false;
  /** When set, a held getService answers the list as it was when called (a listing taken before later changes). */
  snapshotAtCall = false;
  closed = 0;
  private held: Array<() => void> = [];
  watches = new Set<{ service: string | undefined; queue: EventQueue }>();
  watchCalls = 0;

  async getService(name: string): Promise<ServiceInstance[]> {
    this.calls++;
    const atCall = this.services.get(name);
    if (this.hold) await new Promise<void>((r) => this.held.push(r));
    if (this.fail) throw this.fail;
    const list = this.snapshotAtCall ? atCall : this.services.get(name);
    if (list === undefined || list.length === 0) throw new NotFoundError(`no ${name}`);
    return [...list];
  }
  release(): void {
    this.hold = false;
    for (const r of this.held.splice(0)) r();
  }
  async register(i: ServiceInstance): Promise<void> {
    this.services.set(i.name, [...(this.services.get(i.name) ?? []).filter((x) => x.id !== i.id), i]);
  }
  async deregister(i: ServiceInstance): Promise<void> {
    this.services.set(
      i.name,
      (this.services.get(i.name) ?? []).filter((x) => x.id !== i.id),
    );
  }
  async listServices(): Promise<string[]> {
    return [...this.services.keys()];
  }
  watch(options?: WatchOptions): AsyncIterable<RegistryEvent> {
    this.watchCalls++;
    const w = { service: options?.service, queue: undefined as unknown as EventQueue };
    w.queue = new EventQueue(100, options?.signal, () => this.watches.delete(w));
    this.watches.add(w);
    queueMicrotask(() => options?.onReady?.());
    return w.queue;
  }
  emit(e: RegistryEvent): void {
    for (const w of this.watches) if (w.service === undefined || w.service === e.instance.name) w.queue.push(e);
  }
  failWatches(err: Error): void {
    for (const w of [...this.watches]) w.queue.fail(err);
  }
  async close(): Promise<void> {
    this.closed++;
  }
}

export function setup(options: RegistryCacheOptions = {}) {
  const clock = new ManualClock(1_000_000);
  const fake = new FakeRegistry();
  fake.services.set('api', [inst('a1'), inst('a2')]);
  const cache = new RegistryCache(fake, {
    clock,
    ttlMs: 60_000,
    minRetryIntervalMs: 5_000,
    watchBackoff: { initialMs: 1, maxMs: 2, jitter: 'none' },
    ...options,
  });
  return { clock, fake, cache };
}
export const ids = (l: readonly ServiceInstance[]) => l.map((i) => i.id).sort();
