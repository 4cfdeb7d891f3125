/**
 * bulwark/registry: where services announce their instances and clients find them.
 *
 * - `Registry` is the interface; `MemoryRegistry` (embedded, TTLs, lossless watch) and `EtcdRegistry`
 *   (etcd leases with keep-alive, list-then-watch from a revision) implement it and pass one contract test;
 *   EtcdRegistry reads and writes the `bulwark`, `go-zero` and `go-micro` layouts (`EtcdLayout`).
 * - `RegistryCache` wraps any Registry with go-micro's cache semantics (TTL, stale fallback,
 *   singleflight, throttled refreshes, watch-driven updates) and answers fresh lookups from memory.
 * - `followService` keeps a live instance list of one service (core's Follower: list → watch → back
 *   off → resync); through a RegistryCache, every follower of a service shares the cache's one watch.
 * - `announce` registers this process's instance, keeps it registered, and at SIGTERM / SIGINT
 *   deregisters it before the application drains and exits.
 * - `checkInstance` / `checkName` validate the model: bad input is a TypeError naming the field.
 */
export type {
  ServiceInstance,
  CallOptions,
  RegisterOptions,
  RegistryEvent,
  ServiceListing,
  WatchOptions,
  Registry,
  MemoryRegistryOptions,
  MemoryRegistryStats,
  RegistryCacheOptions,
  RegistryCacheStats,
  ServiceChange,
  AnnounceOptions,
  Announcement,
  AnnouncementStats,
} from './types.js';
export { checkInstance, checkName, checkAddress, sameInstance, MAX_METADATA_BYTES } from './validate.js';
export { MemoryRegistry, memoryRegistryDefaults } from './memory-registry.js';
export { EtcdRegistry, etcdRegistryDefaults, type EtcdMemberStats, type EtcdRegistryOptions, type EtcdRegistryStats } from './etcd-registry.js';
export { etcdLayout, addressId, type EtcdLayout, type EtcdLayoutName, type LayoutCapabilities } from './etcd-layout.js';
export type { Decoded } from './etcd-layout.js';
export { etcdEndpoints } from './etcd-endpoints.js';
export { etcdConnection, type EtcdAuthOptions, type EtcdConnection, type EtcdConnectionOptions, type EtcdTlsOptions } from './etcd-connection.js';
export { RegistryCache, registryCacheDefaults } from './registry-cache.js';
export { announce, announceDefaults } from './announce.js';
export { followService, serviceSource, type ServiceFollowerOptions } from './follow.js';
export {
  NotFoundError,
  RegistryDeniedError,
  RegistryPendingError,
  RegistryUnavailableError,
  WatchResyncError,
  ClosedError,
  AbortedError,
} from '../core/errors.js';
