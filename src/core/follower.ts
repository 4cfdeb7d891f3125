/**
 * Follower keeps a view in step with anything that can be listed and watched (a registry service, a
 * cache's view of one): watch → wait until the watch is established → list → apply events, and when
 * the watch ends or fails (or a listing fails), wait a backoff and start over, listing again. The very
 * first listing is also taken at once, beside the watch, so that `ready()` never waits for a watch to
 * be established; it is taken again once the watch is (below).
 *
 * No change between the listing and the watch is lost: the watch is opened first, and the listing is
 * taken only once the source says the watch is established (`onReady`; an etcd watch lists, then
 * watches from that listing's revision + 1, asynchronously). Every change after `onReady` comes through
 * the watch, every change before it is in the listing; one in both is applied twice, which converges
 * because events come in order and each states its instance's final form or its removal.
 *
 * A source that never calls `onReady` is not waited for forever: the watch counts as established at
 * its first event, when it ends or fails, or after `readyWaitMs`, whichever comes first.
 *
 * The backoff (core's `Backoff`, go-micro's registry cache waits 100 ms doubling up to 10 s) starts
 * over only once a watch has worked — delivered an event, or stayed up for `backoff.maxMs` — so a
 * source that answers listings but breaks every watch at once is not asked again every few
 * milliseconds. Every timer is set through the injected clock. Imports only core.
 */
import { Backoff, backoffDefaults, type BackoffOptions } from './backoff.js';
import { systemClock, type Clock, type TimerHandle } from './clock.js';
import { raceSignal } from './abort.js';
import { AbortedError, ClosedError, isBulwarkError } from './errors.js';
import { clockOption, finite, fn, options as checkOptions, type OptionKeys } from './validate.js';

/** The keys of FollowerOptions, all of them: any other is refused (see `options`). */
const FOLLOWER_KEYS = {
  source: true,
  onList: true,
  onEvent: true,
  onEstablished: true,
  onBroken: true,
  isFinal: true,
  backoff: true,
  readyWaitMs: true,
  clock: true,
  random: true,
  name: true,
} as const satisfies OptionKeys<FollowerOptions<unknown, unknown>>;

/** FollowerSource is what a Follower follows: a watch and, usually, a listing. */
export interface FollowerSource<L, E> {
  /** watch opens a watch that must end when `signal` aborts (close() waits for it); it calls `onReady` once it is established. */
  watch(signal: AbortSignal, onReady: () => void): AsyncIterable<E>;
  /** list reads the whole current state; without it, the follower only watches (someone else lists). */
  list?(signal: AbortSignal): Promise<L>;
}

/** FollowerOptions configures a Follower. */
export interface FollowerOptions<L, E> {
  /** What to follow. Required. */
  source: FollowerSource<L, E>;
  /** Receives every listing (the first, and one after each reconnect). Defaults to none. */
  onList?: (listing: L) => void;
  /** Receives every watch event. Required. */
  onEvent: (event: E) => void;
  /** Called each time a watch is established, before it is listed; `first` is true the first time. Defaults to none. */
  onEstablished?: (first: boolean) => void;
  /** Called when a watch ends or fails, or a listing fails (`error` is undefined when the watch just ended). Defaults to none. */
  onBroken?: (error: unknown) => void;
  /** Tells a failure after which nothing more will come (the follower stops). Defaults to `ClosedError`. */
  isFinal?: (error: unknown) => boolean;
  /** Waits between attempts. Defaults to `{ initialMs: 100, maxMs: 10 000, multiplier: 2, jitter: 'full' }`. */
  backoff?: BackoffOptions;
  /** The longest wait for a watch's `onReady` before it counts as established (and is listed again). Defaults to 1 000. */
  readyWaitMs?: number;
  /** The clock every timer is set on. Defaults to `systemClock`. */
  clock?: Clock;
  /** Uniform random numbers in [0, 1), for the backoff's jitter. Defaults to `Math.random`. */
  random?: () => number;
  /** Names the follower in errors. Defaults to `Follower`. */
  name?: string;
}

/** Defaults for FollowerOptions. */
export const followerDefaults = Object.freeze({
  backoff: Object.freeze({ ...backoffDefaults, initialMs: 100, maxMs: 10_000 }) as Readonly<Required<Omit<BackoffOptions, 'random'>>>,
  readyWaitMs: 1_000,
});

/** FollowerStats are a Follower's counters. */
export interface FollowerStats {
  /** Watches opened. */
  watches: number;
  /** Listings taken. */
  listings: number;
  /** Events handed on. */
  events: number;
  /** Watches that ended or failed, and listings that failed. */
  breaks: number;
  /** True while a watch is established and being read. */
  watching: boolean;
}

interface Waiter {
  resolve: () => void;
  reject: (err: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

const ABORTED: unique symbol = Symbol('aborted');

/** Follower follows one source until closed; see the module comment. */
export class Follower<L, E> {
  private readonly source: FollowerSource<L, E>;
  private readonly hooks: FollowerOptions<L, E>;
  private readonly isFinal: (error: unknown) => boolean;
  private readonly backoff: Backoff;
  private readonly clock: Clock;
  private readonly readyWaitMs: number;
  private readonly name: string;
  private readonly abort = new AbortController();
  private loaded = false;
  private firstError: unknown = undefined;
  private waiters: Waiter[] = [];
  /** The current attempt's controller: aborting it ends the attempt's watch and listing. */
  private attempt: AbortController | undefined;
  private readonly running: Promise<void>;
  private readonly counters = { watches: 0, listings: 0, events: 0, breaks: 0, watching: false };

  constructor(options: FollowerOptions<L, E>) {
    const o = checkOptions('Follower', options, FOLLOWER_KEYS);
    this.name = typeof o.name === 'string' ? o.name : 'Follower';
    const s = o.source as Partial<FollowerSource<L, E>> | undefined;
    if (s === null || typeof s !== 'object' || typeof s.watch !== 'function' || (s.list !== undefined && typeof s.list !== 'function')) {
      throw new TypeError(`${this.name}: source must have watch() and optionally list()`);
    }
    this.source = s as FollowerSource<L, E>;
    fn(this.name, 'onEvent', o.onEvent);
    for (const k of ['onList', 'onEstablished', 'onBroken', 'isFinal'] as const) if (o[k] !== undefined) fn(this.name, k, o[k]);
    this.hooks = o as FollowerOptions<L, E>;
    this.isFinal = o.isFinal ?? ((err) => isBulwarkError(err, ClosedError.code));
    this.clock = clockOption(this.name, o.clock, systemClock);
    this.readyWaitMs = finite(this.name, 'readyWaitMs', o.readyWaitMs ?? followerDefaults.readyWaitMs, 0, 3_600_000);
    const b = checkOptions(`${this.name}.backoff`, o.backoff);
    this.backoff = new Backoff({ ...followerDefaults.backoff, ...b, random: o.random ?? b.random });
    this.running = this.follow();
  }

  /**
   * ready resolves once the first listing has been handed on (once the first watch is established, for a
   * source without `list`); it rejects with the first failure while the follower keeps trying, with
   * `ClosedError` after close(), and with `AbortedError` when `signal` aborts first.
   */
  ready(options?: { signal?: AbortSignal | undefined }): Promise<void> {
    if (this.loaded) return Promise.resolve();
    if (this.firstError !== undefined) return Promise.reject(this.firstError);
    if (this.abort.signal.aborted) return Promise.reject(new ClosedError(`${this.name} closed before its first listing`));
    const signal = options?.signal;
    if (signal?.aborted) return Promise.reject(new AbortedError(`${this.name}.ready aborted`, { cause: signal.reason }));
    return new Promise((resolve, reject) => {
      const w: Waiter = { resolve, reject, signal, onAbort: undefined };
      if (signal !== undefined) {
        w.onAbort = () => {
          this.waiters = this.waiters.filter((x) => x !== w);
          reject(new AbortedError(`${this.name}.ready aborted`, { cause: signal.reason }));
        };
        signal.addEventListener('abort', w.onAbort, { once: true });
      }
      this.waiters.push(w);
    });
  }

  /** stats answers a snapshot of the counters. */
  stats(): FollowerStats {
    return { ...this.counters };
  }

  /** close ends the watch and stops the loop (a listing in flight is left to finish on its own); idempotent. */
  async close(): Promise<void> {
    if (this.abort.signal.aborted) return this.running;
    this.abort.abort(new ClosedError(`${this.name} closed`));
    this.attempt?.abort(this.abort.signal.reason);
    this.settle(new ClosedError(`${this.name} closed before its first listing`));
    await this.running;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  private settle(error?: unknown): void {
    const ws = this.waiters;
    this.waiters = [];
    for (const w of ws) {
      if (w.onAbort !== undefined) w.signal!.removeEventListener('abort', w.onAbort);
      if (error === undefined) w.resolve();
      else w.reject(error);
    }
  }

  private loadedNow(): void {
    if (this.loaded) return;
    this.loaded = true;
    this.firstError = undefined;
    this.settle();
  }

  /** wait resolves after `ms` of clock time, when `until` settles, or at close — and clears its timer and listener. */
  private wait(ms: number, until?: Promise<unknown>): Promise<void> {
    const signal = this.abort.signal;
    if (signal.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = () => {
        this.clock.clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer: TimerHandle = this.clock.setTimeout(done, ms);
      timer.unref();
      signal.addEventListener('abort', done, { once: true });
      until?.then(done, done);
    });
  }

  /** listOnce lists the source and hands the listing on; ABORTED when the attempt or the follower ended first. */
  private async listOnce(attemptSignal: AbortSignal): Promise<void | typeof ABORTED> {
    const listing = await raceSignal(this.source.list!(attemptSignal), attemptSignal, (): typeof ABORTED => ABORTED);
    if (listing === ABORTED || this.abort.signal.aborted) return ABORTED;
    this.counters.listings++;
    this.hooks.onList?.(listing);
  }

  private async follow(): Promise<void> {
    const signal = this.abort.signal;
    for (let first = true; !signal.aborted; first = false) {
      // close() aborts the current attempt directly: no listener per attempt (each costs the GC on every scavenge)
      const attempt = (this.attempt = new AbortController());
      let iterator: AsyncIterator<E> | undefined;
      let failure: unknown;
      try {
        let isEstablished = false;
        let established!: () => void;
        const ready = new Promise<void>((resolve) => (established = resolve));
        this.counters.watches++;
        const watch = this.source.watch(attempt.signal, () => {
          isEstablished = true;
          established();
        });
        iterator = watch[Symbol.asyncIterator]();
        const firstNext = iterator.next();
        let broken = false; // the watch ended or failed before its first event
        firstNext.then(
          (r) => ((broken = r.done === true), established()),
          () => ((broken = true), established()),
        ); // an event, an end or a failure: as established as it gets
        // The first listing does not wait for the watch: `ready()` answers at once, whatever the source
        // (one that never calls onReady would cost every first lookup readyWaitMs). Taken before the watch
        // was established, it may miss a change made in between, so it is taken again once it is — unless
        // the watch broke meanwhile: the next attempt lists anyway.
        const early = first && !isEstablished && this.source.list !== undefined;
        if (early) {
          if ((await this.listOnce(attempt.signal)) === ABORTED) break;
          this.loadedNow();
        }
        await this.wait(this.readyWaitMs, ready);
        if (signal.aborted) break;
        this.hooks.onEstablished?.(first);
        if (this.source.list !== undefined && !(early && broken) && (await this.listOnce(attempt.signal)) === ABORTED) break;
        this.loadedNow();
        const since = this.clock.now();
        this.counters.watching = true;
        // the source ends the watch when its signal aborts (close() aborts it): no race per event
        for (let r = await firstNext; !r.done; r = await iterator.next()) {
          if (signal.aborted) break;
          this.backoff.reset();
          this.counters.events++;
          this.hooks.onEvent(r.value);
        }
        this.counters.watching = false;
        if (this.clock.now() - since >= this.backoff.maxMs) this.backoff.reset();
      } catch (err) {
        this.counters.watching = false;
        if (signal.aborted) break;
        failure = err;
        if (!this.loaded && this.firstError === undefined) {
          this.firstError = err;
          this.settle(err);
        }
      } finally {
        this.attempt = undefined;
        attempt.abort();
        iterator?.return?.()?.catch(noop);
      }
      if (signal.aborted) break;
      this.counters.breaks++;
      this.hooks.onBroken?.(failure);
      if (failure !== undefined && this.isFinal(failure)) break; // nothing more will come
      await this.wait(this.backoff.next());
    }
    this.counters.watching = false;
  }
}

function noop(): void {}
