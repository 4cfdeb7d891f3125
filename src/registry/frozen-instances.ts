/**
 * The frozen instance lists a RegistryCache hands out: frozen once, and an unchanged instance keeping
 * its identity across listings.
 */
import type { ServiceInstance } from './types.js';
import { sameInstance } from './validate.js';

export function freezeList(list: readonly ServiceInstance[]): readonly ServiceInstance[] {
  const out: ServiceInstance[] = [];
  for (const i of list) out.push(Object.isFrozen(i) && (i.metadata === undefined || Object.isFrozen(i.metadata)) ? i : freezeInstance(i));
  return Object.freeze(out);
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
