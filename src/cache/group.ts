/**
 * Group is a groupcache group: a named cache with a getter that loads a key from its origin, spread
 * over peers so that each key has one owner (golang/groupcache `Group`; docs/architecture.md "A cache read").
 *
 * get(key): main cache, then hot cache; else one load per key per node (singleflight): the ring's owner
 * is asked over the pool, or, when this node owns the key or the owner fails to answer, the getter runs
 * here and the value goes into the main cache. A sample of peer answers goes into the hot cache.
 *
 * Beyond groupcache: TTLs (per group or per entry, jittered ±10 % against avalanches), cached misses
 * (`negativeTtlMs`, against penetration), `remove(key)` everywhere (a load in flight cannot put a
 * removed value back), and a remote "not found" is an answer rather than a reason to load locally.
 *
 * `getWithInfo(key)` answers where the value came from (`main`, `hot`, `peer`, `getter`, `stale`) and
 * its age (a hit's from the time the main or hot cache keeps beside each entry). With `staleBytes` the
 * group keeps the last good value of each key it loaded (from its getter or a peer) with the time it
 * was loaded, in an LruCache of its own: when a load fails (the getter's error or timeout, the owner's
 * getter failing) a value no older than `staleMaxAgeMs` answers instead, marked `stale` (stale on
 * error). "Not found" and a removed key are never answered stale. The stale store's strings are those
 * of the main and hot caches, so a key held in both costs its bytes once in memory (each budget counts
 * them).
 */
import { systemClock, type Clock } from '../core/clock.js';
import { cacheLoadChannel } from '../core/diagnostics.js';
import { AbortedError, NotFoundError, PeerError, withoutStack } from '../core/errors.js';
import { SingleFlight } from '../core/singleflight.js';
import { clockOption, finite, fn, integer, options as checkOptions, type OptionKeys } from '../core/validate.js';
import { ByteView, toBinary } from './byte-view.js';
import { keyProblem } from './key.js';
import { LruCache } from '../core/lru-cache.js';
import { noPeers, type GetResponse, type GroupServer, type OwnerPick, type PeerGetter, type PeerMode, type PeerPicker } from './peers.js';
import { callGetter, type Getter } from './getter.js';
import type { MetricsDescription } from '../core/metrics-description.js';

/** The keys of GroupOptions, all of them: any other is refused (see `options`). */
const GROUP_KEYS = {
  name: true,
  cacheBytes: true,
  getter: true,
  peers: true,
  ttlMs: true,
  negativeTtlMs: true,
  ttlJitter: true,
  hotCacheRatio: true,
  hotCacheSample: true,
  maxValueBytes: true,
  timeoutMs: true,
  clock: true,
  random: true,
  staleBytes: true,
  staleMaxAgeMs: true,
} as const satisfies OptionKeys<GroupOptions>;

export type { Getter, GetterResult } from './getter.js';

/** GroupOptions configures a Group. */
export interface GroupOptions {
  /** The group's name, the same on every node: 1–255 characters. Required. */
  name: string;
  /** Bytes for cached entries (keys + values), main and hot cache together. Required. */
  cacheBytes: number;
  /** Loads a key from the origin; throws `NotFoundError` when there is no such key. Required. */
  getter: Getter;
  /** Who owns which key, and how to reach them (an `HttpPool`). Defaults to `noPeers` (one node). */
  peers?: PeerPicker;
  /** How long a loaded entry lives, jittered by ±`ttlJitter`; 0 keeps it until evicted. Defaults to 0. */
  ttlMs?: number;
  /** How long a "not found" is remembered, jittered by ±`ttlJitter`; 0 never caches misses. Defaults to 0. */
  negativeTtlMs?: number;
  /** The share, in [0, 1), by which each TTL is spread at random so entries loaded together do not expire together (cache avalanche). Defaults to 0.1 (±10 %). */
  ttlJitter?: number;
  /** The share of `cacheBytes` for the hot cache (popular keys owned elsewhere). Defaults to 0.125 (groupcache). */
  hotCacheRatio?: number;
  /** The share of peer answers copied into the hot cache. Defaults to 0.1 (groupcache: 1 in 10). */
  hotCacheSample?: number;
  /** Values larger than this are returned but not cached. Defaults to 1 048 576 (1 MiB). */
  maxValueBytes?: number;
  /** How long one getter call may run before its callers get `TimeoutError`. Defaults to 10 000. */
  timeoutMs?: number;
  /** The clock for TTLs and the getter's timeout. Defaults to `systemClock`. */
  clock?: Clock;
  /** Random numbers in [0, 1) for TTL jitter and hot-cache sampling. Defaults to `Math.random`. */
  random?: () => number;
  /**
   * Bytes for the last good value of each loaded key and when it was loaded: it answers a load that
   * fails (stale on error); 0 keeps none. Defaults to 0.
   */
  staleBytes?: number;
  /** The oldest last good value that may answer a failed load, in ms. Defaults to 3 600 000 (1 h). */
  staleMaxAgeMs?: number;
}

/** Defaults for GroupOptions. */
export const groupDefaults = Object.freeze({
  ttlMs: 0,
  negativeTtlMs: 0,
  ttlJitter: 0.1,
  hotCacheRatio: 1 / 8, // groupcache: the hot cache may grow to 1/8 of the main cache
  hotCacheSample: 0.1, // groupcache: populate the hot cache for 1 in 10 peer loads
  maxValueBytes: 1 << 20,
  timeoutMs: 10_000,
  staleBytes: 0,
  staleMaxAgeMs: 3_600_000,
});

/** AnswerSource says where `getWithInfo` found a value: this node's main or hot cache, a peer, this node's getter, or the last good value after a failed load. */
export type AnswerSource = 'main' | 'hot' | 'peer' | 'getter' | 'stale';

/** GroupAnswer is a value with where it came from and how old it is (`Group.getWithInfo`). */
export interface GroupAnswer {
  value: ByteView;
  source: AnswerSource;
  /**
   * Milliseconds since this node loaded the value (from its getter or a peer): 0 for `getter` and
   * `peer`; for a hit (`main`, `hot`) since the value was cached; for `stale` since the last good value
   * was loaded. Undefined only when a load that found the value cached lost it before answering.
   */
  ageMs: number | undefined;
}

/** GroupStats are the group's counters since it was made (groupcache `Stats`). */
export interface GroupStats {
  /** Calls to `get`. */
  gets: number;
  /** `get`s answered from the main or hot cache. */
  cacheHits: number;
  /** Values (or not-founds) that a peer answered. */
  peerLoads: number;
  /** Peer requests that failed (then loaded locally, unless the owner's getter failed). */
  peerErrors: number;
  /** `get`s that missed the caches (before deduplication). */
  loads: number;
  /** Loads after singleflight: at most one per key in flight. */
  loadsDeduped: number;
  /** Getter calls on this node. */
  localLoads: number;
  /** Getter calls that failed (not counting "not found"). */
  localLoadErrs: number;
  /** Requests from peers this node served. */
  serverRequests: number;
  /** Entries evicted from the main and hot caches to make room (or expired). */
  evictions: number;
  /** Values this node loaded as a key's first owner and handed on to its other owners (replicated ownership). */
  replications: number;
  /** Failed loads answered with the key's last good value (`staleBytes`). */
  staleAnswers: number;
}

/** GetOptions are per-call options of `get` and `remove`. */
export interface GetOptions {
  /** Ends this caller's wait (a shared load goes on while others wait for it). */
  signal?: AbortSignal;
}

/** Loaded is a load's outcome: the value (null for "not found"), its expiry on the group's clock, and where it came from. */
interface Loaded {
  value: string | null;
  expiresAt: number;
  source: AnswerSource;
}

/** Held is a last good value and when it was loaded, on the group's clock (stale on error). */
interface Held {
  value: string;
  at: number;
}

/** LoadToken marks the loads of one key in flight; `remove` sets `removed` so that they store nothing. */
interface LoadToken {
  removed: boolean;
  refs: number;
}

const NAME = /^[A-Za-z0-9._:-]{1,255}$/;

/** Group is a distributed, read-through cache of immutable values. */
export class Group implements GroupServer {
  /** The group's name. */
  readonly name: string;
  /** How long one getter call may run, in ms (peers asking this node wait a little longer). */
  readonly timeoutMs: number;
  private readonly getter: Getter;
  private readonly peers: PeerPicker;
  private readonly ttlMs: number;
  private readonly ttlJitter: number;
  private readonly negativeTtlMs: number;
  private readonly hotCacheSample: number;
  private readonly maxValueBytes: number;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly main: LruCache<string | null>;
  private readonly hot: LruCache<string | null>;
  private readonly stale: LruCache<Held> | undefined;
  private readonly staleMaxAgeMs: number;
  /** Loads of this node on behalf of its callers (may go to a peer). */
  private readonly flight = new SingleFlight<string, Loaded>({ timeoutMs: 0 });
  /** Loads of keys this node co-owns (replicated ownership): ask a co-owner, else the getter. */
  private readonly ownerFlight = new SingleFlight<string, Loaded>({ timeoutMs: 0 });
  /** Getter calls; shared by this node's callers and peers' requests, so one per key per node. */
  private readonly localFlight: SingleFlight<string, Loaded>;
  private readonly loading = new Map<string, LoadToken>();
  private unregister: (() => void) | undefined;
  private readonly counters: GroupStats = {
    gets: 0,
    cacheHits: 0,
    peerLoads: 0,
    peerErrors: 0,
    loads: 0,
    loadsDeduped: 0,
    localLoads: 0,
    localLoadErrs: 0,
    serverRequests: 0,
    evictions: 0,
    replications: 0,
    staleAnswers: 0,
  };

  constructor(options: GroupOptions) {
    const o = checkOptions('Group', options, GROUP_KEYS);
    if (typeof o.name !== 'string' || !NAME.test(o.name)) {
      throw new TypeError(`Group: name must be 1–255 characters of [A-Za-z0-9._:-], got ${JSON.stringify(o.name)}`);
    }
    this.name = o.name;
    const cacheBytes = integer('Group', 'cacheBytes', o.cacheBytes, 0);
    this.getter = fn('Group', 'getter', o.getter);
    this.peers = o.peers ?? noPeers;
    if (this.peers === null || typeof this.peers !== 'object' || typeof this.peers.pickPeer !== 'function' || typeof this.peers.peers !== 'function') {
      throw new TypeError('Group: peers must be a PeerPicker (pickPeer, peers), e.g. an HttpPool');
    }
    this.ttlMs = finite('Group', 'ttlMs', o.ttlMs ?? groupDefaults.ttlMs, 0);
    this.negativeTtlMs = finite('Group', 'negativeTtlMs', o.negativeTtlMs ?? groupDefaults.negativeTtlMs, 0);
    this.ttlJitter = finite('Group', 'ttlJitter', o.ttlJitter ?? groupDefaults.ttlJitter, 0, 0.99);
    const hotRatio = finite('Group', 'hotCacheRatio', o.hotCacheRatio ?? groupDefaults.hotCacheRatio, 0, 0.9);
    this.hotCacheSample = finite('Group', 'hotCacheSample', o.hotCacheSample ?? groupDefaults.hotCacheSample, 0, 1);
    this.maxValueBytes = integer('Group', 'maxValueBytes', o.maxValueBytes ?? groupDefaults.maxValueBytes, 0);
    const timeoutMs = integer('Group', 'timeoutMs', o.timeoutMs ?? groupDefaults.timeoutMs, 1);
    this.timeoutMs = timeoutMs;
    this.clock = clockOption('Group', o.clock, systemClock);
    this.localFlight = new SingleFlight({ timeoutMs, clock: this.clock });
    this.random = o.random === undefined ? Math.random : fn('Group', 'random', o.random);
    const hotBytes = Math.floor(cacheBytes * hotRatio);
    const onEvict = () => void this.counters.evictions++;
    // Each entry keeps when it was cached, which a hit answers as its age (`GroupAnswer.ageMs`).
    this.main = new LruCache({ maxBytes: cacheBytes - hotBytes, onEvict, clock: this.clock, trackAddedAt: true });
    this.hot = new LruCache({ maxBytes: hotBytes, onEvict, clock: this.clock, trackAddedAt: true });
    const staleBytes = integer('Group', 'staleBytes', o.staleBytes ?? groupDefaults.staleBytes, 0);
    this.staleMaxAgeMs = finite('Group', 'staleMaxAgeMs', o.staleMaxAgeMs ?? groupDefaults.staleMaxAgeMs, 0);
    this.stale = staleBytes > 0 ? new LruCache<Held>({ maxBytes: staleBytes, sizeOf: heldSize, clock: this.clock }) : undefined;
    this.unregister = this.peers.register?.(this);
  }

  /**
   * get answers the value of `key`: from cache, from the owning peer, or from the getter. Rejects
   * `TypeError` for a bad key, `NotFoundError` when the key does not exist, `LoadError` / `TimeoutError`
   * when the getter failed, `AbortedError` when `signal` aborted this caller's wait.
   */
  get(key: string, options?: GetOptions): Promise<ByteView> {
    if (typeof key !== 'string' || key.length === 0 || key.length > 1024) return Promise.reject(new TypeError(`Group ${this.name}: ${keyProblem(key)}`));
    this.counters.gets++;
    let v = this.main.get(key);
    if (v === undefined) v = this.hot.get(key);
    if (v !== undefined) {
      this.counters.cacheHits++;
      return v === null ? Promise.reject(this.notFound(key)) : Promise.resolve(new ByteView(v));
    }
    const problem = keyProblem(key);
    if (problem !== undefined) return Promise.reject(new TypeError(`Group ${this.name}: ${problem}`));
    this.counters.loads++;
    return this.load(key, options?.signal).then((r) => new ByteView(this.valueOf(key, r.value)));
  }

  /**
   * getWithInfo answers what `get` answers, with where the value came from and its age (`GroupAnswer`).
   * Rejects as `get` does.
   */
  getWithInfo(key: string, options?: GetOptions): Promise<GroupAnswer> {
    const held = this.getCached(key);
    if (held !== undefined) return Promise.resolve(held);
    if (typeof key !== 'string' || key.length === 0 || key.length > 1024) return Promise.reject(new TypeError(`Group ${this.name}: ${keyProblem(key)}`));
    this.counters.gets++;
    // Not held: a "not found" remembered by either cache, or a miss.
    if (this.main.get(key) === null || this.hot.get(key) === null) {
      this.counters.cacheHits++;
      return Promise.reject(this.notFound(key));
    }
    const problem = keyProblem(key);
    if (problem !== undefined) return Promise.reject(new TypeError(`Group ${this.name}: ${problem}`));
    this.counters.loads++;
    return this.load(key, options?.signal).then((r) => this.answerOf(key, r));
  }

  /**
   * getCached answers what `getWithInfo` answers for a value this node's main or hot cache holds, and
   * counts it as that would (a get and a hit); undefined for anything else — a miss, a remembered
   * "not found", a bad key — and then it counts nothing: `getWithInfo` answers those. Synchronous: a
   * server's hit path answers in the request's own tick, with no promise or microtask per hit.
   */
  getCached(key: string): GroupAnswer | undefined {
    if (typeof key !== 'string' || key.length === 0 || key.length > 1024) return undefined;
    let source: AnswerSource = 'main';
    let cache = this.main;
    let v = cache.get(key);
    if (v === undefined) {
      source = 'hot';
      cache = this.hot;
      v = cache.get(key);
    }
    if (v === undefined || v === null) return undefined;
    this.counters.gets++;
    this.counters.cacheHits++;
    // The slot the get just found is found again on the lines that lookup brought in: no stale-store probe.
    return { value: new ByteView(v), source, ageMs: this.clock.now() - cache.addedAt(key)! };
  }

  /**
   * remove deletes `key` on this node and asks every peer to delete it (the owner's main cache, the
   * others' hot caches). Loads of `key` already in flight store nothing. Rejects `PeerError` when some
   * peer could not be reached (the key is gone from every node that answered).
   */
  async remove(key: string, options?: GetOptions): Promise<void> {
    const problem = keyProblem(key);
    if (problem !== undefined) throw new TypeError(`Group ${this.name}: ${problem}`);
    this.serveRemove(key);
    const peers = this.peers.peers();
    if (peers.length === 0) return;
    const results = await Promise.allSettled(peers.map((p) => p.remove(this.name, key, options?.signal)));
    const failed = results.flatMap((r, i) => (r.status === 'rejected' ? [`${peers[i]!.url}: ${String((r.reason as Error)?.message ?? r.reason)}`] : []));
    if (failed.length > 0) {
      throw new PeerError(`remove(${JSON.stringify(key)}) did not reach ${failed.length} of ${peers.length} peers: ${failed.join('; ')}`, {
        cause: new AggregateError(results.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []))),
      });
    }
  }

  /**
   * load finds a key missing from both caches: from its owner, or from the getter when this node owns
   * it (or the owner cannot answer); a failed load answers the last good value when there is one.
   */
  private load(key: string, signal: AbortSignal | undefined): Promise<Loaded> {
    let loading: Promise<Loaded>;
    const owners = this.peers.pickOwners?.(key);
    if (owners !== undefined) {
      loading = owners.self ? this.loadAsOwner(key, owners, signal) : this.flight.do(key, (s) => this.loadFromPeer(key, owners.peers, s), { signal });
    } else {
      const peer = this.peers.pickPeer(key);
      // Keys this node owns go straight to the getter's singleflight: one shared load, one AbortController.
      loading = peer === undefined ? this.loadLocally(key, signal) : this.flight.do(key, (s) => this.loadFromPeer(key, [peer], s), { signal });
    }
    return this.stale === undefined ? loading : loading.catch((err: unknown) => this.staleOr(key, err, signal));
  }

  /** staleOr answers the key's last good value for a failed load, if it may (see `isLoadFailure`), else rethrows. */
  private staleOr(key: string, err: unknown, signal: AbortSignal | undefined): Loaded {
    if (signal?.aborted !== true && isLoadFailure(err)) {
      const held = this.stale?.get(key);
      if (held !== undefined && this.clock.now() - held.at <= this.staleMaxAgeMs) {
        this.counters.staleAnswers++;
        return { value: held.value, expiresAt: held.at, source: 'stale' };
      }
    }
    throw err;
  }

  private answerOf(key: string, r: Loaded): GroupAnswer {
    const value = new ByteView(this.valueOf(key, r.value));
    if (r.source === 'getter' || r.source === 'peer') return { value, source: r.source, ageMs: 0 };
    // A stale answer carries its load time in expiresAt (see staleOr).
    if (r.source === 'stale') return { value, source: 'stale', ageMs: this.clock.now() - r.expiresAt };
    const at = (r.source === 'hot' ? this.hot : this.main).addedAt(key);
    return { value, source: r.source, ageMs: at === undefined ? undefined : this.clock.now() - at };
  }

  /** keep records `value` as the key's last good value (null: the key is gone, so nothing stale may answer for it). */
  private keep(key: string, value: string | null): void {
    if (this.stale === undefined) return;
    if (value === null) this.stale.remove(key);
    else this.stale.add(key, { value, at: this.clock.now() });
  }

  /**
   * describeMetrics answers the group's families (`cache_…`: gets, hits, peer and local loads, errors,
   * evictions, and bytes and items by cache), read from its stats at scrape time.
   */
  describeMetrics(): MetricsDescription {
    const totals: [string, keyof GroupStats, string][] = [
      ['cache_gets_total', 'gets', 'Calls to a cache Group’s get.'],
      ['cache_hits_total', 'cacheHits', 'Gets answered from the main or hot cache.'],
      ['cache_peer_loads_total', 'peerLoads', 'Values (or not-founds) a peer answered.'],
      ['cache_peer_errors_total', 'peerErrors', 'Peer requests that failed.'],
      ['cache_loads_total', 'loads', 'Gets that missed the caches (before deduplication).'],
      ['cache_loads_deduped_total', 'loadsDeduped', 'Loads after singleflight deduplication.'],
      ['cache_local_loads_total', 'localLoads', 'Getter calls on this node.'],
      ['cache_local_load_errors_total', 'localLoadErrs', 'Getter calls that failed (not counting not-found).'],
      ['cache_server_requests_total', 'serverRequests', 'Requests from peers this node served.'],
      ['cache_evictions_total', 'evictions', 'Entries evicted from the main and hot caches (or expired).'],
    ];
    return {
      kind: 'Group',
      families: [
        ...totals.map(([name, , help]) => ({ name, type: 'counter' as const, help, labelNames: [] })),
        { name: 'cache_bytes', type: 'gauge', help: 'Bytes held by a cache Group, by cache: main or hot.', labelNames: ['cache'] },
        { name: 'cache_items', type: 'gauge', help: 'Entries held by a cache Group, by cache: main or hot.', labelNames: ['cache'] },
      ],
      collect: (emit) => {
        const s = this.stats();
        for (const [name, field] of totals) emit(name, {}, s[field] as number);
        const cs = this.cacheStats();
        emit('cache_bytes', { cache: 'main' }, cs.main.bytes);
        emit('cache_bytes', { cache: 'hot' }, cs.hot.bytes);
        emit('cache_items', { cache: 'main' }, cs.main.length);
        emit('cache_items', { cache: 'hot' }, cs.hot.length);
      },
      snapshot: () => {
        const s = this.stats();
        return { ...s, hitRatio: s.gets > 0 ? s.cacheHits / s.gets : 0, caches: this.cacheStats() };
      },
    };
  }

  /** stats returns a snapshot of the counters. */
  stats(): GroupStats {
    return { ...this.counters };
  }

  /** cacheStats reports the main, hot and stale caches' entries and bytes. */
  cacheStats(): { main: { length: number; bytes: number }; hot: { length: number; bytes: number }; stale: { length: number; bytes: number } } {
    return {
      main: { length: this.main.length, bytes: this.main.bytes },
      hot: { length: this.hot.length, bytes: this.hot.bytes },
      stale: { length: this.stale?.length ?? 0, bytes: this.stale?.bytes ?? 0 },
    };
  }

  /**
   * close unregisters the group from its pool's handler (peers asking for it get 404 from then on);
   * its caches stay readable. Idempotent.
   */
  close(): Promise<void> {
    this.unregister?.();
    this.unregister = undefined;
    return Promise.resolve();
  }

  /** Symbol.asyncDispose closes the group (`await using group = new Group(…)`). */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * serveGet answers a peer's request from this node: never forwarded to the owner, so peers that
   * disagree about membership cannot deadlock. With replicated ownership a `normal` request for a key
   * this node co-owns may ask one co-owner, with a `local` or `peek` request, which goes no further.
   */
  async serveGet(key: string, signal?: AbortSignal, mode: PeerMode = 'normal'): Promise<GetResponse> {
    this.counters.serverRequests++;
    const problem = keyProblem(key);
    if (problem !== undefined) throw new TypeError(`Group ${this.name}: ${problem}`);
    const v = this.main.get(key);
    if (v !== undefined) return this.response(v, this.main.expiresAt(key) ?? 0);
    const h = this.hot.get(key);
    if (h !== undefined) return this.response(h, this.hot.expiresAt(key) ?? 0);
    if (mode === 'peek') return { value: '', ttlMs: 0, notFound: false, notHeld: true };
    const owners = mode === 'normal' ? this.peers.pickOwners?.(key) : undefined;
    const loaded = owners?.self === true ? await this.loadAsOwner(key, owners, signal) : await this.loadLocally(key, signal);
    return this.response(loaded.value, loaded.expiresAt);
  }

  /** serveRemove deletes `key` from this node's caches (and its last good value); loads of it in flight will store nothing. */
  serveRemove(key: string): boolean {
    const removed = this.main.remove(key) || this.hot.remove(key);
    this.hot.remove(key);
    this.stale?.remove(key);
    const token = this.loading.get(key);
    if (token !== undefined) {
      token.removed = true;
      this.loading.delete(key);
    }
    this.flight.forget(key);
    this.ownerFlight.forget(key);
    this.localFlight.forget(key);
    return removed;
  }

  private response(value: string | null, expiresAt: number): GetResponse {
    const ttlMs = expiresAt === 0 ? 0 : Math.max(1, expiresAt - this.clock.now());
    return { value: value ?? '', ttlMs, notFound: value === null };
  }

  /**
   * loadFromPeer runs once per key in flight on this node: ask the owner (with replicated ownership,
   * each owner in turn until one answers), skipping owners that could not be reached lately; if none
   * can answer, load here.
   */
  private async loadFromPeer(key: string, owners: readonly PeerGetter[], signal: AbortSignal): Promise<Loaded> {
    // A flight that just finished may have filled the cache (groupcache checks again here too).
    const main = this.main.get(key);
    if (main !== undefined) return { value: this.valueOf(key, main), expiresAt: 0, source: 'main' };
    const hot = this.hot.get(key);
    if (hot !== undefined) return { value: this.valueOf(key, hot), expiresAt: 0, source: 'hot' };
    this.counters.loadsDeduped++;
    const token = this.begin(key);
    try {
      for (const peer of owners) {
        // A peer that could not be reached lately is not waited on: one request at a time tries it again (HttpPeer).
        if (peer.healthy?.() === false) continue;
        try {
          const r = await (cacheLoadChannel.hasSubscribers
            ? cacheLoadChannel.tracePromise(() => peer.get(this.name, key, signal), { group: this.name, key, source: 'peer', peer: peer.url })
            : peer.get(this.name, key, signal));
          this.counters.peerLoads++;
          if (r.notFound) {
            if (!token.removed) this.keep(key, null);
            throw this.notFound(key);
          }
          const expiresAt = r.ttlMs > 0 ? this.clock.now() + r.ttlMs : 0;
          if (!token.removed) {
            if (r.value.length <= this.maxValueBytes && this.hotCacheSample > 0 && this.random() < this.hotCacheSample) this.hot.add(key, r.value, expiresAt);
            this.keep(key, r.value);
          }
          return { value: r.value, expiresAt, source: 'peer' };
        } catch (err) {
          if (err instanceof NotFoundError) throw err;
          this.counters.peerErrors++;
          // The owner answered that its getter failed: loading here would only hit the origin twice.
          if (err instanceof PeerError && (err.status === 502 || err.status === 504)) throw err;
          if (signal.aborted) throw err;
        }
      }
    } finally {
      this.end(key, token);
    }
    const loaded = await this.loadLocally(key, signal);
    this.valueOf(key, loaded.value);
    return loaded;
  }

  /**
   * loadAsOwner loads a key this node co-owns (replicated ownership), once per key in flight, so that
   * every owner ends up holding it and only one getter runs per key in the cluster:
   * - the first healthy owner peeks into the other owners' caches (a node that just joined finds what
   *   its co-owner holds); when none holds the key it runs the getter, then hands the value on by
   *   asking each other healthy owner for the key (in the background: they copy it from here);
   * - another owner asks the first healthy one, which answers from its caches or its getter (`local`).
   * The value goes into the main cache. When no co-owner answers, the getter runs here.
   */
  private loadAsOwner(key: string, pick: OwnerPick, signal: AbortSignal | undefined): Promise<Loaded> {
    return this.ownerFlight.do(
      key,
      async (flightSignal) => {
        const hit = this.main.get(key);
        if (hit !== undefined) return { value: hit, expiresAt: this.main.expiresAt(key) ?? 0, source: 'main' };
        const mode: PeerMode = pick.primary ? 'peek' : 'local';
        const asks = pick.primary ? pick.peers : pick.peers.slice(0, 1);
        const token = this.begin(key);
        try {
          for (const peer of asks) {
            if (peer.healthy?.() === false) break; // healthy owners come first: the rest are down
            let r: GetResponse;
            try {
              r = await peer.get(this.name, key, flightSignal, mode);
            } catch (err) {
              this.counters.peerErrors++;
              if (flightSignal.aborted) throw err;
              if (!pick.primary && err instanceof PeerError && (err.status === 502 || err.status === 504)) throw err;
              continue;
            }
            if (r.notHeld === true) continue;
            this.counters.peerLoads++;
            const expiresAt = r.ttlMs > 0 ? this.clock.now() + r.ttlMs : 0;
            if (r.notFound) {
              if (!token.removed) this.keep(key, null);
              if (expiresAt !== 0 && !token.removed) this.main.add(key, null, expiresAt);
              return { value: null, expiresAt, source: 'peer' };
            }
            if (!token.removed) {
              if (r.value.length <= this.maxValueBytes) this.main.add(key, r.value, expiresAt);
              this.keep(key, r.value);
            }
            return { value: r.value, expiresAt, source: 'peer' };
          }
        } finally {
          this.end(key, token);
        }
        const loaded = await this.loadLocally(key, flightSignal);
        // Hand the value on only when it was cached here: the co-owners copy it from this node's cache.
        if (pick.primary && this.main.get(key) !== undefined) {
          for (const peer of pick.peers) {
            if (peer.healthy?.() === false) break;
            peer.get(this.name, key).then(
              () => void this.counters.replications++,
              () => void this.counters.peerErrors++,
            );
          }
        }
        return loaded;
      },
      { signal },
    );
  }

  /**
   * loadLocally calls the getter, once per key in flight on this node (this node's callers and peers'
   * requests share it), and caches what it answers. The singleflight's timeout bounds the getter.
   */
  private loadLocally(key: string, signal: AbortSignal | undefined): Promise<Loaded> {
    return this.localFlight.do(
      key,
      async (flightSignal) => {
        const hit = this.main.get(key);
        if (hit !== undefined) return { value: hit, expiresAt: this.main.expiresAt(key) ?? 0, source: 'main' };
        this.counters.loadsDeduped++;
        const token = this.begin(key);
        try {
          this.counters.localLoads++;
          let result;
          try {
            result = await (cacheLoadChannel.hasSubscribers
              ? cacheLoadChannel.tracePromise(() => callGetter(this.getter, key, flightSignal, this.name), { group: this.name, key, source: 'local' })
              : callGetter(this.getter, key, flightSignal, this.name));
          } catch (err) {
            if (!(err instanceof NotFoundError)) {
              this.counters.localLoadErrs++;
              throw err;
            }
            const expiresAt = this.negativeTtlMs > 0 ? this.expiry(this.negativeTtlMs) : 0;
            if (!token.removed) this.keep(key, null);
            if (expiresAt !== 0 && !token.removed) this.main.add(key, null, expiresAt);
            return { value: null, expiresAt, source: 'getter' };
          }
          const ttlMs = result.ttlMs ?? this.ttlMs;
          const value = toBinary(result.value);
          const expiresAt = ttlMs > 0 ? this.expiry(ttlMs) : 0;
          if (!token.removed) {
            if (value.length <= this.maxValueBytes) this.main.add(key, value, expiresAt);
            this.keep(key, value);
          }
          return { value, expiresAt, source: 'getter' };
        } finally {
          this.end(key, token);
        }
      },
      { signal },
    );
  }

  private expiry(ttlMs: number): number {
    return this.clock.now() + ttlMs * (1 + this.ttlJitter * (2 * this.random() - 1));
  }

  private valueOf(key: string, v: string | null): string {
    if (v === null) throw this.notFound(key);
    return v;
  }

  private notFound(key: string): NotFoundError {
    return withoutStack(() => new NotFoundError(`Group ${this.name}: key ${JSON.stringify(key.slice(0, 64))} not found`));
  }

  private begin(key: string): LoadToken {
    let token = this.loading.get(key);
    if (token === undefined) this.loading.set(key, (token = { removed: false, refs: 0 }));
    token.refs++;
    return token;
  }

  private end(key: string, token: LoadToken): void {
    if (--token.refs === 0 && this.loading.get(key) === token) this.loading.delete(key);
  }
}

/** heldSize counts a last good value's key, value and the record around them. */
function heldSize(key: string, held: Held): number {
  return key.length + held.value.length + 32;
}

/** isLoadFailure tells the errors a last good value may answer for: anything but "not found", a bad key and the caller leaving. */
function isLoadFailure(err: unknown): boolean {
  return !(err instanceof TypeError) && !(err instanceof NotFoundError) && !(err instanceof AbortedError);
}
