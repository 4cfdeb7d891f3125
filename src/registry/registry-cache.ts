/**
 * RegistryCache wraps a Registry with go-micro's registry cache semantics (go-micro `registry/cache`):
 *
 * 1. Fresh entry (service TTL and every node TTL valid): answered from memory — a frozen array of frozen
 *    instances, shared by every caller (typed read-only: copy it before sorting).
 * 2. A lookup for this service already in flight: join it (go-micro issue 2821: callers arriving during
 *    the first lookup were throttled and told "not found" for a service that exists).
 * 3. Expired, and the last failed (or empty) attempt was less than `minRetryIntervalMs` ago: the stale
 *    entry if there is one, else fail fast without touching the registry — `RegistryUnavailableError` when
 *    the last attempt failed, `NotFoundError` when the registry said the service has no instances.
 * 4. Otherwise one singleflight call per service. Success refreshes the entry and clears the throttle
 *    (go-micro's README promises it; its code keeps the window). Failure answers the stale entry if there
 *    is one, else `RegistryUnavailableError`. An empty answer never replaces a non-empty list; only a
 *    confirmed delete event empties it.
 *
 * A watch per looked-up service (core's Follower, opened before its first lookup) applies create /
 * update / delete as they come. A cold lookup does not wait for the watch: it lists at once, and when the
 * watch was not yet established as the listing began (its `onReady` had not been called), the service is
 * listed once more as soon as the watch is — so a change that fell between the listing and the watch is
 * picked up, and a registry that never calls `onReady` (it is optional) costs a cold lookup nothing (its
 * watch counts as established at its first event, or after READY_WAIT_MS). Events that arrive while a
 * lookup of the service is in flight are applied again on top of its answer (the listing may predate
 * them), so a slow listing never undoes a newer event. A broken watch starts again after the
 * `watchBackoff`, and the service is listed again once the new watch is established.
 * `watch({ service })` is served from this view (one registry watch per service, however many followers). Services nobody asked for or
 * watched within `idleMs` lose their entry and their watch. With `snapshotPath`, the last-known-good
 * view is written (debounced, atomically) and read at start, served as stale until the registry answers.
 */
import { raceSignal } from '../core/abort.js';
import { Backoff, BACKOFF_KEYS } from '../core/backoff.js';
import type { Clock, TimerHandle } from '../core/clock.js';
import { getDefaultCoarseClock } from '../core/coarse-clock.js';
import { AbortedError, ClosedError, NotFoundError, RegistryUnavailableError, WatchResyncError } from '../core/errors.js';
import { registryChangeChannel } from '../core/diagnostics.js';
import { Emitter, type Disposer } from '../core/events.js';
import { Follower, followerDefaults } from '../core/follower.js';
import { SingleFlight } from '../core/singleflight.js';
import { clockOption, fn, integer, options as checkOptions, type OptionKeys } from '../core/validate.js';
import { ServiceFanout } from './cache-fanout.js';
import { readSnapshot, SnapshotWriter } from './snapshot.js';
import type {
  CallOptions,
  RegisterOptions,
  Registry,
  RegistryCacheOptions,
  RegistryCacheStats,
  RegistryEvent,
  ServiceChange,
  ServiceInstance,
  WatchOptions,
} from './types.js';
import { checkName } from './validate.js';
import type { MetricsDescription } from '../core/metrics-description.js';
import { entriesFromSnapshot, throttledError, type Entry, type Throttle } from './cache-entry.js';
import { freezeList, frozenInstance, keepIdentity } from './frozen-instances.js';
import { ended, passThroughWatch } from './pass-through-watch.js';
import { replay, serviceChange } from './service-changes.js';

/** The keys of RegistryCacheOptions, all of them: any other is refused (see `options`). */
const REGISTRY_CACHE_KEYS = {
  ttlMs: true,
  minRetryIntervalMs: true,
  idleMs: true,
  maxServices: true,
  watch: true,
  watchBackoff: true,
  watchQueueSize: true,
  snapshotPath: true,
  snapshotDebounceMs: true,
  clock: true,
  random: true,
  onWarning: true,
  closeRegistry: true,
} as const satisfies OptionKeys<RegistryCacheOptions>;

/** Defaults for RegistryCacheOptions. */
export const registryCacheDefaults = Object.freeze({
  ttlMs: 60_000,
  minRetryIntervalMs: 5_000,
  idleMs: 600_000,
  maxServices: 10_000,
  watch: true,
  watchBackoff: followerDefaults.backoff,
  watchQueueSize: 1_024,
  snapshotDebounceMs: 1_000,
  closeRegistry: false,
});

/** defaultWarn is RegistryCache's `onWarning` default: a process warning with code BULWARK_REGISTRY_CACHE. */
function defaultWarn(message: string): void {
  process.emitWarning(message, { code: 'BULWARK_REGISTRY_CACHE' });
}

/**
 * When a watch whose registry never calls `onReady` counts as established (unless an event or its end
 * comes first): the lookup that listed before it is then listed again. Lookups never wait for it.
 */
const READY_WAIT_MS = 1_000;

type CacheWatch = Follower<never, RegistryEvent>;

const EMPTY: readonly ServiceInstance[] = Object.freeze([]);
/** The most watch events kept for one lookup in flight; past it the listing is not trusted over the events. */
const MAX_DURING = 10_000;

/**
 * RegistryCache is a caching Registry; see the module comment for how getService answers.
 *
 * getService (and peek) are cached, and `watch({ service })` is served from the cache's view of the
 * service. register, deregister, listServices and a watch of every service pass straight to the wrapped
 * registry on every call: a registration is not written into the cache (a watched service sees it when
 * its watch event arrives), listServices asks each time. After close() they refuse (ClosedError; watch
 * yields nothing) and watches handed out earlier end. close() leaves the wrapped registry open unless `closeRegistry` is set: the
 * application that made the registry usually uses it directly too, and closes it after the cache.
 */
export class RegistryCache implements Registry {
  private readonly entries = new Map<string, Entry>();
  private readonly throttles = new Map<string, Throttle>();
  private readonly watches = new Map<string, CacheWatch>();
  private readonly flights: SingleFlight<string, readonly ServiceInstance[]>;
  /**
   * The watch events of each service applied while its registry lookup is in flight. The listing may
   * have been taken before any of them, so they are applied again on top of it: a listing never undoes
   * an event. `undefined` in the array's place: more than MAX_DURING arrived.
   */
  private readonly during = new Map<string, RegistryEvent[] | undefined>();
  /** Services whose current watch has called `onReady` (set at the call itself, not a turn later). */
  private readonly readySeen = new Set<string>();
  /** Services listed while their watch was not established yet: listed again once it is. */
  private readonly listedEarly = new Set<string>();
  private readonly changes = new Emitter<ServiceChange>();
  private readonly fanout: ServiceFanout;
  private readonly clock: Clock;
  private readonly ttlMs: number;
  private readonly minRetryMs: number;
  private readonly idleMs: number;
  private readonly maxServices: number;
  private readonly watchEnabled: boolean;
  private readonly warn: (message: string) => void;
  private readonly snapshot: SnapshotWriter | undefined;
  private readonly watchBackoff: RegistryCacheOptions['watchBackoff'];
  private readonly random: () => number;
  private readonly sweepTimer: TimerHandle;
  private closed = false;
  private readonly closeRegistry: boolean;
  /** Aborted by close(): ends the watches handed out by watch(). */
  private readonly closing = new AbortController();
  private readonly counters = { hits: 0, misses: 0, stale: 0, registryCalls: 0, throttled: 0, watchReconnects: 0, watchEvents: 0 };

  constructor(
    private readonly registry: Registry,
    options?: RegistryCacheOptions,
  ) {
    if (registry === null || typeof registry !== 'object' || typeof registry.getService !== 'function') {
      throw new TypeError(`RegistryCache: registry must implement Registry, got ${registry === null ? 'null' : typeof registry}`);
    }
    const o = checkOptions('RegistryCache', options, REGISTRY_CACHE_KEYS);
    const d = registryCacheDefaults;
    this.clock = clockOption('RegistryCache', o.clock, getDefaultCoarseClock());
    this.flights = new SingleFlight({ clock: this.clock });
    this.ttlMs = integer('RegistryCache', 'ttlMs', o.ttlMs ?? d.ttlMs, 1);
    this.minRetryMs = integer('RegistryCache', 'minRetryIntervalMs', o.minRetryIntervalMs ?? d.minRetryIntervalMs, 0);
    this.idleMs = integer('RegistryCache', 'idleMs', o.idleMs ?? d.idleMs, 1);
    this.maxServices = integer('RegistryCache', 'maxServices', o.maxServices ?? d.maxServices, 1);
    if (o.watch !== undefined && typeof o.watch !== 'boolean') throw new TypeError(`RegistryCache: watch must be a boolean, got ${String(o.watch)}`);
    this.watchEnabled = o.watch ?? d.watch;
    if (o.closeRegistry !== undefined && typeof o.closeRegistry !== 'boolean') {
      throw new TypeError(`RegistryCache: closeRegistry must be a boolean, got ${String(o.closeRegistry)}`);
    }
    this.closeRegistry = o.closeRegistry ?? d.closeRegistry;
    this.random = o.random === undefined ? Math.random : fn('RegistryCache', 'random', o.random);
    this.watchBackoff = { ...d.watchBackoff, ...checkOptions('RegistryCache.watchBackoff', o.watchBackoff, BACKOFF_KEYS) };
    new Backoff({ ...this.watchBackoff, random: this.random }); // throws on a bad watchBackoff, naming it
    this.fanout = new ServiceFanout(integer('RegistryCache', 'watchQueueSize', o.watchQueueSize ?? d.watchQueueSize, 1));
    this.warn = o.onWarning === undefined ? defaultWarn : fn('RegistryCache', 'onWarning', o.onWarning);
    if (o.snapshotPath !== undefined && (typeof o.snapshotPath !== 'string' || o.snapshotPath.length === 0)) {
      throw new TypeError(`RegistryCache: snapshotPath must be a non-empty string, got ${JSON.stringify(o.snapshotPath)}`);
    }
    const snapshotDebounceMs = integer('RegistryCache', 'snapshotDebounceMs', o.snapshotDebounceMs ?? d.snapshotDebounceMs, 0);
    if (o.snapshotPath !== undefined) {
      this.loadSnapshot(o.snapshotPath);
      this.snapshot = new SnapshotWriter(o.snapshotPath, snapshotDebounceMs, () => this.liveServices(), this.warn, this.clock);
    }
    this.sweepTimer = this.clock.setInterval(() => this.sweep(), Math.max(1000, Math.min(60_000, this.idleMs / 2)));
    this.sweepTimer.unref();
  }

  /**
   * onChange calls `listener` each time a cached service's instances are replaced (a registry answer or a
   * watch event), e.g. to rebuild a hash ring. Returns the disposer.
   */
  onChange(listener: (change: ServiceChange) => void): Disposer {
    return this.changes.on(listener);
  }

  /**
   * describeMetrics answers the cache's families (`registry_cache_…`: lookups by how they were answered,
   * registry calls, watches, and per service its instances and staleness), read from its stats at
   * scrape time.
   */
  describeMetrics(): MetricsDescription {
    const counter = (name: string, help: string) => ({ name, type: 'counter' as const, help, labelNames: [] });
    const gauge = (name: string, help: string, labelNames: string[] = []) => ({ name, type: 'gauge' as const, help, labelNames });
    return {
      kind: 'RegistryCache',
      families: [
        counter('registry_cache_hits_total', 'Lookups a RegistryCache answered from a fresh entry.'),
        counter('registry_cache_misses_total', 'Lookups that found no fresh entry.'),
        counter('registry_cache_stale_answers_total', 'Lookups answered with a stale entry (throttled, or the registry failed or answered empty).'),
        counter('registry_cache_throttled_total', 'Lookups answered without asking the registry because the service was throttled.'),
        counter('registry_cache_registry_calls_total', 'Calls the RegistryCache made to the registry.'),
        counter('registry_cache_watch_reconnects_total', 'Registry watches started again after they failed or ended.'),
        counter('registry_cache_watch_events_total', 'Registry watch events applied.'),
        gauge('registry_cache_services', 'Services cached now.'),
        gauge('registry_cache_watches', 'Registry watches open now.'),
        gauge('registry_cache_service_instances', 'Instances cached for a service.', ['service']),
        gauge('registry_cache_service_stale_seconds', 'How long ago a cached service went stale (0 while fresh).', ['service']),
      ],
      collect: (emit) => {
        const s = this.stats();
        emit('registry_cache_hits_total', {}, s.hits);
        emit('registry_cache_misses_total', {}, s.misses);
        emit('registry_cache_stale_answers_total', {}, s.stale);
        emit('registry_cache_throttled_total', {}, s.throttled);
        emit('registry_cache_registry_calls_total', {}, s.registryCalls);
        emit('registry_cache_watch_reconnects_total', {}, s.watchReconnects);
        emit('registry_cache_watch_events_total', {}, s.watchEvents);
        emit('registry_cache_services', {}, s.services);
        emit('registry_cache_watches', {}, s.watches);
        for (const e of this.services()) {
          emit('registry_cache_service_instances', { service: e.service }, e.instances);
          emit('registry_cache_service_stale_seconds', { service: e.service }, e.staleForMs / 1000);
        }
      },
      snapshot: () => ({ ...this.stats(), entries: this.services() }),
      closed: () => this.closed,
    };
  }

  /** stats answers a snapshot of the counters. */
  stats(): RegistryCacheStats {
    return { ...this.counters, services: this.entries.size, watches: this.watches.size, watchers: this.fanout.watchers };
  }

  /**
   * services answers each cached service: its instance count, whether the entry is fresh, how many
   * milliseconds ago it went stale (0 while fresh; an entry past its TTL is listed again at its next
   * lookup), whether it is watched, and whether the registry's last answer for it was a failure (`failing`:
   * the entry is then what was last known, answered stale). For status pages and metrics.
   */
  services(): { service: string; instances: number; fresh: boolean; staleForMs: number; watched: boolean; failing: boolean }[] {
    const now = this.clock.now();
    return [...this.entries].map(([service, e]) => ({
      service,
      instances: e.instances.length,
      fresh: now < e.validUntil,
      staleForMs: Math.max(0, now - e.validUntil),
      watched: this.watches.has(service),
      failing: this.throttles.get(service)?.error !== undefined,
    }));
  }

  /**
   * peek answers the cached instances of `name` when they are fresh, else undefined; it never calls the
   * registry. The array is frozen and shared.
   */
  peek(name: string): readonly ServiceInstance[] | undefined {
    const e = this.entries.get(name);
    if (e === undefined || e.instances.length === 0) return undefined;
    const now = this.clock.now();
    if (now >= e.validUntil) return undefined;
    e.lastUsed = now;
    return e.instances;
  }

  /**
   * getService answers the instances of `name` (see the module comment for when it asks the registry).
   * The array is frozen and shared: copy it before changing it. `signal` abandons the wait (the lookup
   * itself goes on for the callers that share it): the promise rejects with `AbortedError`.
   */
  getService(name: string, options?: CallOptions): Promise<readonly ServiceInstance[]> {
    const e = this.entries.get(name);
    if (e !== undefined && e.instances.length > 0) {
      const now = this.clock.now();
      if (now < e.validUntil && (options === undefined || options.signal?.aborted !== true)) {
        this.counters.hits++;
        e.lastUsed = now;
        return (e.answer ??= Promise.resolve(e.instances));
      }
    }
    const signal = options?.signal;
    if (signal === undefined) return this.lookup(name);
    if (signal.aborted) return Promise.reject(new AbortedError('RegistryCache.getService aborted', { cause: signal.reason }));
    return raceSignal(this.lookup(name), signal, () => {
      throw new AbortedError('RegistryCache.getService aborted', { cause: signal.reason });
    });
  }

  private async lookup(name: string): Promise<readonly ServiceInstance[]> {
    checkName('RegistryCache.getService', 'name', name);
    if (this.closed) throw new ClosedError('RegistryCache is closed');
    const now = this.clock.now();
    const e = this.entries.get(name);
    if (e !== undefined) {
      e.lastUsed = now;
      if (e.instances.length === 0 && now < e.validUntil) {
        // a confirmed delete emptied it: the registry's answer, still fresh
        this.counters.hits++;
        throw new NotFoundError(`service ${name} has no instances`);
      }
    }
    this.counters.misses++;
    if (this.flights.has(name)) return this.flights.do(name, () => this.refresh(name));
    const t = this.throttles.get(name);
    if (t !== undefined && now - t.at < this.minRetryMs) {
      this.counters.throttled++;
      if (e !== undefined && e.instances.length > 0) {
        this.counters.stale++;
        return e.instances;
      }
      throw throttledError(name, t, this.minRetryMs);
    }
    return this.flights.do(name, () => this.refresh(name));
  }

  /** refresh is the one registry call of a flight: it decides what every caller of the flight gets. */
  private async refresh(name: string): Promise<readonly ServiceInstance[]> {
    if (this.watchEnabled && !this.readySeen.has(name)) {
      this.ensureWatch(name);
      // a watch that says it is ready within the current turn (a registry in memory) needs no second listing
      await null;
      if (!this.readySeen.has(name)) this.listedEarly.add(name);
    }
    this.counters.registryCalls++;
    let list: readonly ServiceInstance[] | undefined;
    let failure: unknown;
    let events: RegistryEvent[] | undefined = [];
    this.during.set(name, events);
    let revision: number | undefined;
    try {
      if (typeof this.registry.getServiceListing === 'function') {
        const listing = await this.registry.getServiceListing(name);
        list = listing?.instances;
        revision = Number.isFinite(listing?.revision) ? listing.revision : undefined;
      } else {
        list = await this.registry.getService(name);
      }
      if (!Array.isArray(list)) throw new TypeError(`registry answered ${typeof list} instead of an array`);
    } catch (err) {
      failure = err;
    } finally {
      events = this.during.get(name);
      this.during.delete(name);
    }
    const now = this.clock.now();
    const e = this.entries.get(name);
    const notFound = failure === undefined || failure instanceof NotFoundError;
    if (events === undefined) {
      // too many events to replay: what the events built is newer than the listing; keep it when there is one
      if (e !== undefined && e.instances.length > 0 && (notFound || list !== undefined)) {
        this.throttles.delete(name);
        return e.instances;
      }
    } else if (events.length > 0 && notFound) {
      // the listing (or "no instances") may predate these events: replay them on top of it — with
      // revisions (etcd), exactly those it does not reflect; without, all of them
      const newer = revision === undefined ? events : events.filter((ev) => ev.revision === undefined || ev.revision > revision);
      if (newer.length > 0) list = replay(name, list ?? EMPTY, newer);
    }
    if (list !== undefined && list.length > 0) {
      this.throttles.delete(name); // success clears the throttle
      return this.store(name, list, now).instances;
    }
    this.throttles.set(name, { at: now, error: notFound ? undefined : failure });
    if (e !== undefined && e.instances.length > 0) {
      // neither an error nor an empty answer replaces a non-empty list: only a delete event does
      this.counters.stale++;
      return e.instances;
    }
    if (notFound) throw new NotFoundError(`service ${name} has no instances`);
    throw failure instanceof RegistryUnavailableError
      ? failure
      : new RegistryUnavailableError(`registry lookup of ${name} failed: ${failure instanceof Error ? failure.message : String(failure)}`, { cause: failure });
  }

  /** store replaces the entry of `name` with `list` (a full, fresh answer). */
  private store(name: string, list: readonly ServiceInstance[], now: number): Entry {
    let e = this.entries.get(name);
    const before = e?.instances ?? EMPTY;
    // Instances equal to the ones cached keep their objects (a registry parses new ones on every
    // listing): consumers that diff lists by identity — the balancer's pickers — then do work only
    // for what changed, and the old copies can be collected.
    const instances = before.length === 0 ? freezeList(list) : keepIdentity(before, list);
    const nodeExpiry = new Map<string, number>();
    const expiry = now + this.ttlMs;
    for (const i of instances) nodeExpiry.set(i.id, expiry);
    if (e === undefined) {
      this.makeRoom();
      e = { instances, answer: undefined, validUntil: expiry, nodeExpiry, serviceExpiry: expiry, lastUsed: now };
      this.entries.set(name, e);
    } else {
      e.instances = instances;
      e.answer = undefined;
      e.nodeExpiry = nodeExpiry;
      e.serviceExpiry = expiry;
      e.validUntil = expiry;
    }
    this.changed();
    this.fanout.publishDiff(name, before, instances);
    if (registryChangeChannel.hasSubscribers) registryChangeChannel.publish({ service: name, instances, cause: 'lookup', source: this });
    if (this.changes.hasListeners) this.changes.emit(serviceChange(name, instances));
    return e;
  }

  /** apply folds one watch event into the entry (go-micro `update`). */
  private apply(name: string, event: RegistryEvent, complete: boolean): void {
    this.counters.watchEvents++;
    const now = this.clock.now();
    const inst = event.instance;
    if (inst === null || typeof inst !== 'object' || inst.name !== name) return;
    let e = this.entries.get(name);
    if (e === undefined) {
      // a create on a service the registry said was empty is the whole truth; on a service we could not
      // list it would be a partial view, never to be answered: the next lookup lists it whole instead
      if (event.type === 'delete' || !complete) return;
      this.makeRoom();
      e = { instances: EMPTY, answer: undefined, validUntil: 0, nodeExpiry: new Map(), serviceExpiry: now + this.ttlMs, lastUsed: now };
      this.entries.set(name, e);
    }
    const others = e.instances.filter((i) => i.id !== inst.id);
    let published: RegistryEvent;
    if (event.type === 'delete') {
      if (others.length === e.instances.length) return;
      e.instances = others.length === 0 ? EMPTY : Object.freeze(others);
      e.nodeExpiry.delete(inst.id);
      published = event;
    } else {
      const frozen = frozenInstance(inst);
      const old = e.instances.length === others.length ? undefined : e.instances.find((i) => i.id === inst.id);
      others.push(frozen);
      e.instances = Object.freeze(others);
      e.nodeExpiry.set(inst.id, now + this.ttlMs);
      // what the cache's watchers see is what the entry became: a create of a known id is an update
      const type = old === undefined ? 'create' : 'update';
      published = frozen === inst && type === event.type && Object.isFrozen(event) ? event : Object.freeze({ ...event, type, instance: frozen });
    }
    e.answer = undefined;
    e.serviceExpiry = now + this.ttlMs;
    let v = e.serviceExpiry;
    for (const x of e.nodeExpiry.values()) if (x < v) v = x;
    e.validUntil = v;
    this.changed();
    this.fanout.publish(name, published);
    if (registryChangeChannel.hasSubscribers) registryChangeChannel.publish({ service: name, instances: e.instances, cause: 'watch', source: this });
    if (this.changes.hasListeners) this.changes.emit(serviceChange(name, e.instances));
  }

  private ensureWatch(name: string): CacheWatch {
    let w = this.watches.get(name);
    if (w === undefined) {
      const registry = this.registry;
      w = new Follower<never, RegistryEvent>({
        name: `RegistryCache watch of ${name}`,
        source: {
          watch: (signal, onReady) => {
            this.readySeen.delete(name);
            return registry.watch({
              service: name,
              signal,
              onReady: () => {
                if (!signal.aborted) this.readySeen.add(name);
                onReady();
              },
            });
          },
        },
        onEvent: (event) => {
          if (this.during.has(name)) {
            const events = this.during.get(name);
            if (events !== undefined && events.length < MAX_DURING) events.push(event);
            else this.during.set(name, undefined);
          }
          const t = this.throttles.get(name);
          this.apply(name, event, t !== undefined && t.error === undefined);
        },
        onEstablished: (first) => {
          // changes made while the watch was down (or past a resync), or between a first listing and this
          // watch: list the service again
          this.readySeen.add(name); // established without `onReady` (an event, or READY_WAIT_MS): as good as ready
          if (!first || this.listedEarly.has(name)) this.relist(name);
        },
        onBroken: () => {
          this.readySeen.delete(name);
          this.counters.watchReconnects++;
        },
        backoff: this.watchBackoff,
        random: this.random,
        readyWaitMs: READY_WAIT_MS,
        clock: this.clock,
      });
      this.watches.set(name, w);
    }
    return w;
  }

  /**
   * relist lists `name` again after the lookup in flight, if any (its listing may predate the watch, so
   * joining it would not do).
   */
  private relist(name: string): void {
    if (this.closed) return;
    this.listedEarly.delete(name);
    const again = () => {
      if (!this.closed) this.flights.do(name, () => this.refresh(name)).catch(noop);
    };
    if (this.flights.has(name)) this.flights.do(name, () => this.refresh(name)).then(again, again);
    else again();
  }

  /** sweep drops services nobody looked up within `idleMs` (entry and watch), and old throttles. The timer calls it. */
  sweep(): void {
    const now = this.clock.now();
    const fanout = this.fanout;
    for (const [name, e] of this.entries) if (now - e.lastUsed >= this.idleMs && !fanout.has(name)) this.forget(name);
    for (const [name, t] of this.throttles) if (now - t.at >= this.minRetryMs && !this.entries.has(name)) this.throttles.delete(name);
    for (const name of this.watches.keys()) {
      if (!this.entries.has(name) && !this.throttles.has(name) && !this.flights.has(name) && !fanout.has(name)) this.forget(name);
    }
  }

  private forget(name: string): void {
    if (this.entries.delete(name)) this.changed();
    this.throttles.delete(name);
    this.readySeen.delete(name);
    this.listedEarly.delete(name);
    const w = this.watches.get(name);
    if (w !== undefined) {
      this.watches.delete(name);
      void w.close();
    }
    // watchers of a dropped service list again (which brings the entry and the watch back)
    this.fanout.fail(name, new WatchResyncError(`RegistryCache dropped ${name} (maxServices): list again`));
  }

  private makeRoom(): void {
    if (this.entries.size < this.maxServices) return;
    let oldest: string | undefined;
    let at = Infinity;
    // the least recently used service that nobody watches through the cache; if all are watched, the least recently used
    for (const [name, e] of this.entries)
      if (e.lastUsed < at && !this.fanout.has(name)) {
        at = e.lastUsed;
        oldest = name;
      }
    if (oldest === undefined)
      for (const [name, e] of this.entries)
        if (e.lastUsed < at) {
          at = e.lastUsed;
          oldest = name;
        }
    if (oldest !== undefined) this.forget(oldest);
  }

  /**
   * register passes straight to the wrapped registry (nothing is cached on the way); a watched service
   * sees the new instance when its watch event arrives. Rejects ClosedError after close().
   */
  async register(instance: ServiceInstance, options?: RegisterOptions): Promise<void> {
    if (this.closed) throw new ClosedError('RegistryCache is closed');
    return this.registry.register(instance, options);
  }

  /** deregister passes straight to the wrapped registry, like register. Rejects ClosedError after close(). */
  async deregister(instance: ServiceInstance, options?: CallOptions): Promise<void> {
    if (this.closed) throw new ClosedError('RegistryCache is closed');
    return this.registry.deregister(instance, options);
  }

  /** listServices asks the wrapped registry every time (service names are not cached). Rejects ClosedError after close(). */
  async listServices(): Promise<string[]> {
    if (this.closed) throw new ClosedError('RegistryCache is closed');
    return this.registry.listServices();
  }

  /**
   * watch of one service (`{ service }`) is served from the cache's view of it: the cache watches the
   * registry once per service however many watch it here, the service stays cached while watched, and
   * the events are the changes of the cache's list (a new listing arrives as the create / update /
   * delete events between the old list and the new). `onReady` is called once the cache's own watch of
   * the service is established. With `watch: false`, and for a watch of every service, it is the
   * wrapped registry's own watch. It ends with `options.signal` or the cache's close(); after close()
   * it yields nothing.
   */
  watch(options?: WatchOptions): AsyncIterable<RegistryEvent> {
    if (options !== undefined && (options === null || typeof options !== 'object')) return this.registry.watch(options); // its TypeError
    if (this.closed) return ended();
    const service = options?.service;
    if (service !== undefined && this.watchEnabled) {
      checkName('RegistryCache.watch', 'service', service);
      const queue = this.fanout.subscribe(service, options!.signal);
      const onReady = options!.onReady;
      const follower = this.ensureWatch(service);
      if (onReady !== undefined) {
        const ready = () => {
          if (!queue.closed) onReady();
        };
        follower.ready().then(ready, ready);
      }
      return queue;
    }
    return passThroughWatch(this.registry, options, this.closing.signal);
  }

  /**
   * close stops every watch and timer, ends the watches handed out by watch(), writes a pending snapshot,
   * and — only with `closeRegistry` — closes the wrapped registry (by default it stays open: close it yourself).
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.closing.abort();
    this.clock.clearTimeout(this.sweepTimer);
    this.changes.clear();
    this.fanout.endAll();
    const watches = [...this.watches.values()];
    this.watches.clear();
    await Promise.all(watches.map((w) => w.close()));
    await this.snapshot?.flush();
    if (this.closeRegistry) await this.registry.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  private changed(): void {
    if (!this.closed) this.snapshot?.changed();
  }

  /** liveServices is what a snapshot keeps: every service with at least one instance. */
  private *liveServices(): Iterable<[string, readonly ServiceInstance[]]> {
    for (const [name, e] of this.entries) if (e.instances.length > 0) yield [name, e.instances];
  }

  private loadSnapshot(path: string): void {
    for (const [name, e] of entriesFromSnapshot(readSnapshot(path, this.warn), this.maxServices - this.entries.size, this.clock.now()))
      this.entries.set(name, e);
  }
}

function noop(): void {}
