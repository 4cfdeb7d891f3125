/**
 * Membership from a Registry: a cache node registers itself (service `bulwark-cache`, its URL in the
 * instance metadata) and follows the service's watch, setting the pool's peers on every change. A watch
 * that ends or fails (a registry restart, `WatchResyncError`) is opened again after a backoff, and the
 * full list is read again, so no change is missed for long.
 */
import { delay } from '../core/abort.js';
import { NotFoundError } from '../core/errors.js';
import { integer, options as checkOptions } from '../core/validate.js';
import type { Registry, ServiceInstance } from '../registry/types.js';
import { normalizePeerUrl } from './peer-url.js';

/** MembershipOptions configures `HttpPool.bindRegistry`. */
export interface MembershipOptions {
  /** The service the cache nodes register under. Defaults to `bulwark-cache`. */
  service?: string;
  /** This node's instance id. Defaults to its URL's host and port, e.g. `127.0.0.1-8080`. */
  id?: string;
  /** Registration TTL handed to the registry; when set, the node registers again every ttlMs / 3. Defaults to none (the registry's own). */
  ttlMs?: number;
  /** The most time between two attempts to watch again after a failure. Defaults to 5 000. */
  maxBackoffMs?: number;
}

/** Defaults for MembershipOptions. */
export const membershipDefaults = Object.freeze({ service: 'bulwark-cache', maxBackoffMs: 5_000 });

/** How long to wait for a watch to say it is established before listing anyway. */
const WATCH_READY_MS = 5_000;

/** First wait before watching again after a failure; doubles up to `maxBackoffMs`. */
const FIRST_BACKOFF_MS = 50;

/** Membership is a live binding of a pool to a registry service. */
export interface Membership {
  /** The instance this node registered. */
  readonly instance: ServiceInstance;
  /** Settles when the binding has stopped. */
  readonly closed: Promise<void>;
  /** close stops following the watch and deregisters this node. */
  close(): Promise<void>;
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

/** bindRegistry registers `pool.self` under the service and keeps the pool's peers equal to the service's instances. */
export async function bindRegistry(pool: PeerSetter, registry: Registry, options?: MembershipOptions): Promise<Membership> {
  const o = checkOptions('HttpPool.bindRegistry', options);
  if (registry === null || typeof registry !== 'object' || typeof registry.watch !== 'function') {
    throw new TypeError('HttpPool.bindRegistry: registry must be a Registry');
  }
  const service = o.service ?? membershipDefaults.service;
  const ttlMs = o.ttlMs === undefined ? undefined : integer('HttpPool.bindRegistry', 'ttlMs', o.ttlMs, 1);
  const maxBackoffMs = integer('HttpPool.bindRegistry', 'maxBackoffMs', o.maxBackoffMs ?? membershipDefaults.maxBackoffMs, 1);
  const url = new URL(pool.self);
  const port = url.port || (url.protocol === 'https:' ? '443' : '80');
  const instance: ServiceInstance = {
    id: o.id ?? `${url.hostname.replace(/[^A-Za-z0-9._:-]/g, '')}-${port}`,
    name: service,
    address: `${url.hostname}:${port}`,
    metadata: { url: pool.self },
  };
  const controller = new AbortController();
  const { signal } = controller;
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
  const register = () => registry.register(instance, ttlMs === undefined ? undefined : { ttlMs });

  // Watch first (and wait until it is established), then list: an instance that appears in between
  // is in one or the other, and applying both is idempotent.
  const openWatch = async () => {
    let ready!: () => void;
    const established = new Promise<void>((r) => (ready = r));
    const it = registry.watch({ service, signal, onReady: () => ready() })[Symbol.asyncIterator]();
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([established, new Promise<void>((r) => (timer = setTimeout(r, WATCH_READY_MS)))]);
    clearTimeout(timer);
    return it;
  };
  let events = await openWatch();
  const relist = async () => {
    let list: ServiceInstance[] = [];
    try {
      list = await registry.getService(service);
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
    members.clear();
    for (const inst of list) put(inst);
    apply();
  };
  try {
    await register();
    await relist();
  } catch (err) {
    controller.abort();
    await events.return?.().catch(() => undefined);
    throw err;
  }

  let renew: ReturnType<typeof setInterval> | undefined;
  if (ttlMs !== undefined) {
    renew = setInterval(() => void register().catch(() => undefined), Math.max(1, Math.floor(ttlMs / 3)));
    renew.unref();
  }

  const follow = async () => {
    let backoff = FIRST_BACKOFF_MS;
    while (!signal.aborted) {
      try {
        for (;;) {
          const r = await events.next();
          if (r.done) break;
          backoff = FIRST_BACKOFF_MS;
          if (r.value.type === 'delete') members.delete(r.value.instance.id);
          else put(r.value.instance);
          apply();
        }
      } catch {
        // The watch failed: open it again below.
      }
      if (signal.aborted) return;
      try {
        await delay(backoff, signal, { unref: true });
        backoff = Math.min(maxBackoffMs, backoff * 2);
        events = await openWatch();
        await register();
        await relist();
      } catch {
        // Registry still down, or we were closed: the loop decides.
      }
    }
  };
  const closed = follow();
  let closing: Promise<void> | undefined;
  return {
    instance,
    closed,
    close() {
      closing ??= (async () => {
        controller.abort();
        if (renew !== undefined) clearInterval(renew);
        await events.return?.().catch(() => undefined);
        await closed;
        await registry.deregister(instance).catch(() => undefined);
      })();
      return closing;
    },
  };
}
