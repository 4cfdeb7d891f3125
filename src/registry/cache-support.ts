/**
 * RegistryCache's pure helpers: freezing what it hands out, replaying watch events over a listing, and
 * wrapping the pass-through watch so that it ends with the cache.
 */
import { NotFoundError, RegistryUnavailableError } from '../core/errors.js';
import type { RegistryEvent, ServiceInstance } from './types.js';

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
