/**
 * The registry model: what an instance is, what a registry does, what a watch yields, and the options
 * and stats of the registry module's parts. MemoryRegistry, EtcdRegistry and RegistryCache all
 * implement `Registry`; MemoryRegistry and EtcdRegistry pass one contract test.
 */
import type { BackoffOptions } from '../core/backoff.js';
import type { Clock } from '../core/clock.js';

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
  /**
   * getService answers the service's instances; rejects NotFoundError when it has none. The array is
   * read-only (a cache shares one frozen array between callers): copy it before sorting or changing it.
   */
  getService(name: string, options?: CallOptions): Promise<readonly ServiceInstance[]>;
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

/** MemoryRegistryOptions configures a MemoryRegistry. */
export interface MemoryRegistryOptions {
  /** The TTL of registrations that give none; 0 means they never expire. Defaults to 0. */
  ttlMs?: number;
  /** Events a watcher may have waiting before it is told to resync (`WatchResyncError`). Defaults to 1 024. */
  watchQueueSize?: number;
  /** How often a timer looks for expired instances (calls check too); 0 disables the timer. Defaults to 1 000. */
  sweepIntervalMs?: number;
  /** The clock for TTLs and the sweep timer. Defaults to `systemClock`. */
  clock?: Clock;
}

/** MemoryRegistryStats are a MemoryRegistry's counters and gauges. */
export interface MemoryRegistryStats {
  /** Services with at least one instance. */
  services: number;
  /** Instances registered. */
  instances: number;
  /** Open watches. */
  watchers: number;
  /** Events emitted (each counted once, however many watchers got it). */
  events: number;
  /** Instances removed because their TTL passed. */
  expired: number;
}

/** RegistryCacheOptions configures a RegistryCache. */
export interface RegistryCacheOptions {
  /** How long an answer (and each node in it) stays fresh. Defaults to 60 000 (go-micro). */
  ttlMs?: number;
  /** The least time between refresh attempts of one service after a failed or empty one. Defaults to 5 000 (go-micro). */
  minRetryIntervalMs?: number;
  /** A service not looked up (nor watched through the cache) for this long loses its entry and its watch. Defaults to 600 000. */
  idleMs?: number;
  /** The most services cached; past it the least recently used is dropped. Defaults to 10 000. */
  maxServices?: number;
  /** Watch each looked-up service for changes. Defaults to true. */
  watch?: boolean;
  /** Waits before a failed watch starts again. Defaults to `{ initialMs: 100, maxMs: 10 000, multiplier: 2, jitter: 'full' }`. */
  watchBackoff?: BackoffOptions;
  /** Events a watch served from the cache may have waiting before it is told to resync. Defaults to 1 024. */
  watchQueueSize?: number;
  /** Where to keep the last-known-good view across restarts. Defaults to none. */
  snapshotPath?: string;
  /** How long after a change the snapshot is written (changes in between are written together). Defaults to 1 000. */
  snapshotDebounceMs?: number;
  /**
   * The clock for TTLs, throttling and every timer. Defaults to the process-wide CoarseClock
   * (`getDefaultCoarseClock()`): TTLs are seconds long, and a lookup must not pay a precise clock read.
   */
  clock?: Clock;
  /** Uniform random numbers in [0, 1), for the watch backoff's jitter. Defaults to `Math.random`. */
  random?: () => number;
  /** Receives warnings (a bad snapshot, a failed snapshot write). Defaults to `process.emitWarning`. */
  onWarning?: (message: string) => void;
  /**
   * `close()` closes the wrapped registry too. Leave it false when the application also uses the registry
   * directly (to register its own instances, say) and closes it itself; set it when the cache is the
   * registry's only user. Defaults to false.
   */
  closeRegistry?: boolean;
}

/** RegistryCacheStats are plain counters, read as a snapshot. */
export interface RegistryCacheStats {
  /** Lookups answered from a fresh entry. */
  hits: number;
  /** Lookups that found no fresh entry. */
  misses: number;
  /** Lookups answered with a stale entry (throttled, or the registry failed or answered empty). */
  stale: number;
  /** Calls made to the registry's getService. */
  registryCalls: number;
  /** Lookups answered without asking the registry because the service was throttled. */
  throttled: number;
  /** Watches started again after they failed or ended. */
  watchReconnects: number;
  /** Watch events applied. */
  watchEvents: number;
  /** Services currently cached. */
  services: number;
  /** Registry watches open (one per watched service). */
  watches: number;
  /** Watches served from the cache's view (`watch({ service })`). */
  watchers: number;
}

/** ServiceChange says that a cached service's instances changed (a refresh or a watch event). */
export interface ServiceChange {
  readonly service: string;
  /** The new instances: frozen and shared. */
  readonly instances: readonly ServiceInstance[];
}

/** AnnounceOptions configures `announce()`. */
export interface AnnounceOptions {
  /**
   * The registration's TTL. When set, the instance is registered again every `ttlMs / 3`, so it stays
   * registered while the process lives and expires soon after it dies. Defaults to the registry's own
   * (an EtcdRegistry lease, kept alive by the registry; none for MemoryRegistry).
   */
  ttlMs?: number;
  /**
   * The process signals that deregister the instance and then resolve `shutdown`; `[]` for none. While
   * announce listens, Node's default (exit at once) is off: the application exits when it has drained.
   * Defaults to `['SIGTERM', 'SIGINT']`.
   */
  signals?: readonly NodeJS.Signals[];
  /** The longest deregistration may take at shutdown before `shutdown` resolves anyway. Defaults to 5 000. */
  deregisterTimeoutMs?: number;
  /** Aborts the first registration: `announce` rejects with `AbortedError`. Defaults to none. */
  signal?: AbortSignal;
  /** Receives failures to renew or to deregister (renewal is tried again at the next turn). Defaults to `process.emitWarning`. */
  onError?: (error: unknown) => void;
  /** The clock of the renewal timer and the deregistration deadline. Defaults to `systemClock`. */
  clock?: Clock;
}

/** AnnouncementStats are an announcement's counters. */
export interface AnnouncementStats {
  /** Registrations made, the first one included. */
  registrations: number;
  /** Renewals that failed. */
  failures: number;
  /** True until the instance is deregistered. */
  registered: boolean;
}

/** Announcement is a live registration of this process's instance; see `announce()`. */
export interface Announcement extends AsyncDisposable {
  /** The instance registered. */
  readonly instance: ServiceInstance;
  /**
   * shutdown resolves once the instance has been deregistered: with the signal's name when a signal
   * ended the announcement, with undefined when `close()` did. Drain (stop accepting, finish what is in
   * flight) and exit when it resolves; announce never exits the process itself.
   */
  readonly shutdown: Promise<NodeJS.Signals | undefined>;
  /** stats answers a snapshot of the counters. */
  stats(): AnnouncementStats;
  /** close stops renewing, stops listening for signals and deregisters the instance; idempotent. */
  close(): Promise<void>;
}
