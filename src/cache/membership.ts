/**
 * Membership from a Registry: a cache node announces itself (service `bulwark-cache`, its URL in the
 * instance metadata; registry `announce()`) and follows the service (registry `followService`, the one
 * list → watch → back off → resync loop), setting the pool's peers on every change. A watch that ends
 * or fails (a registry restart, `WatchResyncError`) is opened again after a backoff and the full list is
 * read again, so no change is missed for long. close() stops following and deregisters this node.
 */
import { BACKOFF_KEYS, type BackoffOptions } from '../core/backoff.js';
import { systemClock, type Clock } from '../core/clock.js';
import { clockOption, integer, options as checkOptions, showValue, type OptionKeys } from '../core/validate.js';
import { announce } from '../registry/announce.js';
import { followService } from '../registry/follow.js';
import type { Announcement, Registry, RegistryEvent, ServiceInstance } from '../registry/types.js';
import { normalizePeerUrl } from './peer-url.js';

/** The keys of MembershipOptions, all of them: any other is refused (see `options`). */
const BIND_REGISTRY_KEYS = {
  service: true,
  id: true,
  metadata: true,
  ttlMs: true,
  backoff: true,
  clock: true,
} as const satisfies OptionKeys<MembershipOptions>;

/** MembershipOptions configures `HttpPool.bindRegistry`. */
export interface MembershipOptions {
  /** The service the cache nodes register under. Defaults to `bulwark-cache`. */
  service?: string;
  /** This node's instance id. Defaults to its URL's host and port, e.g. `127.0.0.1-8080`. */
  id?: string;
  /**
   * More metadata to register this node with, beside the `url` the pool sets (which it may not hold):
   * e.g. `{ [STATUS_PATH_KEY]: '/dashboard/events' }` (bulwark/dashboard) so a fleet dashboard finds
   * the node. Defaults to none.
   */
  metadata?: Record<string, string>;
  /** Registration TTL handed to the registry; when set, the node registers again every ttlMs / 3. Defaults to none (the registry's own). */
  ttlMs?: number;
  /** Waits between attempts to watch again after a failure. Defaults to `{ initialMs: 50, maxMs: 5 000, multiplier: 2, jitter: 'full' }`. */
  backoff?: BackoffOptions;
  /** The clock of every timer (renewal, backoff). Defaults to `systemClock`. */
  clock?: Clock;
}

/** Defaults for MembershipOptions. */
export const membershipDefaults = Object.freeze({
  service: 'bulwark-cache',
  backoff: Object.freeze({ initialMs: 50, maxMs: 5_000, multiplier: 2, jitter: 'full' }) as Readonly<BackoffOptions>,
});

/** How long to wait for a watch to say it is established before listing anyway. */
const WATCH_READY_MS = 5_000;

/** Membership is a live binding of a pool to a registry service. */
export interface Membership {
  /** The instance this node registered. */
  readonly instance: ServiceInstance;
  /** Settles when the binding has stopped. */
  readonly closed: Promise<void>;
  /** close stops following the watch and deregisters this node. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** The part of a pool that membership drives. */
interface PeerSetter {
  readonly self: string;
  setPeers(...urls: string[]): void;
}

/** urlOf answers the peer URL an instance advertises (`metadata.url`, else `http://<address>`). */
export function urlOf(instance: ServiceInstance): string {
  return instance.metadata?.url ?? `http://${instance.address}`;
}

/** extraMetadata checks the metadata option: an object of strings, without `url`. */
function extraMetadata(metadata: unknown): Record<string, string> {
  if (metadata === undefined) return {};
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata))
    throw new TypeError(`HttpPool.bindRegistry: metadata must be an object of strings, got ${showValue(metadata)}`);
  for (const [k, v] of Object.entries(metadata)) {
    if (k === 'url') throw new TypeError("HttpPool.bindRegistry: metadata.url is the pool's own URL: it cannot be set");
    if (typeof v !== 'string') throw new TypeError(`HttpPool.bindRegistry: metadata.${k} must be a string, got ${showValue(v)}`);
  }
  return { ...(metadata as Record<string, string>) };
}

/** bindRegistry registers `pool.self` under the service and keeps the pool's peers equal to the service's instances. */
export async function bindRegistry(pool: PeerSetter, registry: Registry, options?: MembershipOptions): Promise<Membership> {
  const o = checkOptions('HttpPool.bindRegistry', options, BIND_REGISTRY_KEYS);
  if (registry === null || typeof registry !== 'object' || typeof registry.watch !== 'function') {
    throw new TypeError('HttpPool.bindRegistry: registry must be a Registry');
  }
  const service = o.service ?? membershipDefaults.service;
  const ttlMs = o.ttlMs === undefined ? undefined : integer('HttpPool.bindRegistry', 'ttlMs', o.ttlMs, 1);
  const clock = clockOption('HttpPool.bindRegistry', o.clock, systemClock);
  const backoff = { ...membershipDefaults.backoff, ...checkOptions('HttpPool.bindRegistry.backoff', o.backoff, BACKOFF_KEYS) };
  const url = new URL(pool.self);
  const port = url.port || (url.protocol === 'https:' ? '443' : '80');
  const instance: ServiceInstance = {
    id: o.id ?? `${url.hostname.replace(/[^A-Za-z0-9._:-]/g, '')}-${port}`,
    name: service,
    address: `${url.hostname}:${port}`,
    metadata: { ...extraMetadata(o.metadata), url: pool.self },
  };
  const members = new Map<string, string>();
  const apply = () => pool.setPeers(...new Set(members.values()));
  const put = (inst: ServiceInstance) => {
    // An instance whose URL we cannot use is left out (and a bad update drops its old URL).
    try {
      members.set(inst.id, normalizePeerUrl('membership', 'instance url', urlOf(inst)));
    } catch {
      members.delete(inst.id);
    }
  };
  // Announce first, then follow: the listing (taken once the watch is established) includes this node.
  const announcement: Announcement = await announce(registry, instance, { ttlMs, signals: [], clock });
  const follower = followService(registry, service, {
    onList: (list) => {
      members.clear();
      for (const inst of list) put(inst);
      apply();
    },
    onEvent: (e: RegistryEvent) => {
      if (e.type === 'delete') members.delete(e.instance.id);
      else put(e.instance);
      apply();
    },
    backoff,
    readyWaitMs: WATCH_READY_MS,
    clock,
  });
  try {
    await follower.ready();
  } catch (err) {
    await follower.close();
    await announcement.close();
    throw err;
  }
  let closing: Promise<void> | undefined;
  let markClosed!: () => void;
  const closed = new Promise<void>((resolve) => (markClosed = resolve));
  const close = () =>
    (closing ??= (async () => {
      await follower.close();
      await announcement.close();
      markClosed();
    })());
  return { instance, closed, close, [Symbol.asyncDispose]: close };
}
