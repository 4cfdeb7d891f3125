/**
 * The shapes of bulwark/limit: what its limiters implement and what they take. Synchronous limiters
 * (in process) answer `allow()` / `decide()`; asynchronous ones (Redis) answer `take()` /
 * `takeDecision()` — a verb never answers "a boolean or a promise".
 */
import type { LimitDecision } from '../core/admission.js';
import type { Redis, Cluster } from 'ioredis';

export type { LimitDecision } from '../core/admission.js';

/** Limiter is a single in-process limit: a synchronous boolean primitive and a decision. */
export interface Limiter {
  /** allow takes `n` tokens (default 1) when they are there and answers whether it did. */
  allow(n?: number): boolean;
  /** decide is `allow` with the numbers behind the answer. */
  decide(n?: number): LimitDecision;
  /** idle, when present, tells whether the limiter is back in its initial state (dropping it loses nothing). */
  idle?(): boolean;
}

/** KeyedRateLimiter is an in-process limit per key (user, IP, API key), answered synchronously. */
export interface KeyedRateLimiter {
  /** allow takes `n` (default 1) from `key`'s budget when it is there and answers whether it did. */
  allow(key: string, n?: number): boolean;
  /** decide is `allow` with the numbers behind the answer. */
  decide(key: string, n?: number): LimitDecision;
}

/** SharedRateLimiter is a limit per key shared by a fleet (Redis), answered asynchronously. */
export interface SharedRateLimiter {
  /** take takes `n` (default 1) from `key`'s shared budget when it is there and answers whether it did. */
  take(key: string, n?: number): Promise<boolean>;
  /** takeDecision is `take` with the numbers behind the answer. */
  takeDecision(key: string, n?: number): Promise<LimitDecision>;
}

/** PeriodAnswer is go-zero's three answers: `hit-quota` is the last call allowed in the window. */
export type PeriodAnswer = 'allowed' | 'hit-quota' | 'over-quota';

/** PeriodAlgorithm is how a period limiter counts: `fixed` windows, or the `sliding`-window counter. */
export type PeriodAlgorithm = 'fixed' | 'sliding';

/** LimiterMode says where a Redis limiter's decisions are made right now. */
export type LimiterMode = 'redis' | 'rescue';

/** RedisClient is what the Redis limiters take: an ioredis client or cluster. */
export type RedisClient = Redis | Cluster;

/**
 * InstanceSource is anything that lists a service's instances — a bulwark `Registry` or
 * `RegistryCache` fits, typed structurally so that limit does not depend on the registry module.
 */
export interface InstanceSource {
  /** getService answers the instances of `service` (only the count is used). */
  getService(service: string): PromiseLike<ArrayLike<unknown>>;
}

/** RedisLimiterStats is a snapshot of a Redis limiter's counters. */
export interface RedisLimiterStats {
  /** Where decisions are made now. */
  readonly mode: LimiterMode;
  /** Decisions Redis answered (tokens spent from a lease included). */
  readonly redisDecisions: number;
  /** Decisions the in-process rescue limiter answered. */
  readonly rescueDecisions: number;
  /** Calls answered allowed, and answered refused (`take` false, `takeDecision` not allowed), wherever decided. */
  readonly allowed: number;
  readonly limited: number;
  /** Redis calls that failed (errors, timeouts, bad replies), the one that started an outage included. */
  readonly failures: number;
  /** How many times decisions switched to rescue. */
  readonly outages: number;
  /** The failure that started the current (or last) outage: an ioredis error, TimeoutError or InvalidResponseError. */
  readonly cause: unknown;
  /** The clock's time at which the current outage started, or undefined while on Redis. */
  readonly rescueSince: number | undefined;
  /** The rate or quota divisor the rescue limiter uses now. */
  readonly instances: number;
  /** Keys the rescue limiter keeps now. */
  readonly rescueKeys: number;
}

/** ModeChange is the event a Redis limiter emits when decisions switch between Redis and rescue. */
export interface ModeChange {
  readonly mode: LimiterMode;
  /** What sent decisions to rescue (undefined when back on Redis). */
  readonly cause: unknown;
}
