/**
 * bulwark/fleet: fleet-aware breakers. Processes that guard the same dependency share their breakers'
 * window counts through a store, and a breaker opens on the fleet's pooled evidence once enough
 * independent processes see the dependency failing (never on one process's word alone, unless
 * `quorum: 1`). Probing after that is rationed across the fleet. Opt in per breaker or per BreakerGroup
 * with `fleet: { store }`.
 *
 * - `MemoryFleetStore`: in memory, for tests and examples.
 * - `RedisFleetStore`: Redis (ioredis): pub/sub for reports, keys with expiry, Lua for the permits.
 * - `EtcdFleetStore`: etcd (etcd3): leases, a watch, transactions for the permits.
 */
export type { BreakerFleetOptions, FleetJoin, FleetLink, FleetMember, FleetViewStats } from '../breaker/types.js';
export type { FleetEvent, FleetSnapshot, FleetStore, PermitAnswer } from './types.js';
export { decideQuorum, neededQuorum, type FleetReport, type QuorumRule, type QuorumVerdict } from './quorum.js';
export { FleetView, fleetDefaults } from './fleet-view.js';
export { MemoryFleetStore, type MemoryFleetStoreOptions } from './memory-store.js';
export { RedisFleetStore, type RedisFleetStoreOptions } from './redis-store.js';
export { EtcdFleetStore, type EtcdFleetStoreOptions } from './etcd-store.js';
export type { EtcdAuthOptions, EtcdTlsOptions } from '../registry/etcd-connection.js';
export { RegistryDeniedError } from '../core/errors.js';
export { newCallerId } from './caller-id.js';
