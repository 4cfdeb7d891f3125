/**
 * The error a breaker rejects with, built cheaply (no stack) and cached with one rejected promise
 * while it stays the same.
 */
import { BreakerOpenError, ClosedError, withoutStack } from '../core/errors.js';

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

/** closedError builds the error a closed breaker refuses calls with. */
export function closedError(breaker: string): ClosedError {
  return withoutStack(() => new ClosedError(`breaker "${breaker}" is closed`));
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
