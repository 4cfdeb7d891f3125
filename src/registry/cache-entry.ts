/**
 * What a RegistryCache keeps per service: the cached entry (also as restored from a snapshot), and the
 * throttle of a failed or empty lookup with the error it answers.
 */
import { NotFoundError, RegistryUnavailableError } from '../core/errors.js';
import { freezeList } from './frozen-instances.js';
import type { ServiceInstance } from './types.js';

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
