/**
 * The small seams the HTTP middleware needs from a limiter, a shedder and a breaker. They are
 * structural: `KeyedLimiter`, the Redis limiters, `AdaptiveShedder`, `SreBreaker` and `CircuitBreaker`
 * fit them as they are, and so does any hand-written object of the same shape.
 */
import type { IncomingMessage } from 'node:http';

/** RateDecision is one limiter answer: what the `RateLimit-*` and `Retry-After` headers are made of. */
export interface RateDecision {
  /** allowed is true when the request may go ahead (its quota was taken). */
  readonly allowed: boolean;
  /** limit is the budget: a bucket's burst, or a period's quota. */
  readonly limit: number;
  /** remaining is what is left after this decision, in whole requests. */
  readonly remaining: number;
  /** retryAfterMs is 0 when allowed; otherwise when the same request could pass (`Infinity`: never). */
  readonly retryAfterMs: number;
  /** resetMs is how long until the budget is whole again. */
  readonly resetMs: number;
}

/**
 * HttpLimiter is a limit per key (client IP, API key, user): `decide(key)` answers synchronously
 * (in-process limiters) or with a promise (Redis limiters). bulwark/limit's `KeyedRateLimiter` fits.
 */
export interface HttpLimiter {
  decide(key: string): RateDecision | PromiseLike<RateDecision>;
}

/** Completion is the token a shedder or a breaker hands out: complete it exactly once. */
export interface Completion {
  success(): void;
  failure(err?: unknown): void;
}

/**
 * HttpShedder protects the process: `admit()` answers a token, or throws a BulwarkError
 * (`OverloadedError`) when the process is overloaded. bulwark/limit's `AdaptiveShedder` fits.
 */
export interface HttpShedder {
  admit(): Completion;
}

/**
 * HttpBreaker is a server-side breaker around the handlers: `admit()` answers a token, or throws a
 * BulwarkError (`BreakerOpenError`) while open. bulwark/breaker's `SreBreaker` and `CircuitBreaker` fit.
 */
export interface HttpBreaker {
  admit(): Completion;
}

/** KeyFn names the limiter key of a request; a result that is not a non-empty string means "use the IP". */
export type KeyFn = (req: IncomingMessage) => string | null | undefined;

/**
 * KeyOption says what the limiter is keyed by: `'ip'` (the client address, see `trustProxy`),
 * `{ header: 'x-api-key' }` (the header's value; the IP when it is missing), or a function.
 */
export type KeyOption = 'ip' | { readonly header: string } | KeyFn;

/** GuardErrorSource says which part failed: the request still passed (fail open) unless it is `handler`. */
export type GuardErrorSource = 'skip' | 'key' | 'limiter' | 'shedder' | 'breaker' | 'handler';

/** GuardErrorEvent reports something that went wrong inside the guard or the wrapped handler. */
export interface GuardErrorEvent {
  readonly source: GuardErrorSource;
  readonly error: unknown;
}

/** RejectCode is the code of a refusal: the coded error's code in the response body. */
export type RejectCode = 'ERR_RATE_LIMITED' | 'ERR_OVERLOADED' | 'ERR_BREAKER_OPEN';

/** GuardRejectEvent is one refused request (for logs and metrics). */
export interface GuardRejectEvent {
  /** status is 429 or 503. */
  readonly status: number;
  readonly code: RejectCode;
  /** retryAfterMs is what `Retry-After` was made of (`undefined` when no header was sent). */
  readonly retryAfterMs: number | undefined;
  /** key is the limiter key, for a 429. */
  readonly key: string | undefined;
}

/** HttpGuardStats are plain counters since the guard was made. */
export interface HttpGuardStats {
  /** passed: requests handed on to the handler after the checks. */
  readonly passed: number;
  /** skipped: requests `skip` let by without any check. */
  readonly skipped: number;
  /** limited: requests answered 429. */
  readonly limited: number;
  /** shed: requests answered 503 by the shedder. */
  readonly shed: number;
  /** broken: requests answered 503 by the breaker. */
  readonly broken: number;
  /** failedOpen: requests let through because the key, limiter, shedder or breaker failed. */
  readonly failedOpen: number;
  /** aborted: requests whose client went away while an async limiter was deciding. */
  readonly aborted: number;
}
