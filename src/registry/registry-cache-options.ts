/**
 * The public shapes of RegistryCache: its options and their defaults, its stats, its change event.
 */
import type { Clock } from '../core/clock.js';
import type { ServiceInstance } from './types.js';

/** RegistryCacheOptions configures a RegistryCache. */
export interface RegistryCacheOptions {
  /** How long an answer (and each node in it) stays fresh. Defaults to 60 000 (go-micro). */
  ttlMs?: number;
  /** The least time between refresh attempts of one service after a failed or empty one. Defaults to 5 000 (go-micro). */
  minRetryIntervalMs?: number;
  /** A service not looked up for this long loses its entry and its watch. Defaults to 600 000. */
  idleMs?: number;
  /** The most services cached; past it the least recently used is dropped. Defaults to 10 000. */
  maxServices?: number;
  /** Watch each looked-up service for changes. Defaults to true. */
  watch?: boolean;
  /** The first wait before a failed watch reconnects (then doubling, plus 0–100 ms jitter). Defaults to 100. */
  watchRetryInitialMs?: number;
  /** The longest wait before a failed watch reconnects. Defaults to 10 000. */
  watchRetryMaxMs?: number;
  /** Where to keep the last-known-good view across restarts. Defaults to none. */
  snapshotPath?: string;
  /** How long after a change the snapshot is written (changes in between are written together). Defaults to 1 000. */
  snapshotDebounceMs?: number;
  /** The clock for TTLs and throttling. Defaults to `systemClock`. */
  clock?: Clock;
  /** Uniform random numbers in [0, 1), for reconnect jitter. Defaults to `Math.random`. */
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

/** Defaults for RegistryCacheOptions. */
export const registryCacheDefaults = Object.freeze({
  ttlMs: 60_000,
  minRetryIntervalMs: 5_000,
  idleMs: 600_000,
  maxServices: 10_000,
  watch: true,
  watchRetryInitialMs: 100,
  watchRetryMaxMs: 10_000,
  snapshotDebounceMs: 1_000,
  closeRegistry: false,
});

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
}

/** ServiceChange says that a cached service's instances changed (a refresh or a watch event). */
export interface ServiceChange {
  readonly service: string;
  /** The new instances: frozen and shared. */
  readonly instances: readonly ServiceInstance[];
}
