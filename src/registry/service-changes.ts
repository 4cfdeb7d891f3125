/**
 * A service's instance list across watch events: events replayed over a listing, and the change a
 * RegistryCache reports.
 */
import type { RegistryEvent, ServiceChange, ServiceInstance } from './types.js';

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

/** serviceChange answers `{ service, instances }`, built from an empty literal (no allocation site: see watchEvent in validate.ts). */
export function serviceChange(service: string, instances: readonly ServiceInstance[]): ServiceChange {
  const c: { service: string; instances: readonly ServiceInstance[] } = {} as never;
  c.service = service;
  c.instances = instances;
  return c;
}
