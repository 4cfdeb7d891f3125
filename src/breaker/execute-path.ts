/**
 * The path of a breaker's `execute` built on tokens: the check of its task, the general
 * (`options`-carrying) path, and how a call's outcome is reported on its token.
 */
import type { AdmissionToken } from '../core/admission.js';
import { AbortedError, BreakerOpenError } from '../core/errors.js';
import { neverAborted, type Task } from '../core/guard.js';
import { showValue } from '../core/validate.js';
import type { RejectionCache } from './rejection-cache.js';
import type { BreakerExecuteOptions } from './types.js';

/** InternalToken is the token the breakers hand out: core's AdmissionToken. */
export type InternalToken = AdmissionToken;

/** badTask answers the rejection for an `execute` whose task is not a function (the caller's error, never counted). */
export function badTask(owner: string, fn: unknown): Promise<never> {
  return Promise.reject(new TypeError(`${owner}.execute: fn must be a function, got ${showValue(fn)}`));
}

/** Admitter is what the execute path needs from a breaker. */
export interface Admitter {
  /** tryAdmit answers a token, or undefined when the breaker rejects the call (never throws). */
  tryAdmit(): InternalToken | undefined;
  /** readonly rejections: the error and the promise for a call the breaker just rejected. */
  readonly rejections: RejectionCache;
}

/** isTimeout tells whether an abort reason is a deadline (that counts) rather than a caller giving up. */
export function isTimeout(reason: unknown): boolean {
  if (reason === null || typeof reason !== 'object') return false;
  const r = reason as { name?: unknown; code?: unknown };
  return r.name === 'TimeoutError' || r.code === 'ERR_TIMEOUT';
}

/**
 * settleFailure reports a failed call: not at all when the caller's own signal aborted it (the
 * dependency is not at fault; a deadline still counts), as a success when `isFailure` says the error
 * is acceptable, else as a failure.
 */
export function settleFailure(token: InternalToken, err: unknown, signal: AbortSignal | undefined, isFailure: ((err: unknown) => boolean) | undefined): void {
  if (signal !== undefined && signal.aborted && !isTimeout(signal.reason)) {
    token.release();
    return;
  }
  let counts = true;
  if (isFailure !== undefined) {
    try {
      counts = isFailure(err) !== false;
    } catch {
      counts = true; // a broken predicate must not hide failures
    }
  }
  if (counts) token.failure(err);
  else token.success();
}

/** executeWithOptions is the general path of `execute`, used when the call carries options. */
export function executeWithOptions<T>(b: Admitter, fn: Task<T>, options: BreakerExecuteOptions<T>): Promise<T> {
  const signal = options.signal;
  if (signal !== undefined && signal.aborted) return rejectAborted(signal);
  const token = b.tryAdmit();
  if (token === undefined) {
    const fallback = options.fallback;
    const err = b.rejections.error();
    if (fallback === undefined || !(err instanceof BreakerOpenError)) return b.rejections.rejected();
    try {
      return Promise.resolve(fallback(err));
    } catch (err) {
      return Promise.reject(err);
    }
  }
  return runWithToken(token, fn, signal, options.isFailure);
}

/** rejectAborted answers the rejection for a call whose signal aborted before it was admitted. */
export function rejectAborted(signal: AbortSignal): Promise<never> {
  return Promise.reject(new AbortedError('operation aborted before the breaker admitted it', { cause: signal.reason }));
}

/** runWithToken runs `fn` for a call already admitted with `token`, and reports its outcome. */
export async function runWithToken<T>(
  token: InternalToken,
  fn: Task<T>,
  signal: AbortSignal | undefined,
  isFailure: ((err: unknown) => boolean) | undefined,
): Promise<T> {
  let value: T;
  try {
    value = await fn(signal ?? neverAborted);
  } catch (err) {
    settleFailure(token, err, signal, isFailure);
    throw err;
  }
  token.success();
  return value;
}

/** isPromiseLike tells whether `x` has a callable `then`. */
export function isPromiseLike<T>(x: unknown): x is PromiseLike<T> {
  return x !== null && (typeof x === 'object' || typeof x === 'function') && typeof (x as { then?: unknown }).then === 'function';
}
