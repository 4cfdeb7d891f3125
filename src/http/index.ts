/**
 * bulwark/http: rate limiting, load shedding and a server-side breaker as HTTP middleware for
 * node:http (`wrapHandler`), Express (`expressGuard`) and Fastify (`fastifyGuard`), all three on one
 * core (`HttpGuard`). Checks run shedder → limiter → breaker; refusals answer 429 (with `Retry-After`
 * and `RateLimit-*` headers) or 503 (with `Retry-After`) and a `{ error: { code, message } }` body.
 * Neither Express nor Fastify is imported: both are optional peer dependencies.
 */
export { HttpGuard, httpGuardDefaults, type HttpGuardOptions, type Verdict } from './guard.js';
export { noteError } from './pass.js';
export { wrapHandler, type NodeHandler } from './node-http.js';
export { expressGuard, expressErrors, type ExpressMiddleware, type ExpressErrorMiddleware } from './express.js';
export { fastifyGuard, type FastifyGuardOptions, type FastifyGuardPlugin, type FastifyLike } from './fastify.js';
export { MAX_KEY_LENGTH, clientAddress } from './client-key.js';
export { JSON_TYPE, type Refusal } from './refusal.js';
export type {
  Completion, GuardErrorEvent, GuardErrorSource, GuardRejectEvent, HttpBreaker, HttpGuardStats, HttpLimiter,
  HttpShedder, KeyFn, KeyOption, RateDecision, RejectCode,
} from './types.js';
