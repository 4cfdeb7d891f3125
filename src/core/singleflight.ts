/**
 * SingleFlight runs at most one call per key at a time; every caller that asks for the key while the
 * call is in flight shares its result or its error (groupcache `singleflight`, go-micro registry cache).
 *
 * Beyond groupcache's version:
 * - a leader that throws synchronously rejects every waiter with that error;
 * - a leader that never settles is cut off after `timeoutMs`: every waiter gets `TimeoutError`, the
 *   shared call's signal is aborted and the key is free for a fresh call;
 * - a caller's own `AbortSignal` ends only that caller's wait; when the last waiter has left, the shared
 *   call's signal is aborted and the key is freed, so a later caller never joins an abandoned call.
 */
import { systemClock, type Clock, type TimerHandle } from './clock.js';
import { AbortedError, TimeoutError } from './errors.js';
import { clockOption, integer, options as checkOptions, type OptionKeys } from './validate.js';

/** The keys of SingleFlightOptions, all of them: any other is refused (see `options`). */
const SINGLE_FLIGHT_KEYS = { timeoutMs: true, clock: true } as const satisfies OptionKeys<SingleFlightOptions>;

/** SingleFlightOptions configures a SingleFlight. */
export interface SingleFlightOptions {
  /** How long a shared call may run before its waiters get `TimeoutError`; 0 means no limit. Defaults to 30 000. */
  timeoutMs?: number;
  /** The clock whose timers cut off a call that runs past `timeoutMs`. Defaults to `systemClock`. */
  clock?: Clock;
}

/** Defaults for SingleFlightOptions. */
export const singleFlightDefaults = Object.freeze({ timeoutMs: 30_000 });

/** The function a flight runs; `signal` aborts when the flight times out or every waiter has left. */
export type FlightFn<V> = (signal: AbortSignal) => V | PromiseLike<V>;

interface Flight<V> {
  readonly promise: Promise<V>;
  readonly controller: AbortController;
  waiters: number;
  timer: TimerHandle | undefined;
}

/** SingleFlight deduplicates concurrent calls by key. */
export class SingleFlight<K, V> {
  private readonly flights = new Map<K, Flight<V>>();
  private readonly timeoutMs: number;
  private readonly clock: Clock;

  constructor(options?: SingleFlightOptions) {
    const o = checkOptions('SingleFlight', options, SINGLE_FLIGHT_KEYS);
    this.timeoutMs = integer('SingleFlight', 'timeoutMs', o.timeoutMs ?? singleFlightDefaults.timeoutMs, 0);
    this.clock = clockOption('SingleFlight', o.clock, systemClock);
  }

  /** size is the number of calls in flight. */
  get size(): number {
    return this.flights.size;
  }

  /** has tells whether a call for `key` is in flight (a caller now would share it). */
  has(key: K): boolean {
    return this.flights.has(key);
  }

  /**
   * do runs `fn` for `key` unless a call for `key` is already in flight, in which case it waits for that
   * call. All callers get the same value or the same error. `signal` ends only this caller's wait
   * (rejecting with `AbortedError`).
   */
  do(key: K, fn: FlightFn<V>, options?: { signal?: AbortSignal | undefined }): Promise<V> {
    const signal = options?.signal;
    if (signal?.aborted) return Promise.reject(new AbortedError('wait aborted', { cause: signal.reason }));
    let flight = this.flights.get(key);
    if (flight === undefined) flight = this.start(key, fn);
    flight.waiters++;
    if (signal === undefined) return flight.promise;
    return this.waitWithSignal(key, flight, signal);
  }

  /** forget drops the in-flight call for `key`: the next caller starts a fresh one. Current waiters still get its result. */
  forget(key: K): void {
    this.flights.delete(key);
  }

  private start(key: K, fn: FlightFn<V>): Flight<V> {
    const controller = new AbortController();
    let run: Promise<V>;
    try {
      run = Promise.resolve(fn(controller.signal));
    } catch (err) {
      run = Promise.reject(err);
    }
    let timer: TimerHandle | undefined;
    let settled: Promise<V> = run;
    const clock = this.clock;
    if (this.timeoutMs > 0) {
      const timeoutMs = this.timeoutMs;
      settled = new Promise<V>((resolve, reject) => {
        timer = clock.setTimeout(() => {
          const err = new TimeoutError(`shared call did not settle within ${timeoutMs} ms`);
          controller.abort(err);
          reject(err);
        }, timeoutMs);
        run.then(resolve, reject);
      });
    }
    const flight: Flight<V> = {
      promise: settled.finally(() => {
        clock.clearTimeout(timer);
        if (this.flights.get(key) === flight) this.flights.delete(key);
      }),
      controller,
      waiters: 0,
      timer,
    };
    this.flights.set(key, flight);
    // Waiters that abort leave this promise unobserved: mark it handled so that its rejection is not "unhandled".
    flight.promise.catch(noop);
    return flight;
  }

  private waitWithSignal(key: K, flight: Flight<V>, signal: AbortSignal): Promise<V> {
    return new Promise<V>((resolve, reject) => {
      const onAbort = () => {
        flight.waiters--;
        if (flight.waiters === 0) {
          this.clock.clearTimeout(flight.timer);
          flight.controller.abort(new AbortedError('every waiter left'));
          if (this.flights.get(key) === flight) this.flights.delete(key);
        }
        reject(new AbortedError('wait aborted', { cause: signal.reason }));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      flight.promise.then(
        (v) => {
          signal.removeEventListener('abort', onAbort);
          resolve(v);
        },
        (err: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(err);
        },
      );
    });
  }
}

function noop(): void {}
