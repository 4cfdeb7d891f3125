/**
 * bulwark/cache: a groupcache-style distributed cache (golang/groupcache; docs/architecture.md "A cache read").
 *
 * - `LruCache`: least-recently-used by bytes, typed-array slots, optional expiry per entry.
 * - `Group`: a named read-through cache: main cache, hot cache, one load per key per node, the owner by
 *   the hash ring, TTLs with jitter, cached misses, `remove` everywhere.
 * - `HttpPool`: the `PeerPicker` over HTTP: undici keep-alive pools, protobuf answers
 *   and request bodies (proto/cache.proto), optional HMAC signing over the body, membership from a
 *   `Registry` (`bindRegistry`), replicated ownership (`owners`), and golang/groupcache's ring and
 *   protocol (`protocol: 'groupcache'`) to join a Go groupcache cluster.
 * - `ByteView`: the immutable value `Group.get` answers.
 */
export { LruCache, lruCacheDefaults, type LruCacheOptions } from '../core/lru-cache.js';
export { ByteView } from './byte-view.js';
export {
  Group,
  groupDefaults,
  type GroupOptions,
  type GroupStats,
  type GetOptions,
  type GroupAnswer,
  type AnswerSource,
  type Getter,
  type GetterResult,
} from './group.js';
export { HttpPool, httpPoolDefaults, normalizePeerUrl, PEER_SLACK_MS, MAX_PEER_WAIT_MS, type CacheProtocol, type HttpPoolOptions } from './http-pool.js';
export { CACHE_REPLICAS, GROUPCACHE_REPLICAS, crc32Utf8 } from './ring.js';
export { NOT_FOUND_HEADER, NODE_HEADER, PEER_DOWN_MS } from './http-peer.js';
export { membershipDefaults, urlOf, type Membership, type MembershipOptions } from './membership.js';
export { noPeers, type PeerGetter, type PeerPicker, type GroupServer, type GetResponse, type OwnerPick, type PeerMode } from './peers.js';
export { PEER_STATUSES, MAX_REQUEST_BYTES } from './peer-handler.js';
export { MAX_KEY_BYTES, keyProblem } from './key.js';
/** The registry's types membership takes and hands out. */
export type { Registry, ServiceInstance } from '../registry/types.js';
export { TIMESTAMP_HEADER, SIGNATURE_HEADER, MAX_SKEW_MS } from './signing.js';
export { AbortedError, ClosedError, InvalidResponseError, LoadError, NotFoundError, PeerError, TimeoutError } from '../core/errors.js';
