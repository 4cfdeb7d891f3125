/**
 * bulwark/registry: where services announce their instances and clients find them.
 *
 * - `Registry` is the interface; `MemoryRegistry` (embedded, TTLs, lossless watch) and `EtcdRegistry`
 *   (etcd leases with keep-alive, list-then-watch from a revision) implement it and pass one contract test.
 * - `RegistryCache` wraps any Registry with go-micro's cache semantics (TTL, stale fallback,
 *   singleflight, throttled refreshes, watch-driven updates) and answers fresh lookups from memory.
 * - `checkInstance` / `checkName` validate the model: bad input is a TypeError naming the field.
 */
export type { ServiceInstance, RegisterOptions, RegistryEvent, ServiceListing, WatchOptions, Registry } from './types.js';
export { checkInstance, checkName, checkAddress, sameInstance, MAX_METADATA_BYTES } from './validate.js';
export { EventQueue } from './event-queue.js';
export { MemoryRegistry, memoryRegistryDefaults, type MemoryRegistryOptions } from './memory-registry.js';
export { EtcdRegistry, etcdRegistryDefaults, type EtcdRegistryOptions, type EtcdRegistryStats } from './etcd-registry.js';
export { RegistryCache, registryCacheDefaults, type RegistryCacheOptions, type RegistryCacheStats, type ServiceChange } from './registry-cache.js';
