/**
 * bulwark/limit: rate limits and overload protection.
 *
 * - `TokenLimiter`: an in-process token bucket (exact fractional refill, `allow(n)` sync, `wait(n)`).
 * - `PeriodLimiter`: a quota per key per period (go-zero's three answers), fixed or sliding window.
 * - `KeyedLimiter`: one limiter per key (user, IP) with a bound on keys; idle keys go first.
 * - `RedisTokenLimiter` / `RedisPeriodLimiter`: a limit per key shared by a fleet through Redis (or a
 *   Redis Cluster), one Lua script per decision (or per lease), with an in-process rescue limiter per
 *   key while Redis is down or slow.
 * - `AdaptiveShedder`: drops work while the event loop is overloaded (go-zero `core/load` for Node).
 *
 * In-process limiters answer synchronously: `allow()` (a boolean) and `decide()` (a `LimitDecision`,
 * what HTTP `RateLimit-*` and `Retry-After` headers need). Redis limiters answer with promises:
 * `take()` and `takeDecision()`. The shedder `admit()`s a call and answers an `AdmissionToken`.
 */
export type { AdmissionToken } from '../core/admission.js';
export type {
  LimitDecision,
  Limiter,
  KeyedRateLimiter,
  SharedRateLimiter,
  PeriodAnswer,
  PeriodAlgorithm,
  LimiterMode,
  RedisClient,
  InstanceSource,
  RedisLimiterStats,
  ModeChange,
} from './types.js';
export { AbortedError, BulwarkError, ClosedError, InvalidResponseError, OverloadedError, TimeoutError } from '../core/errors.js';
export { TokenLimiter, tokenLimiterDefaults, type TokenLimiterOptions, type TokenLimiterLiveOptions, type WaitOptions } from './token-limiter.js';
export { PeriodLimiter, periodLimiterDefaults, type PeriodLimiterOptions, type PeriodLimiterLiveOptions } from './period-limiter.js';
export { KeyedLimiter, keyedLimiterDefaults, type KeyedLimiterOptions, type KeyedLimiterLiveOptions } from './keyed-limiter.js';
export { MAX_KEY_BYTES } from './keys.js';
export {
  RedisTokenLimiter,
  redisTokenLimiterDefaults,
  type RedisTokenLimiterOptions,
  type RedisTokenLimiterLiveOptions,
  type LeaseOptions,
} from './redis-token-limiter.js';
export { RedisPeriodLimiter, redisPeriodLimiterDefaults, type RedisPeriodLimiterOptions } from './redis-period-limiter.js';
export { redisCommonDefaults, type RedisCommonOptions } from './redis-limiter-options.js';
export {
  AdaptiveShedder,
  adaptiveShedderDefaults,
  type AdaptiveShedderOptions,
  type AdaptiveShedderStats,
  type AdaptiveShedderLiveOptions,
} from './adaptive-shedder.js';
export { EventLoopLoad, eventLoopLoadDefaults, type EventLoopLoadOptions, type LoadSample } from './event-loop-load.js';
