/**
 * OriginPools is the one map of undici keep-alive pools by origin (`http://host:port`) that both the
 * client's `fetch` (one pool per instance) and the cache's `HttpPool` (one pool per peer) use, so that
 * connections to an address are reused instead of opened per request.
 *
 * - The map is bounded: past `maxPools` the least recently used pool is closed (Map order is the
 *   recency order: `get` moves an origin to the back).
 * - `retain(live)` and `delete(origin)` close the pools of origins that left (instances gone from the
 *   registry, peers gone from the ring).
 * - Closing a pool lets requests in flight finish for up to `closeGraceMs`, then destroys what is left
 *   (a response body nobody reads, say). That grace timer is set through the injected clock.
 *
 * Internal: not exported from the package. Each caller states its own pool options and defaults.
 */
import { Pool } from 'undici';
import { systemClock, type Clock, type TimerHandle } from '../core/clock.js';
import { ClosedError } from '../core/errors.js';
import { clockOption, finite, integer, options as checkOptions } from '../core/validate.js';

/** OriginPoolsOptions configures an OriginPools. */
export interface OriginPoolsOptions {
  /** What the map is for, in messages (`ClosedError: <owner> is closed`). Required. */
  owner: string;
  /** The undici options of every pool. Defaults to undici's. */
  pool?: Pool.Options;
  /** Most pools kept open at once; the least recently used is closed beyond it. Defaults to 1 024. */
  maxPools?: number;
  /** How long requests in flight may finish when a pool is closed, in ms, before its sockets are destroyed. Defaults to 1 000. */
  closeGraceMs?: number;
  /** The clock of the close grace timers. Defaults to `systemClock`. */
  clock?: Clock;
}

/** Defaults for OriginPoolsOptions. */
export const originPoolsDefaults = Object.freeze({ maxPools: 1_024, closeGraceMs: 1_000 });

/** OriginPools maps an origin to its keep-alive pool, opening pools on first use. */
export class OriginPools {
  private readonly owner: string;
  private readonly pools = new Map<string, Pool>();
  private readonly poolOptions: Pool.Options;
  private readonly maxPools: number;
  private readonly closeGraceMs: number;
  private readonly clock: Clock;
  /** Pools being closed (evicted, retained out, deleted): `close()` waits for them too. */
  private readonly draining = new Set<Promise<void>>();
  private closing: Promise<void> | undefined;

  constructor(options: OriginPoolsOptions) {
    const o = checkOptions('OriginPools', options);
    this.owner = typeof o.owner === 'string' ? o.owner : 'OriginPools';
    this.poolOptions = { ...o.pool };
    this.maxPools = integer(this.owner, 'maxPools', o.maxPools ?? originPoolsDefaults.maxPools, 1, 1 << 20);
    this.closeGraceMs = finite(this.owner, 'closeGraceMs', o.closeGraceMs ?? originPoolsDefaults.closeGraceMs, 0, 3_600_000);
    this.clock = clockOption(this.owner, o.clock, systemClock);
  }

  /** size is the number of open pools. */
  get size(): number {
    return this.pools.size;
  }

  /** get answers the pool for `origin` (e.g. `http://127.0.0.1:8080`), opening it on first use; ClosedError after `close()`. */
  get(origin: string): Pool {
    if (this.closing !== undefined) throw new ClosedError(`${this.owner} is closed`);
    let pool = this.pools.get(origin);
    if (pool !== undefined) {
      // Move to the back: Map order is the recency order (least recently used first).
      if (this.pools.size > 1) {
        this.pools.delete(origin);
        this.pools.set(origin, pool);
      }
      return pool;
    }
    pool = new Pool(origin, this.poolOptions);
    this.pools.set(origin, pool);
    if (this.pools.size > this.maxPools) {
      const oldest = this.pools.keys().next().value as string;
      this.drain(oldest);
    }
    return pool;
  }

  /** has tells whether a pool for `origin` is open. */
  has(origin: string): boolean {
    return this.pools.has(origin);
  }

  /** delete closes the pool of `origin` (letting requests in flight finish); resolves when it is closed. */
  delete(origin: string): Promise<void> {
    return this.drain(origin);
  }

  /** retain closes the pools whose origin is not in `live`, letting requests in flight on them finish first. */
  retain(live: ReadonlySet<string>): void {
    for (const origin of [...this.pools.keys()]) if (!live.has(origin)) void this.drain(origin);
  }

  /**
   * close closes every pool, letting requests in flight finish for up to `closeGraceMs` (then
   * destroying what is left), and waits for pools closed earlier; later `get` calls throw ClosedError.
   * Idempotent.
   */
  close(): Promise<void> {
    if (this.closing === undefined) {
      const all = [...this.pools.keys()].map((origin) => this.drain(origin));
      this.closing = Promise.all([...all, ...this.draining]).then(ignore);
    }
    return this.closing;
  }

  /** Symbol.asyncDispose closes the pools (`await using pools = new OriginPools(…)`). */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private drain(origin: string): Promise<void> {
    const pool = this.pools.get(origin);
    if (pool === undefined) return Promise.resolve();
    this.pools.delete(origin);
    const done = closeGracefully(pool, this.clock, this.closeGraceMs).finally(() => this.draining.delete(done));
    this.draining.add(done);
    return done;
  }
}

/** closeGracefully closes `pool`, destroying it if requests are still open after `graceMs` of `clock` time. */
function closeGracefully(pool: Pool, clock: Clock, graceMs: number): Promise<void> {
  let timer: TimerHandle | undefined;
  const grace = new Promise<'late'>((resolve) => {
    timer = clock.setTimeout(() => resolve('late'), graceMs);
    timer.unref();
  });
  return Promise.race([pool.close().then(() => 'done' as const), grace]).then(
    (outcome) => {
      clock.clearTimeout(timer);
      if (outcome === 'late') return pool.destroy().catch(ignore);
    },
    () => {
      clock.clearTimeout(timer);
      return pool.destroy().catch(ignore);
    },
  );
}

function ignore(): void {}
