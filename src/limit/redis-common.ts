/**
 * What the two Redis limiters share: the client (given, or made from a URL), the instance count that
 * divides the rescue limit, and option checks.
 */
import { Redis } from 'ioredis';
import type { Clock, TimerHandle } from '../core/clock.js';
import { finite, fn, integer, positive } from '../core/validate.js';
import type { InstanceSource, RedisClient } from './types.js';

/** RedisCommonOptions are the options both Redis limiters take. */
export interface RedisCommonOptions {
  /**
   * The ioredis client (or cluster) to use, or a `redis://` URL: the limiter then makes its own client
   * (reconnecting every ≤ 100 ms so that decisions come back soon after Redis does) and
   * closes it in `close()`. Required.
   */
  redis: RedisClient | string;
  /** Milliseconds a decision may wait for Redis before it is made in process. Defaults to 50. */
  timeoutMs?: number;
  /** Milliseconds between PINGs while in rescue (go-zero: 100 ms). Defaults to 100. */
  probeIntervalMs?: number;
  /**
   * How many instances share the limit: the rescue limiter allows `rate / instances` (or `quota /
   * instances`) so that a fleet of N does not admit N × the limit while Redis is down. A number, or a
   * function asked each time decisions go to rescue. Defaults to 1, or the registry's count.
   */
  instances?: number | (() => number);
  /**
   * Anything that lists a service's instances (a bulwark `Registry` or `RegistryCache` fits): the count
   * of `service` is `instances`, refreshed in the background. Defaults to none.
   */
  registry?: InstanceSource;
  /** The service to count in `registry`. Required with `registry`. */
  service?: string;
  /** Milliseconds between instance counts from `registry`. Defaults to 10 000. */
  instancesRefreshMs?: number;
  /** The most client keys the rescue limiter keeps while Redis is down (least recently used go first). Defaults to 10 000. */
  maxKeys?: number;
  /** The time source for deadlines, probes, refreshes and the rescue limiter. Defaults to the monotonic system clock. */
  clock?: Clock;
}

/** Defaults shared by the Redis limiters. */
export const redisCommonDefaults = Object.freeze({ timeoutMs: 50, probeIntervalMs: 100, instances: 1, instancesRefreshMs: 10_000, maxKeys: 10_000 });

/** ownClient makes the limiter's own ioredis client from a URL. */
export function ownClient(url: string): Redis {
  const client = new Redis(url, {
    // No auto-pipelining: it costs a lone caller ~2 × the latency; concurrent decisions share
    // socket writes anyway (rescue.ts corks the socket while decisions are in flight).
    // Reconnect fast: while Redis is down, decisions are local anyway; when it is back, they return
    // at the PONGs of the probe, which need a connection.
    retryStrategy: (times) => Math.min(times * 10, 100),
    maxRetriesPerRequest: 1,
    lazyConnect: false,
  });
  // Connection errors surface as failed decisions (and the rescue's cause); without a listener,
  // ioredis would print every reconnect attempt.
  client.on('error', () => {});
  return client;
}

/** resolveClient checks the `redis` option and answers the client, and whether the limiter owns it. */
export function resolveClient(owner: string, redis: unknown): { client: RedisClient; owned: boolean } {
  if (typeof redis === 'string') {
    if (!/^rediss?:\/\//.test(redis)) throw new TypeError(`${owner}: redis must be an ioredis client or a redis:// URL, got ${JSON.stringify(redis)}`);
    return { client: ownClient(redis), owned: true };
  }
  if (redis === null || typeof redis !== 'object' || typeof (redis as { evalsha?: unknown }).evalsha !== 'function') {
    throw new TypeError(`${owner}: redis must be an ioredis client or a redis:// URL, got ${redis === null ? 'null' : typeof redis}`);
  }
  return { client: redis as RedisClient, owned: false };
}

/** checkCommon validates the shared options. */
export function checkCommon(owner: string, o: Partial<RedisCommonOptions>): { timeoutMs: number; probeIntervalMs: number } {
  return {
    timeoutMs: positive(owner, 'timeoutMs', o.timeoutMs ?? redisCommonDefaults.timeoutMs),
    probeIntervalMs: finite(owner, 'probeIntervalMs', o.probeIntervalMs ?? redisCommonDefaults.probeIntervalMs, 1, 60_000),
  };
}

/** Instances answers how many instances share a limit, from a number, a function or a registry. */
export class Instances {
  private count: number;
  private readonly ask: (() => number) | undefined;
  private timer: TimerHandle | undefined;

  constructor(
    owner: string,
    o: Partial<RedisCommonOptions>,
    private readonly clock: Clock,
  ) {
    const v = o.instances;
    this.count = 1;
    if (typeof v === 'function') {
      this.ask = fn<() => number>(owner, 'instances', v);
      this.refresh();
    } else {
      this.count = integer(owner, 'instances', v ?? redisCommonDefaults.instances, 1);
    }
    if (o.registry !== undefined) {
      if (v !== undefined) throw new TypeError(`${owner}: give instances or registry, not both`);
      const registry = o.registry;
      if (registry === null || typeof registry !== 'object' || typeof registry.getService !== 'function') {
        throw new TypeError(`${owner}: registry must have getService(service) (a Registry), got ${registry === null ? 'null' : typeof registry}`);
      }
      const service = o.service;
      if (typeof service !== 'string' || service.length === 0) throw new TypeError(`${owner}: service must be a non-empty string with registry, got ${String(service)}`);
      const every = positive(owner, 'instancesRefreshMs', o.instancesRefreshMs ?? redisCommonDefaults.instancesRefreshMs);
      const poll = () => {
        let answer: PromiseLike<ArrayLike<unknown>>;
        try {
          answer = registry.getService(service);
        } catch {
          return; // keep the last count
        }
        Promise.resolve(answer).then(
          (list) => {
            const n = list?.length;
            if (typeof n === 'number' && Number.isInteger(n) && n > 0) this.count = n;
          },
          () => {}, // keep the last count: the registry may be down too
        );
      };
      poll();
      this.timer = clock.setInterval(poll, every);
      this.timer.unref();
    }
  }

  /** get answers the current count (≥ 1). */
  get(): number {
    return this.count;
  }

  /** refresh asks the `instances` function again (when decisions go to rescue). */
  refresh(): void {
    if (this.ask === undefined) return;
    let n: unknown;
    try {
      n = this.ask();
    } catch {
      return;
    }
    if (typeof n === 'number' && Number.isInteger(n) && n >= 1) this.count = n;
  }

  close(): void {
    this.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }
}
