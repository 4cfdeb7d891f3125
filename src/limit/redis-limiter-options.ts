/**
 * The options both Redis limiters take, their defaults, and the check of the timing ones.
 */
import type { Clock } from '../core/clock.js';
import { finite, positive, type OptionKeys } from '../core/validate.js';
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

/** The keys of RedisCommonOptions, all of them: each Redis limiter's own key list adds its own to these. */
export const REDIS_COMMON_KEYS = {
  redis: true,
  timeoutMs: true,
  probeIntervalMs: true,
  instances: true,
  registry: true,
  service: true,
  instancesRefreshMs: true,
  maxKeys: true,
  clock: true,
} as const satisfies OptionKeys<RedisCommonOptions>;

/** Defaults shared by the Redis limiters. */
export const redisCommonDefaults = Object.freeze({ timeoutMs: 50, probeIntervalMs: 100, instances: 1, instancesRefreshMs: 10_000, maxKeys: 10_000 });

/** checkCommon validates the timing options both Redis limiters take. */
export function checkCommon(owner: string, o: Partial<RedisCommonOptions>): { timeoutMs: number; probeIntervalMs: number } {
  return {
    timeoutMs: positive(owner, 'timeoutMs', o.timeoutMs ?? redisCommonDefaults.timeoutMs),
    probeIntervalMs: finite(owner, 'probeIntervalMs', o.probeIntervalMs ?? redisCommonDefaults.probeIntervalMs, 1, 60_000),
  };
}
