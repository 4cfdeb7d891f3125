/**
 * Validation of the registry model (issue: names and ids are 1–255 characters of [A-Za-z0-9._:-],
 * address is `host:port`, metadata at most 64 KiB). `checkInstance` answers a frozen, normalised copy, so
 * what a registry stores can never be changed by the caller afterwards, and can be handed out as is.
 */
import type { RegistryEvent, ServiceInstance } from './types.js';

/** The characters allowed in service names and instance ids. */
const NAME = /^[A-Za-z0-9._:-]{1,255}$/;
/** host:port, IPv6 hosts in brackets. */
const ADDRESS = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$/;
/** Metadata bound per instance: keys plus values, UTF-8 bytes (64 KiB keeps one instance well inside one etcd request). */
export const MAX_METADATA_BYTES = 64 * 1024;

function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}…` : value);
  if (value === null || typeof value !== 'object') return String(value);
  return Object.prototype.toString.call(value);
}

/** checkName checks a service name or instance id and returns it; `field` names it in the TypeError. */
export function checkName(owner: string, field: string, value: unknown): string {
  if (typeof value !== 'string' || !NAME.test(value)) {
    throw new TypeError(`${owner}: ${field} must be 1–255 characters of [A-Za-z0-9._:-], got ${show(value)}`);
  }
  return value;
}

/** checkAddress checks a `host:port` address (port 1–65535) and returns it. */
export function checkAddress(owner: string, field: string, value: unknown): string {
  const m = typeof value === 'string' ? ADDRESS.exec(value) : null;
  const port = m === null ? 0 : Number(m[2]);
  if (m === null || port < 1 || port > 65_535) {
    throw new TypeError(`${owner}: ${field} must be "host:port" (IPv6 in brackets, port 1–65535), got ${show(value)}`);
  }
  return value as string;
}

/**
 * checkInstance validates `value` as a ServiceInstance and returns a frozen copy holding only the known
 * fields (metadata frozen too). Throws TypeError naming the first bad field.
 */
export function checkInstance(owner: string, value: unknown): ServiceInstance {
  if (value === null || typeof value !== 'object') throw new TypeError(`${owner}: instance must be an object, got ${show(value)}`);
  const v = value as Record<string, unknown>;
  const name = checkName(owner, 'instance.name', v.name);
  const id = checkName(owner, 'instance.id', v.id);
  const address = checkAddress(owner, 'instance.address', v.address);
  // Built from an empty literal (no allocation site): see watchEvent.
  const out: { id: string; name: string; address: string; version?: string; metadata?: Readonly<Record<string, string>> } = {} as never;
  out.id = id;
  out.name = name;
  out.address = address;
  if (v.version !== undefined) {
    if (typeof v.version !== 'string' || v.version.length > 255) {
      throw new TypeError(`${owner}: instance.version must be a string of at most 255 characters, got ${show(v.version)}`);
    }
    out.version = v.version;
  }
  if (v.metadata !== undefined) out.metadata = checkMetadata(owner, v.metadata);
  return Object.freeze(out);
}

function checkMetadata(owner: string, value: unknown): Readonly<Record<string, string>> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new TypeError(`${owner}: instance.metadata must be an object of strings, got ${show(value)}`);
  }
  const copy: Record<string, string> = {};
  let bytes = 0;
  for (const [k, val] of Object.entries(value)) {
    if (typeof val !== 'string') throw new TypeError(`${owner}: instance.metadata.${k} must be a string, got ${show(val)}`);
    bytes += Buffer.byteLength(k) + Buffer.byteLength(val);
    if (bytes > MAX_METADATA_BYTES) {
      throw new TypeError(`${owner}: instance.metadata must be at most ${MAX_METADATA_BYTES} bytes, got more`);
    }
    copy[k] = val;
  }
  return Object.freeze(copy);
}

/**
 * watchEvent answers a frozen `{ type, instance }`. The objects an event creates are built from an empty
 * literal on purpose: a literal with fields is an allocation site, and once V8 has seen most objects of
 * a site live long (a big registry's instances, entries, events held in queues), it allocates every
 * later one straight into the old generation; there a dead event keeps the young objects it points to
 * alive through every scavenge until the next full collection, which with many services is rare, so an
 * event cost more the more services there were (2.5× at 10 000 services vs 10). An empty literal carries no such site.
 */
export function watchEvent(type: RegistryEvent['type'], instance: ServiceInstance): RegistryEvent {
  const e: { type: RegistryEvent['type']; instance: ServiceInstance } = {} as never;
  e.type = type;
  e.instance = instance;
  return Object.freeze(e);
}

/** sameInstance tells whether two instances carry the same data (so a re-register is not an update). */
export function sameInstance(a: ServiceInstance, b: ServiceInstance): boolean {
  if (a.id !== b.id || a.name !== b.name || a.address !== b.address || a.version !== b.version) return false;
  const am = a.metadata;
  const bm = b.metadata;
  if (am === bm) return true;
  if (am === undefined || bm === undefined) return false;
  const ak = Object.keys(am);
  if (ak.length !== Object.keys(bm).length) return false;
  for (const k of ak) if (am[k] !== bm[k]) return false;
  return true;
}
