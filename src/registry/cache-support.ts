/**
 * RegistryCache's defaults and pure helpers: freezing what it hands out, replaying watch events over a
 * listing, and the pass-through watch that ends with the cache.
 */
import { linkSignal } from '../core/abort.js';
import { ClosedError, NotFoundError, RegistryUnavailableError } from '../core/errors.js';
import { followerDefaults } from '../core/follower.js';
import type { Registry, RegistryEvent, ServiceChange, ServiceInstance, WatchOptions } from './types.js';
import { sameInstance } from './validate.js';

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

/** Entry is one cached service. */
export interface Entry {
  /** What lookups answer: frozen, replaced (never mutated) on change. */
  instances: readonly ServiceInstance[];
  /** `Promise.resolve(instances)`, made once per change and handed to every hit (no allocation per lookup). */
  answer: Promise<readonly ServiceInstance[]> | undefined;
  /** Fresh until this time: the earliest of the service TTL and every node TTL. */
  validUntil: number;
  /** Per-instance expiry (go-micro's node TTLs), by id. */
  nodeExpiry: Map<string, number>;
  serviceExpiry: number;
  lastUsed: number;
}

/** Throttle is the memory of the last failed or empty attempt of one service. */
export interface Throttle {
  at: number;
  /** undefined: the registry said the service has no instances. */
  error: unknown;
}

/**
 * passThroughWatch is the wrapped registry's own watch (of every service, or with the cache's watch off),
 * ended also when `closing` aborts (the cache closed).
 */
export function passThroughWatch(registry: Registry, options: WatchOptions | undefined, closing: AbortSignal): AsyncIterable<RegistryEvent> {
    const { controller, unlink } = linkSignal(options?.signal);
    const onClose = () => controller.abort(new ClosedError('RegistryCache is closed'));
    closing.addEventListener('abort', onClose, { once: true });
    const release = () => {
      unlink();
      closing.removeEventListener('abort', onClose);
    };
    let events: AsyncIterable<RegistryEvent>;
    try {
      events = registry.watch({ ...options, signal: controller.signal });
    } catch (err) {
      release();
      throw err;
    }
    return untilDone(events, () => {
      release();
      controller.abort();
    });
}

/** replay answers `list` with `events` applied in order (create and update add or replace by id; delete removes). */
export function replay(name: string, list: readonly ServiceInstance[], events: readonly RegistryEvent[]): ServiceInstance[] {
  const byId = new Map<string, ServiceInstance>();
  for (const i of list) byId.set(i.id, i);
  for (const ev of events) {
    const i = ev.instance;
    if (i === null || typeof i !== 'object' || i.name !== name) continue;
    if (ev.type === 'delete') byId.delete(i.id);
    else byId.set(i.id, i);
  }
  return [...byId.values()];
}

/** untilDone iterates `events`, calling `done` once when the iteration ends however it ends. */
export async function* untilDone(events: AsyncIterable<RegistryEvent>, done: () => void): AsyncGenerator<RegistryEvent> {
  try {
    yield* events;
  } finally {
    done();
  }
}

/** ended is a watch that yields nothing. */
export async function* ended(): AsyncGenerator<RegistryEvent> {}

export function freezeList(list: readonly ServiceInstance[]): readonly ServiceInstance[] {
  const out: ServiceInstance[] = [];
  for (const i of list) out.push(Object.isFrozen(i) && (i.metadata === undefined || Object.isFrozen(i.metadata)) ? i : freezeInstance(i));
  return Object.freeze(out);
}

/** serviceChange answers `{ service, instances }`, built from an empty literal (no allocation site: see watchEvent in validate.ts). */
export function serviceChange(service: string, instances: readonly ServiceInstance[]): ServiceChange {
  const c: { service: string; instances: readonly ServiceInstance[] } = {} as never;
  c.service = service;
  c.instances = instances;
  return c;
}

/** frozenInstance answers `i` when it is frozen (metadata too), else a frozen copy: one instance, no list. */
export function frozenInstance(i: ServiceInstance): ServiceInstance {
  return Object.isFrozen(i) && (i.metadata === undefined || Object.isFrozen(i.metadata)) ? i : freezeInstance(i);
}

function freezeInstance(i: ServiceInstance): ServiceInstance {
  const copy: { -readonly [K in keyof ServiceInstance]: ServiceInstance[K] } = { id: i.id, name: i.name, address: i.address };
  if (i.version !== undefined) copy.version = i.version;
  if (i.metadata !== undefined) copy.metadata = Object.freeze({ ...i.metadata });
  return Object.freeze(copy);
}

/** throttledError is what a throttled lookup with nothing cached rejects: "no instances" or "could not ask". */
export function throttledError(name: string, t: { error: unknown }, minRetryMs: number): Error {
  if (t.error === undefined) return new NotFoundError(`service ${name} has no instances (asked less than ${minRetryMs} ms ago)`);
  const why = t.error instanceof Error ? t.error.message : String(t.error);
  return new RegistryUnavailableError(`registry lookups of ${name} are throttled for ${minRetryMs} ms after a failure: ${why}`, { cause: t.error });
}

/**
 * entriesFromSnapshot answers cache entries for the services a snapshot file held (at most `room`):
 * known, but never fresh — served as stale until the registry answers — and with every instance's TTL
 * already passed, so a watch event cannot make the rest of a list look fresh.
 */
export function entriesFromSnapshot(services: Iterable<[string, readonly ServiceInstance[]]>, room: number, now: number): [string, Entry][] {
  const out: [string, Entry][] = [];
  for (const [name, list] of services) {
    if (out.length >= room) break;
    const instances = freezeList(list);
    const nodeExpiry = new Map(instances.map((i) => [i.id, 0]));
    out.push([name, { instances, answer: undefined, validUntil: 0, nodeExpiry, serviceExpiry: 0, lastUsed: now }]);
  }
  return out;
}

/** defaultWarn is RegistryCache's `onWarning` default: a process warning with code BULWARK_REGISTRY_CACHE. */
export function defaultWarn(message: string): void {
  process.emitWarning(message, { code: 'BULWARK_REGISTRY_CACHE' });
}

/**
 * keepIdentity is `freezeList(list)` with every instance equal to one of `before` (same id and data)
 * answered as that object, so that an unchanged instance keeps its identity across listings.
 */
export function keepIdentity(before: readonly ServiceInstance[], list: readonly ServiceInstance[]): readonly ServiceInstance[] {
  const known = new Map<string, ServiceInstance>();
  for (const i of before) known.set(i.id, i);
  const out: ServiceInstance[] = [];
  for (const i of list) {
    const k = known.get(i.id);
    out.push(k !== undefined && (k === i || sameInstance(k, i)) ? k : frozenInstance(i));
  }
  return Object.freeze(out);
}
