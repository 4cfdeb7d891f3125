/**
 * Every error bulwark raises at run time is a BulwarkError with a stable string `code`.
 * Callers branch on `code` (or `instanceof`); codes are never reused. docs/errors.md lists them all,
 * and errors.test.ts checks that list against this file in both directions.
 *
 * Errors thrown on hot paths (an open breaker, a full bulkhead, a rate limit) are created without a
 * stack trace when `Error.stackTraceLimit` capture would dominate their cost: see `lightweight`.
 */

/** Options common to every BulwarkError. */
export interface BulwarkErrorOptions {
  /** The underlying error, kept as `cause`. */
  cause?: unknown;
}

/** BulwarkError is the base of every coded error bulwark raises. */
export class BulwarkError extends Error {
  /** A stable machine-readable code, e.g. `ERR_BREAKER_OPEN`. */
  readonly code: string;

  constructor(code: string, message: string, options?: BulwarkErrorOptions) {
    super(message, options && 'cause' in options ? { cause: options.cause } : undefined);
    this.code = code;
  }

  override get name(): string {
    return this.constructor.name;
  }
}

/**
 * withoutStack builds an error without capturing a stack trace. Capturing the stack is most of the
 * cost of `new Error()` (6–8 µs in opossum and cockatiel while open); for a rejection that carries its
 * whole meaning in `code` and `message`, the stack of the rejecting frame says nothing a caller needs.
 */
export function withoutStack<T>(build: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return build();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/** BreakerOpenError: a breaker rejected the call without running it. */
export class BreakerOpenError extends BulwarkError {
  static readonly code = 'ERR_BREAKER_OPEN';
  /** The breaker's name, when it has one. */
  readonly breaker: string | undefined;
  constructor(message = 'breaker is open', options?: BulwarkErrorOptions & { breaker?: string }) {
    super(BreakerOpenError.code, message, options);
    this.breaker = options?.breaker;
  }
}

/** TimeoutError: the call did not settle before its deadline; its AbortSignal was aborted. */
export class TimeoutError extends BulwarkError {
  static readonly code = 'ERR_TIMEOUT';
  constructor(message = 'operation timed out', options?: BulwarkErrorOptions) {
    super(TimeoutError.code, message, options);
  }
}

/** BulkheadRejectedError: all concurrency slots and queue places were taken. */
export class BulkheadRejectedError extends BulwarkError {
  static readonly code = 'ERR_BULKHEAD_REJECTED';
  constructor(message = 'bulkhead is full', options?: BulwarkErrorOptions) {
    super(BulkheadRejectedError.code, message, options);
  }
}

/** RetryBudgetExhaustedError: a retry was wanted but the retry budget had none left; `cause` is the last failure. */
export class RetryBudgetExhaustedError extends BulwarkError {
  static readonly code = 'ERR_RETRY_BUDGET_EXHAUSTED';
  constructor(message = 'retry budget exhausted', options?: BulwarkErrorOptions) {
    super(RetryBudgetExhaustedError.code, message, options);
  }
}

/** AbortedError: the caller's AbortSignal ended the wait; `cause` is the signal's reason. */
export class AbortedError extends BulwarkError {
  static readonly code = 'ERR_ABORTED';
  constructor(message = 'operation aborted', options?: BulwarkErrorOptions) {
    super(AbortedError.code, message, options);
  }
}

/** NotFoundError: the thing asked for does not exist (a service with no instances, a cache key). */
export class NotFoundError extends BulwarkError {
  static readonly code = 'ERR_NOT_FOUND';
  constructor(message = 'not found', options?: BulwarkErrorOptions) {
    super(NotFoundError.code, message, options);
  }
}

/** RegistryUnavailableError: the registry could not be asked (down, throttled with nothing cached). */
export class RegistryUnavailableError extends BulwarkError {
  static readonly code: string = 'ERR_REGISTRY_UNAVAILABLE';
  constructor(message = 'registry unavailable', options?: BulwarkErrorOptions) {
    super(new.target.code, message, options);
  }
}

/**
 * RegistryPendingError: a register/deregister was not confirmed within its deadline (or failed for now),
 * and the registry keeps trying in the background until a later register/deregister of the same instance.
 * A RegistryUnavailableError, so code that handles that one keeps working.
 */
export class RegistryPendingError extends RegistryUnavailableError {
  static override readonly code: string = 'ERR_REGISTRY_PENDING';
}

/**
 * RegistryDeniedError: etcd answered but refused us — a wrong user or password, a user without
 * permission on the keys, a token it no longer accepts — or its TLS certificate was not trusted. Not
 * retried (asking again gets the same answer); a RegistryUnavailableError too, so code that handles that
 * one keeps working. Its message names the user, never the password.
 */
export class RegistryDeniedError extends RegistryUnavailableError {
  static override readonly code: string = 'ERR_REGISTRY_DENIED';
}

/** WatchResyncError: a watcher fell behind (or its history was compacted); list again before watching on. */
export class WatchResyncError extends BulwarkError {
  static readonly code = 'ERR_WATCH_RESYNC';
  constructor(message = 'watcher fell behind: list again and resync', options?: BulwarkErrorOptions) {
    super(WatchResyncError.code, message, options);
  }
}

/** RateLimitedError: a limiter refused the call; `retryAfterMs` says when to try again, when known. */
export class RateLimitedError extends BulwarkError {
  static readonly code = 'ERR_RATE_LIMITED';
  readonly retryAfterMs: number | undefined;
  constructor(message = 'rate limited', options?: BulwarkErrorOptions & { retryAfterMs?: number }) {
    super(RateLimitedError.code, message, options);
    this.retryAfterMs = options?.retryAfterMs;
  }
}

/** OverloadedError: the load shedder refused the call because the process is overloaded. */
export class OverloadedError extends BulwarkError {
  static readonly code = 'ERR_OVERLOADED';
  constructor(message = 'service overloaded', options?: BulwarkErrorOptions) {
    super(OverloadedError.code, message, options);
  }
}

/** NoInstanceError: the balancer had no instance to pick. */
export class NoInstanceError extends BulwarkError {
  static readonly code = 'ERR_NO_INSTANCE';
  constructor(message = 'no instance available', options?: BulwarkErrorOptions) {
    super(NoInstanceError.code, message, options);
  }
}

/** PeerError: a peer (a cache peer, or an instance behind `client.fetch`) answered with an error or could not be reached. */
export class PeerError extends BulwarkError {
  static readonly code = 'ERR_PEER';
  /** The HTTP status the peer answered with, when it answered. */
  readonly status: number | undefined;
  constructor(message = 'peer request failed', options?: BulwarkErrorOptions & { status?: number }) {
    super(PeerError.code, message, options);
    this.status = options?.status;
  }
}

/** ClosedError: the object was closed; it accepts no more calls. */
export class ClosedError extends BulwarkError {
  static readonly code = 'ERR_CLOSED';
  constructor(message = 'closed', options?: BulwarkErrorOptions) {
    super(ClosedError.code, message, options);
  }
}

/** InvalidResponseError: a server (Redis, etcd, a peer) answered with something of the wrong shape. */
export class InvalidResponseError extends BulwarkError {
  static readonly code = 'ERR_INVALID_RESPONSE';
  constructor(message = 'invalid response', options?: BulwarkErrorOptions) {
    super(InvalidResponseError.code, message, options);
  }
}

/** LoadError: a cache group's getter failed (threw, synchronously or not, or returned a value of the wrong type); `cause` is its error. */
export class LoadError extends BulwarkError {
  static readonly code = 'ERR_LOAD_FAILED';
  constructor(message = 'cache load failed', options?: BulwarkErrorOptions) {
    super(LoadError.code, message, options);
  }
}

/** UnsupportedVersionError: an optional peer dependency is installed at a version outside the range bulwark supports (e.g. `@grpc/grpc-js`). */
export class UnsupportedVersionError extends BulwarkError {
  static readonly code = 'ERR_UNSUPPORTED_VERSION';
  constructor(message: string, options?: BulwarkErrorOptions) {
    super(UnsupportedVersionError.code, message, options);
  }
}

/** RuleInvalidError: a rule document is not a valid rule (bad JSON, too large, unknown kind or key, a value its component refuses); `key` and `field` name it. */
export class RuleInvalidError extends BulwarkError {
  static readonly code: string = 'ERR_RULE_INVALID';
  /** The rule's key (`<scope>/<kind>/<name>`), when known. */
  readonly key: string | undefined;
  /** The field at fault (an option's name, or a path into the document), when one is. */
  readonly field: string | undefined;
  constructor(message: string, options?: BulwarkErrorOptions & { key?: string; field?: string }) {
    super(new.target.code, message, options);
    this.key = options?.key;
    this.field = options?.field;
  }
}

/** RuleRefusedError: a running component refused a rule (its `reconfigure` threw); it keeps its last good settings. A RuleInvalidError too. */
export class RuleRefusedError extends RuleInvalidError {
  static override readonly code: string = 'ERR_RULE_REFUSED';
}

/** RuleConflictError: a compare-and-swap write of a rule found the key at another revision than `ifRevision`. */
export class RuleConflictError extends BulwarkError {
  static readonly code = 'ERR_RULE_CONFLICT';
  /** The key's revision found (0: absent). */
  readonly revision: number;
  constructor(message: string, options?: BulwarkErrorOptions & { revision?: number }) {
    super(RuleConflictError.code, message, options);
    this.revision = options?.revision ?? 0;
  }
}

/**
 * FaultInjectedError: a fault injector (bulwark/policy `FaultInjector`, an operator's rehearsal of an
 * outage) failed the call on purpose, without running it; `status` is the HTTP status it answers with.
 * Guards count it as a failure, and it is retried by default: the rehearsal exercises them.
 */
export class FaultInjectedError extends BulwarkError {
  static readonly code = 'ERR_FAULT_INJECTED';
  /** The HTTP status the injected abort answers with. */
  readonly status: number | undefined;
  constructor(message = 'fault injected', options?: BulwarkErrorOptions & { status?: number }) {
    super(FaultInjectedError.code, message, options);
    this.status = options?.status;
  }
}

/** errorClasses lists every coded error class, for docs and tests. */
export const errorClasses = [
  BreakerOpenError,
  TimeoutError,
  BulkheadRejectedError,
  RetryBudgetExhaustedError,
  AbortedError,
  NotFoundError,
  RegistryUnavailableError,
  RegistryPendingError,
  RegistryDeniedError,
  WatchResyncError,
  RateLimitedError,
  OverloadedError,
  NoInstanceError,
  PeerError,
  ClosedError,
  InvalidResponseError,
  LoadError,
  UnsupportedVersionError,
  RuleInvalidError,
  RuleRefusedError,
  RuleConflictError,
  FaultInjectedError,
] as const;

/** isBulwarkError tells whether `err` is a BulwarkError, optionally with the given code. */
export function isBulwarkError(err: unknown, code?: string): err is BulwarkError {
  return err instanceof BulwarkError && (code === undefined || err.code === code);
}
