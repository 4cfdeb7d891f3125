/**
 * HttpPool is the PeerPicker over HTTP (groupcache `HTTPPool`): a hash ring of peer URLs names each
 * key's owner; `HttpPeer`s (undici keep-alive pools) fetch from the others; `handler` serves their
 * requests for the groups registered with this pool. The connections to the peers are one undici
 * keep-alive pool per peer origin, in the same per-origin pool map the client's `fetch` uses. A
 * request from a peer is never forwarded to the owner, so peers that disagree about membership during
 * a rolling deploy cannot wait on each other forever (the problem reported in mailgun/groupcache#72);
 * with replicated ownership (`owners` > 1) one owner may ask another in a mode that goes no further.
 *
 * `protocol: 'groupcache'` makes the pool a member of a golang/groupcache cluster: Go's ring
 * (src/cache/ring.ts), Go's `GET` protocol (src/cache/http-peer.ts) and answers Go can read
 * (src/cache/peer-handler.ts). Peer deadlines follow the asking group's getter timeout, so a node
 * never gives up on an owner that is still loading (and then loads the key a second time).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { wallClock, type Clock } from '../core/clock.js';
import type { HashRing } from '../core/hash-ring.js';
import { hash32 } from '../core/hash.js';
import { clockOption, integer, options as checkOptions, showValue, type OptionKeys } from '../core/validate.js';
import { OriginPools } from '../internal/origin-pools.js';
import type { Registry } from '../registry/types.js';
import { HttpPeer, type HttpPeerConfig } from './http-peer.js';
import { CACHE_REPLICAS, GROUPCACHE_REPLICAS, cacheRing } from './ring.js';
import { bindRegistry, type Membership, type MembershipOptions } from './membership.js';
import { servePeer, type HandlerConfig } from './peer-handler.js';
import { normalizePeerUrl } from './peer-url.js';

export { normalizePeerUrl } from './peer-url.js';
import type { GroupServer, OwnerPick, PeerGetter, PeerPicker } from './peers.js';
import type { MetricsDescription } from '../core/metrics-description.js';

/** The keys of HttpPoolOptions, all of them: any other is refused (see `options`). */
const HTTP_POOL_KEYS = {
  self: true,
  protocol: true,
  basePath: true,
  replicas: true,
  owners: true,
  secret: true,
  timeoutMs: true,
  bodyTimeoutMs: true,
  connections: true,
  maxValueBytes: true,
  clock: true,
} as const satisfies OptionKeys<HttpPoolOptions>;

/** DEFAULT_GETTER_TIMEOUT_MS is Group's default getter timeout (groupDefaults.timeoutMs). */
const DEFAULT_GETTER_TIMEOUT_MS = 10_000;

/** peerTimeoutMs is how long a peer waits for an owner whose getter may run `getterTimeoutMs`. */
function peerTimeoutMs(getterTimeoutMs: number | undefined): number {
  return Math.min((getterTimeoutMs ?? DEFAULT_GETTER_TIMEOUT_MS) + PEER_SLACK_MS, MAX_PEER_WAIT_MS);
}

/** CacheProtocol is the peer protocol and ring of an HttpPool: bulwark's own, or golang/groupcache's. */
export type CacheProtocol = 'bulwark' | 'groupcache';

/** HttpPoolOptions configures an HttpPool. */
export interface HttpPoolOptions {
  /** This node's base URL as its peers reach it, e.g. `http://10.0.0.1:8080`. Required. */
  self: string;
  /**
   * protocol is how this node talks to its peers and builds its ring. `bulwark`: protobuf request
   * bodies, signing, TTLs, not-found answers, removal, replicated ownership. `groupcache`: golang/groupcache's
   * `HTTPPool` (its ring, `GET {basePath}{group}/{key}`, answers Go can read), so Node nodes can join a
   * Go groupcache cluster (docs/cache.md says what does not cross). Defaults to `bulwark`.
   */
  protocol?: CacheProtocol;
  /** The path prefix of peer requests; starts and ends with `/`. Defaults to `/_bulwark/` (`/_groupcache/` with protocol `groupcache`). */
  basePath?: string;
  /**
   * Virtual nodes per peer on the ring. Defaults to 1 280 (the busiest of 10 peers holds ≤ 1.07 × the
   * mean share at p95; groupcache's 50 gives 1.36 ×), and to 50 with protocol `groupcache`, which
   * also hashes as Go does (crc32, `strconv.Itoa(i) + peer`). Set 50 to keep groupcache's count.
   */
  replicas?: number;
  /**
   * owners is R: each key is owned by the first R distinct nodes clockwise on the ring. The first
   * healthy owner loads it from the origin (after asking the other owners' caches); other owners copy
   * it from there; other nodes read it from any healthy owner. A node joining or leaving then leaves
   * each key with an owner that still holds it. 1 to 8; must be 1 with protocol `groupcache`. Defaults to 1.
   */
  owners?: number;
  /** When set, requests are signed (HMAC-SHA256) and unsigned or badly signed ones get 401. Not with protocol `groupcache`. Defaults to none. */
  secret?: string | Uint8Array;
  /**
   * The deadline of one peer request (connect, headers, body), in ms. Defaults to the asking group's
   * getter `timeoutMs` + 1 000 (at most 120 000), so that a node waits for an owner's load as long as
   * that load may take instead of giving up and loading the key a second time; 11 000 for a group not
   * registered here. A value set here applies to every group.
   */
  timeoutMs?: number;
  /** How long this node's handler waits for a peer request's body before answering 408 and closing the connection. Defaults to 5 000. */
  bodyTimeoutMs?: number;
  /** Keep-alive connections per peer. Defaults to 16. */
  connections?: number;
  /** The largest value a peer may send. Defaults to 1 048 576 (1 MiB). */
  maxValueBytes?: number;
  /**
   * The clock: wall time (ms since the epoch) for request signatures, which peers compare with their
   * own, and peer health; the timers of the body deadline and of closing a departed peer's
   * connections. Defaults to `wallClock`.
   */
  clock?: Clock;
}

/** Defaults for HttpPoolOptions. */
export const httpPoolDefaults = Object.freeze({
  protocol: 'bulwark' as CacheProtocol,
  basePath: '/_bulwark/',
  groupcacheBasePath: '/_groupcache/',
  replicas: CACHE_REPLICAS,
  groupcacheReplicas: GROUPCACHE_REPLICAS,
  owners: 1,
  bodyTimeoutMs: 5_000,
  connections: 16,
  maxValueBytes: 1 << 20,
});

/** Idle keep-alive sockets to a peer are closed after this long (peers talk often; undici's 4 s would reconnect needlessly). */
const PEER_KEEP_ALIVE_MS = 30_000;
/** Most peer pools kept at once: far above any ring, only a bound against a membership gone wrong. */
const MAX_PEER_POOLS = 65_536;
/** What a peer waits beyond the owner's getter timeout: the request and the answer's transfer. */
export const PEER_SLACK_MS = 1_000;
/** The longest a peer waits for an owner by default, however long the group lets its getter run. */
export const MAX_PEER_WAIT_MS = 120_000;
/** Connecting to a peer (a loopback or LAN hop) takes at most this long unless `timeoutMs` is set. */
const CONNECT_TIMEOUT_MS = 5_000;
/** A removal (no load behind it) waits at most this long unless `timeoutMs` is set. */
const REMOVE_TIMEOUT_MS = 2_000;
/** The most owners per key. */
const MAX_OWNERS = 8;

/** HttpPool picks peers by consistent hashing and talks to them over HTTP. */
export class HttpPool implements PeerPicker {
  /** This node's URL (in groupcache mode exactly as given). */
  readonly self: string;
  /** The path prefix of peer requests. */
  readonly basePath: string;
  /** The peer protocol. */
  readonly protocol: CacheProtocol;
  /** Owners per key (R). */
  readonly owners: number;
  private readonly ring: HashRing;
  private readonly peerConfig: HttpPeerConfig;
  private readonly handlerConfig: HandlerConfig;
  private readonly groups = new Map<string, GroupServer>();
  private getters = new Map<string, HttpPeer>();
  private others: HttpPeer[] = [];
  private readonly memberships = new Set<Membership>();
  private readonly pools: OriginPools;
  private isClosed = false;
  /** Which of a key's healthy owners this node reads from when it is not one of them: spreads reads (and copies) over the owners. */
  private readonly spread: number;

  constructor(options: HttpPoolOptions) {
    const o = checkOptions('HttpPool', options, HTTP_POOL_KEYS);
    const protocol = o.protocol ?? httpPoolDefaults.protocol;
    if (protocol !== 'bulwark' && protocol !== 'groupcache') {
      throw new TypeError(`HttpPool: protocol must be 'bulwark' or 'groupcache', got ${showValue(protocol)}`);
    }
    this.protocol = protocol;
    const go = protocol === 'groupcache';
    const selfOrigin = normalizePeerUrl('HttpPool', 'self', o.self);
    this.self = go ? (o.self as string) : selfOrigin;
    this.spread = hash32(this.self);
    const basePath = o.basePath ?? (go ? httpPoolDefaults.groupcacheBasePath : httpPoolDefaults.basePath);
    if (typeof basePath !== 'string' || !/^\/([A-Za-z0-9._~-]+\/)*$/.test(basePath)) {
      throw new TypeError(`HttpPool: basePath must start and end with "/" (e.g. "/_bulwark/"), got ${JSON.stringify(basePath)}`);
    }
    this.basePath = basePath;
    const replicas = integer('HttpPool', 'replicas', o.replicas ?? (go ? httpPoolDefaults.groupcacheReplicas : httpPoolDefaults.replicas), 1, 1 << 12);
    this.ring = cacheRing(protocol, replicas);
    this.owners = integer('HttpPool', 'owners', o.owners ?? httpPoolDefaults.owners, 1, MAX_OWNERS);
    if (go && this.owners !== 1) {
      throw new RangeError(`HttpPool: owners must be 1 with protocol 'groupcache' (a Go node knows one owner per key), got ${this.owners}`);
    }
    const secret = o.secret;
    if (secret !== undefined && !((typeof secret === 'string' || secret instanceof Uint8Array) && secret.length > 0)) {
      throw new TypeError('HttpPool: secret must be a non-empty string or Uint8Array');
    }
    if (secret !== undefined && go)
      throw new TypeError("HttpPool: secret cannot be used with protocol 'groupcache' (Go groupcache peers neither sign nor check signatures)");
    const clock = clockOption('HttpPool', o.clock, wallClock);
    const fixedTimeoutMs = o.timeoutMs === undefined ? undefined : integer('HttpPool', 'timeoutMs', o.timeoutMs, 1);
    const bodyTimeoutMs = integer('HttpPool', 'bodyTimeoutMs', o.bodyTimeoutMs ?? httpPoolDefaults.bodyTimeoutMs, 1);
    const connections = integer('HttpPool', 'connections', o.connections ?? httpPoolDefaults.connections, 1, 1024);
    this.pools = new OriginPools({
      owner: 'HttpPool',
      pool: {
        connections,
        pipelining: 1,
        keepAliveTimeout: PEER_KEEP_ALIVE_MS,
        // Each request sets its own headers and body deadlines (timeoutFor); these only bound the rest.
        headersTimeout: fixedTimeoutMs ?? MAX_PEER_WAIT_MS,
        bodyTimeout: fixedTimeoutMs ?? MAX_PEER_WAIT_MS,
        connectTimeout: fixedTimeoutMs ?? CONNECT_TIMEOUT_MS,
      },
      maxPools: MAX_PEER_POOLS,
      clock,
    });
    const groups = this.groups;
    this.peerConfig = {
      protocol,
      basePath,
      secret,
      clock,
      pools: this.pools,
      maxValueBytes: integer('HttpPool', 'maxValueBytes', o.maxValueBytes ?? httpPoolDefaults.maxValueBytes, 0, 1 << 30),
      timeoutFor: fixedTimeoutMs !== undefined ? () => fixedTimeoutMs : (group) => peerTimeoutMs(groups.get(group)?.timeoutMs),
      removeTimeoutMs: fixedTimeoutMs ?? REMOVE_TIMEOUT_MS,
    };
    this.handlerConfig = { protocol, basePath, bodyTimeoutMs, secret, groups: this.groups, clock, closed: () => this.isClosed };
    this.ring.add(this.self);
    this.handler = this.handler.bind(this);
  }

  /** setPeers replaces the peer set with `urls` (this node is always a member); the ring is rebuilt. */
  setPeers(...urls: string[]): void {
    // Go's ring hashes the peer strings exactly as given; bulwark's compares them normalized.
    const go = this.protocol === 'groupcache';
    const origins = new Map<string, string>();
    urls.forEach((u, i) => {
      const origin = normalizePeerUrl('HttpPool.setPeers', `peer ${i}`, u);
      origins.set(go ? u : origin, origin);
    });
    origins.delete(this.self);
    const members = new Set(origins.keys());
    members.add(this.self);
    this.ring.set(members);
    const next = new Map<string, HttpPeer>();
    for (const [url, origin] of origins) next.set(url, this.getters.get(url) ?? new HttpPeer(url, this.peerConfig, origin));
    for (const [url, peer] of this.getters) if (!next.has(url)) void peer.close();
    this.getters = next;
    this.others = [...next.values()];
  }

  /**
   * describeMetrics answers the pool's family (`cache_ring_members`: nodes on the ring, this one
   * included), read at scrape time; its snapshot lists the members and each one's share of the keys it
   * owns first (`shares`: the ring's arcs, exact, summing to 1).
   */
  describeMetrics(): MetricsDescription {
    return {
      kind: 'HttpPool',
      families: [{ name: 'cache_ring_members', type: 'gauge', help: 'Nodes on a cache HttpPool’s hash ring, this one included.', labelNames: [] }],
      collect: (emit) => emit('cache_ring_members', {}, this.members().length),
      snapshot: () => ({ self: this.self, members: [...this.members()], shares: Object.fromEntries(this.ring.shares()) }),
    };
  }

  /** members lists every node on the ring, this one included, sorted. */
  members(): readonly string[] {
    return this.ring.members();
  }

  /** owner names the node that owns `key` (its URL). */
  owner(key: string): string {
    return this.ring.get(key)!;
  }

  /** pickPeer returns the HttpPeer that owns `key`, or undefined when this node does. */
  pickPeer(key: string): PeerGetter | undefined {
    if (this.others.length === 0) return undefined;
    const owner = this.ring.get(key);
    return owner === undefined || owner === this.self ? undefined : this.getters.get(owner);
  }

  /**
   * pickOwners answers the owners of `key` when `owners` > 1 (see OwnerPick), undefined otherwise. The
   * owners are the first `owners` distinct members clockwise from the key's hash.
   */
  pickOwners(key: string): OwnerPick | undefined {
    const r = this.owners;
    if (r === 1 || this.others.length === 0) return undefined;
    const ring = this.ring;
    const want = Math.min(r, ring.size);
    const start = ring.position(key);
    const names: string[] = [];
    for (let i = 0, n = ring.pointCount; i < n && names.length < want; i++) {
      const m = ring.memberAt(start + i);
      if (!names.includes(m)) names.push(m);
    }
    const healthy: HttpPeer[] = [];
    const down: HttpPeer[] = [];
    let self = false;
    let primary = false;
    for (const m of names) {
      if (m === this.self) {
        self = true;
        primary = healthy.length === 0;
        continue;
      }
      const peer = this.getters.get(m);
      if (peer === undefined) continue;
      (peer.healthy() ? healthy : down).push(peer);
    }
    // A node that owns no copy reads from the owners in a rotation of its own, so that every owner
    // serves (and so holds) the keys that nodes read.
    const turn = self || healthy.length < 2 ? 0 : this.spread % healthy.length;
    const first = turn === 0 ? healthy : healthy.slice(turn).concat(healthy.slice(0, turn));
    return { self, primary, peers: down.length === 0 ? first : first.concat(down) };
  }

  /** peers lists an HttpPeer for every other member. */
  peers(): readonly PeerGetter[] {
    return this.others;
  }

  /** register makes `group` reachable through `handler` (a Group with `peers: pool` calls it); names are unique per pool. */
  register(group: GroupServer): () => void {
    if (this.groups.has(group.name)) throw new TypeError(`HttpPool: a group named ${JSON.stringify(group.name)} is already registered`);
    this.groups.set(group.name, group);
    return () => {
      if (this.groups.get(group.name) === group) this.groups.delete(group.name);
    };
  }

  /**
   * handler serves peer requests for node:http (`http.createServer(pool.handler)`, or call it from your
   * own server for paths under `basePath`). Paths outside `basePath` get 404. The promise settles when
   * the answer is written; it never rejects.
   */
  handler(req: IncomingMessage, res: ServerResponse): Promise<void> {
    return servePeer(this.handlerConfig, req, res);
  }

  /**
   * bindRegistry registers this node as an instance of `service` and follows that service's watch: each
   * change sets the peers (so about 1/n of keys move when one of n nodes joins or leaves). `close()` on
   * the answer (or on the pool) stops watching and deregisters.
   */
  async bindRegistry(registry: Registry, options?: MembershipOptions): Promise<Membership> {
    const m = await bindRegistry(this, registry, options);
    this.memberships.add(m);
    m.closed.then(
      () => this.memberships.delete(m),
      () => this.memberships.delete(m),
    );
    return m;
  }

  /** close stops memberships, refuses further peer requests (503) and closes connections to peers. Idempotent. */
  async close(): Promise<void> {
    if (this.isClosed) return;
    this.isClosed = true;
    await Promise.all([...this.memberships].map((m) => m.close()));
    this.getters = new Map();
    this.others = [];
    await this.pools.close();
  }

  /** Symbol.asyncDispose closes the pool (`await using pool = new HttpPool(…)`). */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
