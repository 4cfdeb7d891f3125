/**
 * HttpPool is the PeerPicker over HTTP (groupcache `HTTPPool`): a hash ring of peer URLs names each
 * key's owner; `HttpPeer`s (undici keep-alive pools) fetch from the others; `handler` serves their
 * requests for the groups registered with this pool. The connections to the peers are one undici
 * keep-alive pool per peer origin, in the same per-origin pool map the client's `fetch` uses. A request from a peer is always served locally and
 * never forwarded again, so peers that disagree about membership during a rolling deploy cannot wait on
 * each other forever (the problem reported in mailgun/groupcache#72).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { wallClock, type Clock } from '../core/clock.js';
import { HashRing } from '../core/hash-ring.js';
import { clockOption, integer, options as checkOptions } from '../core/validate.js';
import { OriginPools } from '../internal/origin-pools.js';
import type { Registry } from '../registry/types.js';
import { HttpPeer, type HttpPeerConfig } from './http-peer.js';
import { bindRegistry, type Membership, type MembershipOptions } from './membership.js';
import { servePeer, type HandlerConfig } from './peer-handler.js';
import { normalizePeerUrl } from './peer-url.js';

export { normalizePeerUrl } from './peer-url.js';
import type { GroupServer, PeerGetter, PeerPicker } from './peers.js';

/** HttpPoolOptions configures an HttpPool. */
export interface HttpPoolOptions {
  /** This node's base URL as its peers reach it, e.g. `http://10.0.0.1:8080`. Required. */
  self: string;
  /** The path prefix of peer requests; starts and ends with `/`. Defaults to `/_bulwark/`. */
  basePath?: string;
  /** Virtual nodes per peer on the ring. Defaults to 50 (groupcache). */
  replicas?: number;
  /** When set, requests are signed (HMAC-SHA256) and unsigned or badly signed ones get 401. Defaults to none. */
  secret?: string | Uint8Array;
  /** The deadline of one peer request (connect, headers, body). Defaults to 2 000. */
  timeoutMs?: number;
  /** Keep-alive connections per peer. Defaults to 16. */
  connections?: number;
  /** The largest value a peer may send. Defaults to 1 048 576 (1 MiB). */
  maxValueBytes?: number;
  /**
   * The clock: wall time (ms since the epoch) for request signatures, which peers compare with their
   * own, and the timers that close a departed peer's connections. Defaults to `wallClock`.
   */
  clock?: Clock;
}

/** Defaults for HttpPoolOptions. */
export const httpPoolDefaults = Object.freeze({
  basePath: '/_bulwark/',
  replicas: 50,
  timeoutMs: 2_000,
  connections: 16,
  maxValueBytes: 1 << 20,
});

/** Idle keep-alive sockets to a peer are closed after this long (peers talk often; undici's 4 s would reconnect needlessly). */
const PEER_KEEP_ALIVE_MS = 30_000;
/** Most peer pools kept at once: far above any ring, only a bound against a membership gone wrong. */
const MAX_PEER_POOLS = 65_536;

/** HttpPool picks peers by consistent hashing and talks to them over HTTP. */
export class HttpPool implements PeerPicker {
  /** This node's URL. */
  readonly self: string;
  /** The path prefix of peer requests. */
  readonly basePath: string;
  private readonly ring: HashRing;
  private readonly peerConfig: HttpPeerConfig;
  private readonly handlerConfig: HandlerConfig;
  private readonly groups = new Map<string, GroupServer>();
  private getters = new Map<string, HttpPeer>();
  private others: HttpPeer[] = [];
  private readonly memberships = new Set<Membership>();
  private readonly pools: OriginPools;
  private isClosed = false;

  constructor(options: HttpPoolOptions) {
    const o = checkOptions('HttpPool', options);
    this.self = normalizePeerUrl('HttpPool', 'self', o.self);
    const basePath = o.basePath ?? httpPoolDefaults.basePath;
    if (typeof basePath !== 'string' || !/^\/([A-Za-z0-9._~-]+\/)*$/.test(basePath)) {
      throw new TypeError(`HttpPool: basePath must start and end with "/" (e.g. "/_bulwark/"), got ${JSON.stringify(basePath)}`);
    }
    this.basePath = basePath;
    this.ring = new HashRing({ replicas: integer('HttpPool', 'replicas', o.replicas ?? httpPoolDefaults.replicas, 1, 1 << 12) });
    const secret = o.secret;
    if (secret !== undefined && !((typeof secret === 'string' || secret instanceof Uint8Array) && secret.length > 0)) {
      throw new TypeError('HttpPool: secret must be a non-empty string or Uint8Array');
    }
    const clock = clockOption('HttpPool', o.clock, wallClock);
    const timeoutMs = integer('HttpPool', 'timeoutMs', o.timeoutMs ?? httpPoolDefaults.timeoutMs, 1);
    const connections = integer('HttpPool', 'connections', o.connections ?? httpPoolDefaults.connections, 1, 1024);
    this.pools = new OriginPools({
      owner: 'HttpPool',
      pool: {
        connections,
        pipelining: 1,
        keepAliveTimeout: PEER_KEEP_ALIVE_MS,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        connectTimeout: timeoutMs,
      },
      maxPools: MAX_PEER_POOLS,
      clock,
    });
    this.peerConfig = {
      basePath,
      secret,
      clock,
      pools: this.pools,
      maxValueBytes: integer('HttpPool', 'maxValueBytes', o.maxValueBytes ?? httpPoolDefaults.maxValueBytes, 0, 1 << 30),
    };
    this.handlerConfig = { basePath, secret, groups: this.groups, clock, closed: () => this.isClosed };
    this.ring.add(this.self);
    this.handler = this.handler.bind(this);
  }

  /** setPeers replaces the peer set with `urls` (this node is always a member); the ring is rebuilt. */
  setPeers(...urls: string[]): void {
    const members = new Set(urls.map((u, i) => normalizePeerUrl('HttpPool.setPeers', `peer ${i}`, u)));
    members.add(this.self);
    this.ring.set(members);
    const next = new Map<string, HttpPeer>();
    for (const url of members) {
      if (url === this.self) continue;
      next.set(url, this.getters.get(url) ?? new HttpPeer(url, this.peerConfig));
    }
    for (const [url, peer] of this.getters) if (!next.has(url)) void peer.close();
    this.getters = next;
    this.others = [...next.values()];
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
    m.closed.then(() => this.memberships.delete(m), () => this.memberships.delete(m));
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
