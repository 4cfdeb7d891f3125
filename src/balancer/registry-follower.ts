/**
 * RegistryFollower keeps one service's instance list in step with a Registry (or a RegistryCache):
 * it lists the service, then hands on its watch events; when the watch breaks (or says
 * `WatchResyncError`) it lists again and watches again after a jittered exponential backoff
 * (go-micro's registry cache: 100 ms doubling up to 10 s). A service without instances
 * (`NotFoundError`) is an empty list, not an error.
 *
 * No change between the listing and the watch is lost: the follower starts the watch, waits until the
 * registry says it is established (`WatchOptions.onReady`; an etcd watch lists, then watches from that
 * listing's revision + 1, asynchronously), and only then lists. Every change after `onReady` comes
 * through the watch, every change before it is in the listing; a change in both is applied twice,
 * which converges (events come in order after the listing, and each one states the instance's final
 * form or its removal).
 *
 * A Registry that never calls `onReady` (a third-party one written before the hook existed) is not
 * waited for forever: the watch counts as established at its first event, or when it ends or fails, or
 * after `readyWaitMs` (1 000 ms by default, as RegistryCache's first lookup), whichever comes first —
 * then the listing goes ahead, with the same window as before for such a registry. Waiting is the
 * right default: a first `ready()` that is up to a second late is better than a list that silently
 * misses an instance until the next resync.
 */
import { delay } from '../core/abort.js';
import { Backoff } from '../core/backoff.js';
import type { Clock } from '../core/clock.js';
import { ClosedError, NotFoundError, isBulwarkError } from '../core/errors.js';
import { finite } from '../core/validate.js';
import type { Registry, RegistryEvent, ServiceInstance } from '../registry/types.js';

/** Backoff between attempts after a failed listing or a broken watch (go-micro). */
export const followerDefaults = Object.freeze({ retryMinMs: 100, retryMaxMs: 10_000, closeWaitMs: 1_000, readyWaitMs: 1_000 });

/** FollowerOptions tunes a RegistryFollower. */
export interface FollowerOptions {
  /**
   * The longest the follower waits for a watch's `onReady` before it lists anyway (for a Registry that
   * never calls `onReady`). Defaults to 1 000.
   */
  readyWaitMs?: number;
}

/** FollowerHooks receive what the registry says. */
export interface FollowerHooks {
  /** A full listing of the service (on start and after every reconnect). */
  onList(instances: readonly ServiceInstance[]): void;
  /** One watch event of the service. */
  onEvent(event: RegistryEvent): void;
}

/** RegistryFollower follows one service of a registry until closed. */
export class RegistryFollower {
  private readonly abort = new AbortController();
  private loaded = false;
  private lastError: unknown = undefined;
  private waiters: { resolve: () => void; reject: (e: unknown) => void }[] = [];
  private readonly running: Promise<void>;
  private readonly readyWaitMs: number;

  constructor(
    private readonly registry: Registry,
    private readonly service: string,
    private readonly hooks: FollowerHooks,
    private readonly clock: Clock,
    private readonly random: () => number,
    options: FollowerOptions = {},
  ) {
    this.readyWaitMs = finite('RegistryFollower', 'readyWaitMs', options.readyWaitMs ?? followerDefaults.readyWaitMs, 0, 3_600_000);
    this.running = this.follow();
  }

  /**
   * ready resolves once the first listing has arrived (an empty service counts); it rejects with the
   * error of the first listing if that failed, while the follower keeps trying in the background.
   */
  ready(): Promise<void> {
    if (this.loaded) return Promise.resolve();
    if (this.lastError !== undefined) return Promise.reject(this.lastError);
    if (this.abort.signal.aborted) return Promise.reject(new ClosedError('closed before the first listing'));
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  /** close ends the watch; it waits for the loop to stop, but not longer than a listing may hang. */
  async close(): Promise<void> {
    if (this.abort.signal.aborted) return;
    this.abort.abort(new ClosedError('closed'));
    this.settle(new ClosedError('closed before the first listing'));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.running, new Promise<void>((resolve) => (timer = setTimeout(resolve, followerDefaults.closeWaitMs)))]);
    clearTimeout(timer);
  }

  private settle(error?: unknown): void {
    const ws = this.waiters;
    this.waiters = [];
    for (const w of ws) error === undefined ? w.resolve() : w.reject(error);
  }

  private async list(): Promise<void> {
    let instances: ServiceInstance[];
    try {
      instances = await this.registry.getService(this.service);
    } catch (err) {
      if (!isBulwarkError(err, NotFoundError.code)) throw err;
      instances = [];
    }
    if (this.abort.signal.aborted) return;
    this.hooks.onList(instances);
    if (!this.loaded) {
      this.loaded = true;
      this.lastError = undefined;
      this.settle();
    }
  }

  /** untilReady waits for `ready`, at most `readyWaitMs`, and not past `signal`. */
  private async untilReady(ready: Promise<void>, signal: AbortSignal): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let onAbort: (() => void) | undefined;
    const fallback = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.readyWaitMs);
      timer.unref();
      onAbort = resolve;
      signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      await Promise.race([ready, fallback]);
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort!);
    }
  }

  private async follow(): Promise<void> {
    const signal = this.abort.signal;
    const backoff = new Backoff({ initialMs: followerDefaults.retryMinMs, maxMs: followerDefaults.retryMaxMs, random: this.random });
    while (!signal.aborted) {
      const attempt = new AbortController();
      const onAbort = () => attempt.abort(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      let iterator: AsyncIterator<RegistryEvent> | undefined;
      let established!: () => void;
      const ready = new Promise<void>((resolve) => (established = resolve));
      try {
        // Watch, wait until the watch is established, then list: no change falls between the two.
        iterator = this.registry.watch({ service: this.service, signal: attempt.signal, onReady: () => established() })[Symbol.asyncIterator]();
        const first = iterator.next();
        first.then(established, established); // an event, an end or a failure: the watch is as ready as it gets
        await this.untilReady(ready, attempt.signal);
        if (signal.aborted) break;
        await this.list();
        // The backoff starts over only once a watch has worked (delivered an event, or stayed up a
        // while): a registry (or cache) that answers listings but breaks every watch at once must
        // not be asked again every few milliseconds.
        const since = this.clock.now();
        for (let r = await first; !r.done; r = await iterator.next()) {
          if (signal.aborted) break;
          backoff.reset();
          this.hooks.onEvent(r.value);
        }
        if (this.clock.now() - since >= followerDefaults.retryMaxMs) backoff.reset();
      } catch (err) {
        if (signal.aborted) break;
        if (!this.loaded && this.lastError === undefined) {
          this.lastError = err;
          this.settle(err);
        }
        if (isBulwarkError(err, ClosedError.code)) break; // the registry was closed: nothing more will come
      } finally {
        signal.removeEventListener('abort', onAbort);
        attempt.abort();
        iterator?.return?.()?.catch(() => {});
      }
      if (signal.aborted) break;
      await delay(backoff.next(), signal, { unref: true, clock: this.clock }).catch(() => {});
    }
  }
}
