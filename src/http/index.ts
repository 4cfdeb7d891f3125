/**
 * bulwark/http: rate limiting, load shedding and a server-side breaker as HTTP middleware for
 * node:http (`wrapHandler`), Express (`expressGuard`) and Fastify (`fastifyGuard`), all three on one
 * core (`HttpGuard`). Checks run shedder → limiter → breaker; refusals answer 429 (with `Retry-After`
 * and `RateLimit-*` headers) or 503 (with `Retry-After`) and a `{ error: { code, message } }` body.
 * The limiter seam is synchronous (`decide(key)`: `KeyedLimiter`) or asynchronous
 * (`takeDecision(key)`: the Redis limiters); the shedder and breaker seams `admit()` an
 * `AdmissionToken`. Neither Express nor Fastify is imported: both are optional peer dependencies.
 */
export { HttpGuard, httpGuardDefaults, type HttpGuardOptions } from './guard.js';
export { noteError } from './pass.js';
export { wrapHandler } from './node-http.js';
export { expressGuard, expressErrors } from './express.js';
export { fastifyGuard } from './fastify.js';
export { MAX_KEY_LENGTH, clientAddress } from './client-key.js';
export { JSON_TYPE } from './refusal.js';
export type {
  ExpressErrorMiddleware,
  ExpressMiddleware,
  FastifyGuardOptions,
  NodeHandler,
  Verdict,
  GuardErrorEvent,
  GuardErrorSource,
  GuardRejectEvent,
  HttpAsyncLimiter,
  HttpBreaker,
  HttpGuardStats,
  HttpLimiter,
  HttpShedder,
  HttpSyncLimiter,
  FastifyDone,
  FastifyGuardPlugin,
  FastifyLike,
  KeyFn,
  KeyOption,
  Refusal,
  RejectCode,
} from './types.js';
export type { AdmissionToken, LimitDecision } from '../core/admission.js';
export type { FaultInjector } from '../policy/fault.js';
export type { FaultAbort, FaultDelay, FaultOptions, FaultStats } from '../policy/types.js';
/** The errors whose codes the refusals carry, and those reported on `onError` or handed to a breaker's token. */
export { AbortedError, BreakerOpenError, BulwarkError, FaultInjectedError, InvalidResponseError, OverloadedError, RateLimitedError } from '../core/errors.js';
