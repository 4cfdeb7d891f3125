/**
 * bulwark/limit: rate limits and overload protection.
 *
 * - `TokenLimiter`: an in-process token bucket (exact fractional refill, `allow(n)` sync, `wait(n)`).
 * - `PeriodLimiter`: a quota per key per period (go-zero's three answers), fixed or sliding window.
 * - `KeyedLimiter`: one limiter per key (user, IP) with a bound on keys; idle keys go first.
 * - `RedisTokenLimiter` / `RedisPeriodLimiter`: one limit shared by a fleet through Redis, one Lua
 *   script per decision, with an in-process rescue limiter while Redis is down or slow.
 * - `AdaptiveShedder`: drops work while the event loop is overloaded (go-zero `core/load` for Node).
 *
 * Every limiter answers the fast boolean `allow()`, and a `decide()` that says why (a `LimitDecision`,
 * what HTTP `RateLimit-*` and `Retry-After` headers need).
 */

/** LimitDecision is one limiter's answer with the numbers behind it. */
export interface LimitDecision {
  /** allowed is true when the call may go ahead (its tokens or quota were taken). */
  readonly allowed: boolean;
  /** limit is the budget: the bucket's burst, or the period's quota. */
  readonly limit: number;
  /** remaining is what is left after this decision, in whole calls (≥ 0). */
  readonly remaining: number;
  /**
   * retryAfterMs is 0 when allowed; otherwise how long until the same request could be allowed
   * (`Infinity` when it never can, e.g. n > burst).
   */
  readonly retryAfterMs: number;
  /** resetMs is how long until the budget is whole again (bucket full, or the window ends). */
  readonly resetMs: number;
}

/** Limiter is a single in-process limit: a synchronous boolean primitive and a decision. */
export interface Limiter {
  /** allow takes `n` tokens (default 1) when they are there and answers whether it did. */
  allow(n?: number): boolean;
  /** decide is `allow` with the numbers behind the answer. */
  decide(n?: number): LimitDecision;
  /** idle, when present, tells whether the limiter is back in its initial state (dropping it loses nothing). */
  idle?(): boolean;
}

/**
 * KeyedRateLimiter is a limit per key (user, IP, API key): what the HTTP middleware takes.
 * Local ones answer synchronously, Redis ones with a promise.
 */
export interface KeyedRateLimiter {
  /** allow takes `n` (default 1) from `key`'s budget when it is there and answers whether it did. */
  allow(key: string, n?: number): boolean | Promise<boolean>;
  /** decide is `allow` with the numbers behind the answer. */
  decide(key: string, n?: number): LimitDecision | Promise<LimitDecision>;
}

/** PeriodAnswer is go-zero's three answers: `hit-quota` is the last call allowed in the window. */
export type PeriodAnswer = 'allowed' | 'hit-quota' | 'over-quota';

/** LimiterMode says where a Redis limiter's decisions are made right now. */
export type LimiterMode = 'redis' | 'rescue';

export { TokenLimiter, tokenLimiterDefaults, type TokenLimiterOptions, type WaitOptions } from './token-limiter.js';
export { PeriodLimiter, periodLimiterDefaults, type PeriodLimiterOptions } from './period-limiter.js';
export { KeyedLimiter, keyedLimiterDefaults, type KeyedLimiterOptions } from './keyed-limiter.js';
export { MAX_REDIS_RATE, RedisTokenLimiter, redisTokenLimiterDefaults, type RedisTokenLimiterOptions } from './redis-token-limiter.js';
export { RedisPeriodLimiter, redisPeriodLimiterDefaults, type RedisPeriodLimiterOptions } from './redis-period-limiter.js';
export { redisCommonDefaults, type RedisCommonOptions } from './redis-common.js';
export { TOKEN_SCRIPT, PERIOD_SCRIPT } from './redis-scripts.js';
export type { RedisLimiterStats, ModeChange, RedisClient } from './rescue.js';
export {
  AdaptiveShedder,
  adaptiveShedderDefaults,
  type AdaptiveShedderOptions,
  type AdaptiveShedderStats,
  type ShedderToken,
} from './adaptive-shedder.js';
export { EventLoopLoad, eventLoopLoadDefaults, type EventLoopLoadOptions, type LoadSample } from './event-loop-load.js';
