/**
 * Mechanics both breakers share: the last failure reasons, the cheap rejection error, the check of
 * `execute`'s task, the lazy warm-up of `admit()`, and the general (`options`-carrying) path of
 * `execute` built on tokens.
 */
import type { AdmissionToken } from '../core/admission.js';
import { AbortedError, BreakerOpenError, ClosedError, withoutStack } from '../core/errors.js';
import { neverAborted, type Task } from '../core/guard.js';
import type { Clock } from '../core/clock.js';
import { CoarseClock } from '../core/coarse-clock.js';
import { showValue } from '../core/validate.js';
import type { BreakerExecuteOptions } from './types.js';

/** How many failure reasons a breaker keeps for its rejection message (go-zero keeps 5). */
export const REASONS_KEPT = 5;
/** A reason longer than this is cut: a huge error message must not make every rejection huge. */
const REASON_MAX_CHARS = 200;

/** FailureReasons keeps the last `REASONS_KEPT` failure descriptions, oldest first. */
export class FailureReasons {
  private readonly ring: string[] = [];
  private at = 0;

  /** add records `err` as the newest reason. */
  add(err: unknown): void {
    const text = describe(err);
    if (this.ring.length < REASONS_KEPT) this.ring.push(text);
    else {
      this.ring[this.at] = text;
      this.at = (this.at + 1) % REASONS_KEPT;
    }
  }

  /** list answers the kept reasons, oldest first. */
  list(): string[] {
    return [...this.ring.slice(this.at), ...this.ring.slice(0, this.at)];
  }

  /** clear forgets every reason. */
  clear(): void {
    this.ring.length = 0;
    this.at = 0;
  }

  /** suffix renders the reasons for an error message ('' when there are none). */
  suffix(): string {
    const l = this.list();
    return l.length === 0 ? '' : `; last failures (oldest first): ${l.join(' | ')}`;
  }
}

function describe(err: unknown): string {
  let text: string;
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    text = `${err.name}${typeof code === 'string' || typeof code === 'number' ? ` [${code}]` : ''}: ${err.message}`;
  } else if (err === undefined) text = 'failure (no error given)';
  else {
    try {
      text = typeof err === 'string' ? err : String(err);
    } catch {
      text = Object.prototype.toString.call(err);
    }
  }
  text = text.replace(/\s+/g, ' ');
  return text.length > REASON_MAX_CHARS ? `${text.slice(0, REASON_MAX_CHARS - 1)}…` : text;
}

/**
 * openError builds the error a breaker rejects with: no stack trace (capturing one is most of the
 * cost of a rejection, and the rejecting frame says nothing), and `code`, `breaker` and `message`
 * read-only, because breakers hand the same instance to every call they reject until its content
 * changes (a new state, a new failure reason).
 */
export function openError(message: string, breaker: string): BreakerOpenError {
  const err = withoutStack(() => new BreakerOpenError(message, { breaker }));
  for (const key of ['message', 'code', 'breaker'] as const) {
    Object.defineProperty(err, key, { value: err[key], writable: false, configurable: false, enumerable: key !== 'message' });
  }
  return err;
}

/** How many admissions `primeAdmit` makes: V8 wants about 8 normal returns of a function before it
 * gives it feedback (`--interrupt-budget-factor-for-feedback-allocation`, 8 × its bytecode size). */
const PRIME_CALLS = 32;

/**
 * primeAdmit calls `admit()` of a throwaway healthy breaker a few times, so that a breaker whose
 * `admit()` throws from its first calls still throws cheaply. Each breaker class calls it once, from
 * its first constructor call (nothing runs when the module is imported: the package has no side effects).
 *
 * Why (measured with `--trace-opt`, `--trace-turbo-inlining` and `%GetOptimizationStatus`): V8
 * charges a function's tier-up budget when it *returns* (or loops), never when it throws. It gives a
 * function the feedback vector it needs to be inlined or optimised only once that budget reaches about
 * 8 normal returns. An SreBreaker with the defaults drops calls after its 7th admission, so in a
 * process where no breaker had been healthy for long, `admit()` stayed in the interpreter for good:
 * the caller's optimised code could not inline it, and each throw unwound an interpreted frame
 * (~520 ns against ~190 ns for a throw inlined into the caller's `try`). The clock is a private
 * CoarseClock (same class as the default, so the call sites stay monomorphic), stopped at once.
 */
export function primeAdmit(make: (clock: Clock) => { admit(): AdmissionToken }): void {
  const clock = new CoarseClock();
  try {
    const b = make(clock);
    for (let i = 0; i < PRIME_CALLS; i++) b.admit().release();
  } finally {
    void clock.close();
  }
}

/** InternalToken is the token the breakers hand out: core's AdmissionToken. */
export type InternalToken = AdmissionToken;

/**
 * GROUP_USED and GROUP_PLACED are where a BreakerGroup keeps, on each breaker it holds, when the
 * breaker was last handed out and when it was (re)placed in the group's order. Both breakers declare
 * them, so that grouped and ungrouped breakers share one object shape. @internal
 */
export const GROUP_USED: unique symbol = Symbol('bulwark.breakerGroup.used');
/** See GROUP_USED. @internal */
export const GROUP_PLACED: unique symbol = Symbol('bulwark.breakerGroup.placed');

/** badTask answers the rejection for an `execute` whose task is not a function (the caller's error, never counted). */
export function badTask(owner: string, fn: unknown): Promise<never> {
  return Promise.reject(new TypeError(`${owner}.execute: fn must be a function, got ${showValue(fn)}`));
}

/** closedError builds the error a closed breaker refuses calls with. */
export function closedError(breaker: string): ClosedError {
  return withoutStack(() => new ClosedError(`breaker "${breaker}" is closed`));
}

/** Admitter is what the shared execute path needs from a breaker. */
export interface Admitter {
  /** tryAdmit answers a token, or undefined when the breaker rejects the call (never throws). */
  tryAdmit(): InternalToken | undefined;
  /** readonly rejections: the error and the promise for a call the breaker just rejected. */
  readonly rejections: RejectionCache;
}

/**
 * RejectionCache keeps a breaker's rejection error and one promise rejected with it. While the
 * error stays the same (same state, same reasons), every rejected `execute` returns that same
 * promise, as a memoized promise would: creating a rejected promise costs ~1 µs in Node (the
 * unhandled-rejection bookkeeping), several times the breaker's own work. Like any shared promise,
 * it is reported as unhandled only if the first caller it went to leaves it unhandled.
 */
export class RejectionCache {
  private err: BreakerOpenError | ClosedError | undefined;
  private promise: Promise<never> | undefined;
  private closed = false;

  /** `message` builds the message of the next error, when the cached one was cleared. */
  constructor(
    private readonly breaker: string,
    private readonly message: () => string,
  ) {}

  /** error answers the current rejection error (a ClosedError once the breaker is closed). */
  error(): BreakerOpenError | ClosedError {
    const err = this.err;
    return err !== undefined ? err : this.build();
  }

  /** build makes the error (kept out of `error()` so that the hot path stays small enough to inline). */
  private build(): BreakerOpenError | ClosedError {
    return (this.err = this.closed ? closedError(this.breaker) : openError(this.message(), this.breaker));
  }

  /** rejected answers the promise rejected with the current error. */
  rejected(): Promise<never> {
    return (this.promise ??= Promise.reject(this.error()));
  }

  /** clear forgets the error and the promise (the state or the reasons changed). */
  clear(): void {
    if (this.closed) return;
    this.err = undefined;
    this.promise = undefined;
  }

  /** close makes every later rejection a ClosedError. */
  close(): void {
    this.err = undefined;
    this.promise = undefined;
    this.closed = true;
  }
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
