/**
 * The small seams the HTTP middleware needs from a limiter, a shedder and a breaker, in the words of
 * docs/conventions.md: a limiter answers a `LimitDecision` (synchronously through `decide`, or as a
 * promise through `takeDecision`), a shedder or a breaker `admit()`s a request with an `AdmissionToken`
 * or throws its coded refusal. They are structural: `KeyedLimiter`, the Redis limiters,
 * `AdaptiveShedder`, `SreBreaker` and `CircuitBreaker` fit them as they are, and so does any
 * hand-written object of the same shape.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AdmissionToken, LimitDecision } from '../core/admission.js';
import type { HttpGuard, HttpGuardOptions } from './guard.js';

/**
 * HttpSyncLimiter is an in-process limit per key (client IP, API key, user): `decide(key, n)` takes
 * `n` units (default 1) and answers at once. bulwark/limit's `KeyedLimiter` fits.
 */
export interface HttpSyncLimiter {
  decide(key: string, n?: number): LimitDecision;
}

/**
 * HttpAsyncLimiter is a limit per key shared by a fleet: `takeDecision(key, n)` takes `n` units
 * (default 1) and answers a promise. bulwark/limit's Redis limiters fit.
 */
export interface HttpAsyncLimiter {
  takeDecision(key: string, n?: number): Promise<LimitDecision>;
}

/**
 * HttpLimiter is either kind. HttpGuard tells which once, at construction, by the method it has
 * (`decide` wins when both are there), so a synchronous limiter costs no promise per request.
 */
export type HttpLimiter = HttpSyncLimiter | HttpAsyncLimiter;

/**
 * HttpShedder protects the process: `admit()` answers a token, or throws a BulwarkError
 * (`OverloadedError`) when the process is overloaded. bulwark/limit's `AdaptiveShedder` fits.
 */
export interface HttpShedder {
  admit(): AdmissionToken;
}

/**
 * HttpBreaker is a server-side breaker around the handlers: `admit()` answers a token, or throws a
 * BulwarkError (`BreakerOpenError`) while open. bulwark/breaker's `SreBreaker` and `CircuitBreaker` fit.
 */
export interface HttpBreaker {
  admit(): AdmissionToken;
}

/**
 * TokenSink completes a token and reports a token that throws (the HttpGuard, for its passes):
 * `ok` true → success(), false → failure(why), undefined → release().
 */
export interface TokenSink {
  complete(source: 'shedder' | 'breaker', token: AdmissionToken, ok: boolean | undefined, why: unknown): void;
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
export type RejectCode = 'ERR_RATE_LIMITED' | 'ERR_OVERLOADED' | 'ERR_BREAKER_OPEN' | 'ERR_FAULT_INJECTED';

/** GuardRejectEvent is one refused request (for logs and metrics). */
export interface GuardRejectEvent {
  /** status is 429 or 503 (or an injected fault's status). */
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
  /** aborted: requests whose client went away while an async limiter was deciding (or during an injected delay). */
  readonly aborted: number;
  /** faulted: requests answered by an injected fault's abort, with its status (see `fault`). */
  readonly faulted: number;
}

/** Refusal is a ready-made answer: status and `{ error: { code, message } }` JSON body. */
export interface Refusal {
  readonly status: number;
  readonly code: RejectCode;
  /** message is the body's message (the coded error's default message). */
  readonly message: string;
  /** body is the JSON body, encoded once. */
  readonly body: Buffer;
}

/** FastifyRequestLike is the part of a Fastify request the plugin uses. */
export interface FastifyRequestLike {
  raw: IncomingMessage;
}
/** FastifyReplyLike is the part of a Fastify reply the plugin uses. */
export interface FastifyReplyLike {
  raw: ServerResponse;
  code(status: number): FastifyReplyLike;
  type(contentType: string): FastifyReplyLike;
  send(payload?: unknown): FastifyReplyLike;
}
/** FastifyDone is the callback of a Fastify hook or plugin. */
export type FastifyDone = (err?: Error) => void;

/** FastifyLike is the part of a Fastify instance the plugin uses. */
export interface FastifyLike {
  // Method syntax on purpose: Fastify's overloaded addHook must be assignable to it.
  addHook(name: string, hook: (...args: never[]) => unknown): unknown;
}

/** FastifyGuardPlugin is the plugin function with fastify-plugin's marks. */
export interface FastifyGuardPlugin {
  (fastify: FastifyLike, options: FastifyGuardOptions, done: FastifyDone): void;
}

/** ExpressMiddleware is the shape Express calls: `(req, res, next)`. */
export type ExpressMiddleware = (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void;

/** ExpressErrorMiddleware is the shape of an Express error handler: `(err, req, res, next)`. */
export type ExpressErrorMiddleware = (err: unknown, req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void;

/** FastifyGuardOptions are the plugin's options: an HttpGuard to share, or the options of a new one. */
export type FastifyGuardOptions = HttpGuardOptions | { guard: HttpGuard };

/** NodeHandler is a node:http request listener; it may return a promise. */
export type NodeHandler<Req extends IncomingMessage = IncomingMessage, Res extends ServerResponse = ServerResponse> = (req: Req, res: Res) => unknown;

/**
 * Verdict is what `check` answers: `undefined` — go on to the handler; a Refusal — answer it (its
 * headers are already set on the response); `null` — the client went away while an async limiter was
 * deciding: do nothing more.
 */
export type Verdict = Refusal | null | undefined;
