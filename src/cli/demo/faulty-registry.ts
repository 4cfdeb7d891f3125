/**
 * FaultyRegistry wraps a Registry so that the demo can make it stop answering: while down, lookups and
 * registrations reject with RegistryUnavailableError and every watch breaks (new ones fail at once),
 * as when an etcd cluster loses quorum. What is in front of it — the RegistryCache — keeps answering
 * from what it knew, which is the point of the demo.
 */
import { RegistryUnavailableError } from '../../core/index.js';
import type { RegisterOptions, Registry, RegistryEvent, ServiceInstance, WatchOptions } from '../../registry/index.js';

/** FaultyRegistry is a Registry whose answers can be switched off and on. */
export class FaultyRegistry implements Registry {
  private down = false;
  private readonly watches = new Set<AbortController>();
  /** Calls refused while down. */
  refused = 0;

  constructor(private readonly inner: Registry) {}

  /** answering is false while the fault is on. */
  get answering(): boolean {
    return !this.down;
  }

  /** setAnswering turns the fault off (true) or on (false); turning it on breaks every open watch. */
  setAnswering(answering: boolean): void {
    this.down = !answering;
    if (this.down) for (const c of this.watches) c.abort(this.unavailable());
  }

  register(instance: ServiceInstance, options?: RegisterOptions): Promise<void> {
    return this.down ? this.refuse() : this.inner.register(instance, options);
  }

  deregister(instance: ServiceInstance): Promise<void> {
    return this.down ? this.refuse() : this.inner.deregister(instance);
  }

  getService(name: string): Promise<readonly ServiceInstance[]> {
    return this.down ? this.refuse() : this.inner.getService(name);
  }

  listServices(): Promise<string[]> {
    return this.down ? this.refuse() : this.inner.listServices();
  }

  watch(options?: WatchOptions): AsyncIterable<RegistryEvent> {
    return { [Symbol.asyncIterator]: () => this.watchEvents(options) };
  }

  close(): Promise<void> {
    for (const c of this.watches) c.abort();
    return this.inner.close();
  }

  private async *watchEvents(options: WatchOptions | undefined): AsyncGenerator<RegistryEvent> {
    if (this.down) {
      this.refused++;
      throw this.unavailable();
    }
    const controller = new AbortController();
    const outer = options?.signal;
    const onAbort = () => controller.abort(outer!.reason);
    if (outer?.aborted) return;
    outer?.addEventListener('abort', onAbort, { once: true });
    this.watches.add(controller);
    try {
      for await (const event of this.inner.watch({ ...options, signal: controller.signal })) yield event;
      const reason: unknown = controller.signal.reason;
      if (reason instanceof RegistryUnavailableError) throw reason;
    } finally {
      this.watches.delete(controller);
      outer?.removeEventListener('abort', onAbort);
    }
  }

  private refuse<T>(): Promise<T> {
    this.refused++;
    return Promise.reject(this.unavailable());
  }

  private unavailable(): RegistryUnavailableError {
    return new RegistryUnavailableError('registry is not answering (fault injected by the demo)');
  }
}
