/**
 * The registry model: what an instance is, what a registry does, what a watch yields.
 * MemoryRegistry, EtcdRegistry and RegistryCache all implement `Registry` and pass one contract test.
 */

/** ServiceInstance is one running copy of a service. */
export interface ServiceInstance {
  /** Unique within the service: 1–255 characters of [A-Za-z0-9._:-]. */
  readonly id: string;
  /** The service name: 1–255 characters of [A-Za-z0-9._:-]. */
  readonly name: string;
  /** Where to reach it, `host:port` (IPv6 hosts in brackets: `[::1]:8080`). */
  readonly address: string;
  /** The instance's version, free text. */
  readonly version?: string;
  /** String metadata (e.g. `weight`, `zone`), at most 64 KiB in all. */
  readonly metadata?: Readonly<Record<string, string>>;
}

/** CallOptions are the per-call options every registry call takes. */
export interface CallOptions {
  /** Aborts the call: it rejects with `AbortedError` (what it already started may still complete). */
  signal?: AbortSignal | undefined;
}

/** RegisterOptions configures one registration. */
export interface RegisterOptions extends CallOptions {
  /** The instance expires unless registered again within this time. Defaults to the registry's own TTL (none for MemoryRegistry). */
  ttlMs?: number;
}

/** RegistryEvent is one change to a service's instances. */
export interface RegistryEvent {
  readonly type: 'create' | 'update' | 'delete';
  readonly instance: ServiceInstance;
  /**
   * The registry's revision of this change, when it keeps one (etcd's mod revision): a listing at
   * revision R (see `ServiceListing`) already reflects every event with revision ≤ R. Optional.
   */
  readonly revision?: number;
}

/** ServiceListing is a service's instances (possibly none) and the registry revision they were read at. */
export interface ServiceListing {
  readonly instances: ServiceInstance[];
  /** Every event with a revision ≤ this one is reflected in `instances`. */
  readonly revision: number;
}

/** WatchOptions selects what a watch yields. */
export interface WatchOptions {
  /** Only this service's events. Defaults to every service. */
  service?: string;
  /** Ends the watch: the iterator returns. */
  signal?: AbortSignal;
  /**
   * Called once the watch is established: every change made after this call is delivered. (An etcd
   * watch lists, then watches from the list's revision + 1; this says when that is done.) Defaults to none.
   */
  onReady?: () => void;
}

/** Registry is where services announce their instances and clients find them. */
export interface Registry {
  /** register adds or updates an instance (and renews its TTL). */
  register(instance: ServiceInstance, options?: RegisterOptions): Promise<void>;
  /** deregister removes an instance. */
  deregister(instance: ServiceInstance, options?: CallOptions): Promise<void>;
  /** getService answers the service's instances; rejects NotFoundError when it has none. */
  getService(name: string, options?: CallOptions): Promise<ServiceInstance[]>;
  /**
   * getServiceListing (optional) answers the instances with the revision they were read at, an empty
   * list when there are none. A registry whose events carry revisions implements it, so that RegistryCache
   * knows exactly which events a listing already reflects.
   */
  getServiceListing?(name: string, options?: CallOptions): Promise<ServiceListing>;
  /** listServices answers the names of services with at least one instance. */
  listServices(): Promise<string[]>;
  /** watch yields changes until `signal` aborts or the registry closes. */
  watch(options?: WatchOptions): AsyncIterable<RegistryEvent>;
  /** close releases timers, leases, connections and watches. */
  close(): Promise<void>;
}
