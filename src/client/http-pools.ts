/**
 * HttpPools keeps one undici keep-alive `Pool` per instance origin (`http://host:port`), so that
 * `ResilientClient.fetch` reuses connections to each instance instead of opening one per request.
 * The map is bounded: past `maxPools` the least recently used pool is closed gracefully, and
 * `retain(origins)` closes the pools of instances that left the registry.
 */
import { Pool } from 'undici';
import { ClosedError } from '../core/errors.js';
import { integer, positive } from '../core/validate.js';

/** HttpPoolsOptions configures the per-instance connection pools. */
export interface HttpPoolsOptions {
  /** Most connections per instance. Defaults to 64. */
  connectionsPerInstance?: number;
  /** Idle keep-alive sockets are closed after this many milliseconds. Defaults to 4 000 (undici's). */
  keepAliveTimeoutMs?: number;
  /** Most pools kept open at once; the least recently used is closed beyond it. Defaults to 1 024. */
  maxPools?: number;
  /** Timeout for establishing a connection, in milliseconds. Defaults to 10 000. */
  connectTimeoutMs?: number;
}

/** Defaults for HttpPoolsOptions. */
export const httpPoolsDefaults = Object.freeze({
  connectionsPerInstance: 64,
  keepAliveTimeoutMs: 4_000,
  maxPools: 1_024,
  connectTimeoutMs: 10_000,
});

/** HttpPools maps an origin to its keep-alive pool, creating pools on first use. */
export class HttpPools {
  private readonly pools = new Map<string, Pool>();
  private readonly poolOptions: Pool.Options;
  private readonly maxPools: number;
  private closing: Promise<void> | undefined;

  constructor(options: HttpPoolsOptions = {}) {
    const connections = integer('HttpPools', 'connectionsPerInstance', options.connectionsPerInstance ?? httpPoolsDefaults.connectionsPerInstance, 1, 65_536);
    const keepAliveTimeout = positive('HttpPools', 'keepAliveTimeoutMs', options.keepAliveTimeoutMs ?? httpPoolsDefaults.keepAliveTimeoutMs);
    const connectTimeout = positive('HttpPools', 'connectTimeoutMs', options.connectTimeoutMs ?? httpPoolsDefaults.connectTimeoutMs);
    this.maxPools = integer('HttpPools', 'maxPools', options.maxPools ?? httpPoolsDefaults.maxPools, 1, 1 << 20);
    this.poolOptions = { connections, keepAliveTimeout, connectTimeout };
  }

  /** size is the number of open pools. */
  get size(): number {
    return this.pools.size;
  }

  /** get returns the pool for `origin` (e.g. `http://127.0.0.1:8080`), opening it on first use. */
  get(origin: string): Pool {
    if (this.closing !== undefined) throw new ClosedError('HttpPools is closed');
    let pool = this.pools.get(origin);
    if (pool !== undefined) {
      // Move to the back: Map order is our recency order (least recently used first).
      if (this.pools.size > 1) {
        this.pools.delete(origin);
        this.pools.set(origin, pool);
      }
      return pool;
    }
    pool = new Pool(origin, this.poolOptions);
    this.pools.set(origin, pool);
    if (this.pools.size > this.maxPools) {
      const [oldest, evicted] = this.pools.entries().next().value as [string, Pool];
      this.pools.delete(oldest);
      void closeGracefully(evicted);
    }
    return pool;
  }

  /** has tells whether a pool for `origin` is open. */
  has(origin: string): boolean {
    return this.pools.has(origin);
  }

  /**
   * retain closes the pools whose origin is not in `live` (instances that left), letting requests in
   * flight on them finish first.
   */
  retain(live: ReadonlySet<string>): void {
    for (const [origin, pool] of this.pools) {
      if (!live.has(origin)) {
        this.pools.delete(origin);
        void closeGracefully(pool);
      }
    }
  }

  /**
   * close closes every pool, letting requests in flight finish for up to 1 s (then destroying what is
   * left, e.g. a response body nobody reads); later `get` calls throw ClosedError.
   */
  close(): Promise<void> {
    if (this.closing === undefined) {
      const all = [...this.pools.values()];
      this.pools.clear();
      this.closing = Promise.all(all.map(closeGracefully)).then(ignore);
    }
    return this.closing;
  }
}

/** Grace time for requests in flight when a pool is closed, before its sockets are destroyed. */
const CLOSE_GRACE_MS = 1_000;

/** closeGracefully closes `pool`, destroying it if requests are still open after CLOSE_GRACE_MS. */
function closeGracefully(pool: Pool): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const grace = new Promise<'late'>((resolve) => {
    timer = setTimeout(resolve, CLOSE_GRACE_MS, 'late');
    timer.unref();
  });
  return Promise.race([pool.close().then(() => 'done' as const), grace]).then(
    (outcome) => {
      clearTimeout(timer);
      if (outcome === 'late') return pool.destroy().catch(ignore);
    },
    () => {
      clearTimeout(timer);
      return pool.destroy().catch(ignore);
    },
  );
}

function ignore(): void {}
