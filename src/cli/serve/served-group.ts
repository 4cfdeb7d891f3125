/**
 * ServedGroup is one group of a `bulwark serve` node: the cache `Group`, plus what the client API says
 * about each answer — where it came from (`main`, `hot`, `peer`, `origin`, `stale`) and its age — and
 * the last good values kept for answering when the origin fails (stale on error).
 *
 * Where an answer came from is found without changing the Group: a hit is counted synchronously inside
 * `Group.get` (its `cacheHits` counter moves before `get` returns); a load is told by the getter (origin)
 * or by a PeerPicker wrapped around the pool (peer), through a record per key in flight. A hit is `main`
 * when this node owns the key on the ring now, else `hot` (the hot cache holds only keys owned elsewhere).
 *
 * The stale store is an LruCache of the last value loaded per key (bounded by --stale-bytes) with the
 * time it was loaded: it answers the age of a value, and when a load fails (origin error, timeout,
 * breaker, limiter, the owner's getter failing) a value no older than --stale-max-age is answered with
 * source `stale`. The cached strings are shared with the Group's caches, so a key held in both costs
 * its bytes once in memory (the budget counts them in each).
 */
import { ByteView, Group, LruCache, type GetterResult, type HttpPool, type PeerGetter, type PeerPicker } from '../../cache/index.js';
import type { Clock } from '../../core/index.js';

/** Source says where an answer came from (the `x-bulwark-source` header). */
export type Source = 'main' | 'hot' | 'peer' | 'origin' | 'stale';

/** Answer is a value and what the client API says about it. */
export interface Answer {
  value: ByteView;
  source: Source;
  /** Milliseconds since this node loaded the value, when known. */
  ageMs: number | undefined;
}

interface Held {
  value: string;
  at: number;
}

interface Pending {
  waiters: number;
  source: Source | undefined;
}

/** ServedGroupOptions configures a ServedGroup. */
export interface ServedGroupOptions {
  name: string;
  cacheBytes: number;
  hotCacheBytes: number;
  ttlMs: number;
  negativeTtlMs: number;
  ttlJitter?: number;
  loadTimeoutMs: number;
  staleBytes: number;
  staleMaxAgeMs: number;
  pool: HttpPool;
  load: (key: string, signal: AbortSignal) => Promise<GetterResult>;
  clock: Clock;
}

/** ServedGroup wraps a Group for the client API. */
export class ServedGroup {
  readonly group: Group;
  private readonly pending = new Map<string, Pending>();
  private readonly stale: LruCache<Held> | undefined;
  private readonly staleMaxAgeMs: number;
  private readonly pool: HttpPool;
  private readonly clock: Clock;
  private staleAnswers = 0;

  constructor(o: ServedGroupOptions) {
    this.pool = o.pool;
    this.clock = o.clock;
    this.staleMaxAgeMs = o.staleMaxAgeMs;
    this.stale = o.staleBytes > 0 ? new LruCache<Held>({ maxBytes: o.staleBytes, sizeOf: (k, h) => k.length + h.value.length + 32, clock: o.clock }) : undefined;
    const total = o.cacheBytes + o.hotCacheBytes;
    this.group = new Group({
      name: o.name,
      cacheBytes: total,
      hotCacheRatio: o.hotCacheBytes / total,
      ttlMs: o.ttlMs,
      negativeTtlMs: o.negativeTtlMs,
      ...(o.ttlJitter === undefined ? {} : { ttlJitter: o.ttlJitter }),
      timeoutMs: o.loadTimeoutMs,
      clock: o.clock,
      peers: this.tracingPicker(o.pool),
      getter: async (key, { signal }) => {
        const r = await o.load(key, signal);
        const bytes = typeof r === 'string' || r instanceof Uint8Array ? r : r.value;
        this.mark(key, 'origin', this.stale === undefined ? undefined : ByteView.from(bytes).binary());
        return r;
      },
    });
  }

  /** get answers `key` with its source and age; rejects what `Group.get` rejects when no stale value can answer. */
  async get(key: string, signal: AbortSignal | undefined): Promise<Answer> {
    const hitsBefore = this.group.stats().cacheHits;
    const promise = this.group.get(key, signal === undefined ? undefined : { signal });
    if (this.group.stats().cacheHits !== hitsBefore) {
      const value = await promise;
      const held = this.stale?.get(key);
      return { value, source: this.pool.pickPeer(key) === undefined ? 'main' : 'hot', ageMs: held === undefined ? undefined : this.clock.now() - held.at };
    }
    let p = this.pending.get(key);
    if (p === undefined) this.pending.set(key, (p = { waiters: 0, source: undefined }));
    p.waiters++;
    try {
      const value = await promise;
      const source = p.source ?? (this.pool.pickPeer(key) === undefined ? 'main' : 'hot');
      const now = this.clock.now();
      if (source === 'peer') this.stale?.add(key, { value: value.binary(), at: now });
      const held = source === 'origin' ? undefined : this.stale?.get(key);
      return { value, source, ageMs: source === 'origin' ? 0 : held === undefined ? undefined : now - held.at };
    } catch (err) {
      const held = isLoadFailure(err) ? this.stale?.get(key) : undefined;
      if (held !== undefined) {
        const ageMs = this.clock.now() - held.at;
        if (ageMs <= this.staleMaxAgeMs) {
          this.staleAnswers++;
          return { value: new ByteView(held.value), source: 'stale', ageMs };
        }
      }
      throw err;
    } finally {
      if (--p.waiters === 0 && this.pending.get(key) === p) this.pending.delete(key);
    }
  }

  /** remove deletes `key` on every node (and from this node's stale store). */
  async remove(key: string): Promise<void> {
    this.stale?.remove(key);
    await this.group.remove(key);
  }

  /** stats answers the group's counters, its caches' sizes and the stale store's. */
  stats(): Record<string, unknown> {
    return {
      ...this.group.stats(),
      staleAnswers: this.staleAnswers,
      caches: this.group.cacheStats(),
      stale: this.stale === undefined ? { length: 0, bytes: 0 } : { length: this.stale.length, bytes: this.stale.bytes },
    };
  }

  /** mark records where a load in flight got its value; an origin load also keeps the value for stale answers. */
  private mark(key: string, source: Source, value?: string): void {
    const p = this.pending.get(key);
    if (p !== undefined) p.source = source;
    if (value !== undefined) this.stale?.add(key, { value, at: this.clock.now() });
  }

  /**
   * tracingPicker is the pool as the Group's PeerPicker, its peers wrapped to mark answers as `peer`.
   * Everything the Group asks of a pool goes through: a peer's `healthy()` (without it, the Group would
   * wait out the peer deadline for every key of a peer it cannot reach), the `mode` of a peer request,
   * and `pickOwners` (without it, `--owners` above 1 did nothing in `bulwark serve`).
   */
  private tracingPicker(pool: HttpPool): PeerPicker {
    const wrapped = new WeakMap<PeerGetter, PeerGetter>();
    const wrap = (peer: PeerGetter): PeerGetter => {
      let w = wrapped.get(peer);
      if (w === undefined) {
        w = {
          url: peer.url,
          get: async (group, key, signal, mode) => {
            const r = await peer.get(group, key, signal, mode);
            this.mark(key, 'peer');
            return r;
          },
          remove: (group, key, signal) => peer.remove(group, key, signal),
        };
        if (typeof peer.healthy === 'function') w.healthy = () => peer.healthy!();
        wrapped.set(peer, w);
      }
      return w;
    };
    return {
      pickPeer: (key) => {
        const p = pool.pickPeer(key);
        return p === undefined ? undefined : wrap(p);
      },
      pickOwners: (key) => {
        const o = pool.pickOwners(key);
        return o === undefined ? undefined : { self: o.self, primary: o.primary, peers: o.peers.map(wrap) };
      },
      peers: () => pool.peers(),
      register: (g) => pool.register(g),
    };
  }
}

/** isLoadFailure tells the errors a stale value may answer for: anything but "not found", a bad key and the caller leaving. */
function isLoadFailure(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return !(err instanceof TypeError) && code !== 'ERR_NOT_FOUND' && code !== 'ERR_ABORTED';
}
