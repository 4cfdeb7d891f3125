/**
 * Fixtures for the balancer's unit tests (and the client's): instances and a seeded random source.
 * Not part of the public API: nothing in src/ outside tests imports it.
 */
import type { ServiceInstance } from '../registry/types.js';

/** inst builds a ServiceInstance of service `svc` with an optional weight. */
export function inst(id: string, weight?: string, extra: Partial<ServiceInstance> = {}): ServiceInstance {
  return Object.freeze({ id, name: 'svc', address: `127.0.0.1:${1000 + (hashId(id) % 50000)}`, ...(weight === undefined ? {} : { metadata: { weight } }), ...extra });
}

/** instances builds `n` instances `i0` … `i(n-1)`. */
export function instances(n: number, prefix = 'i'): ServiceInstance[] {
  return Array.from({ length: n }, (_, i) => inst(`${prefix}${i}`));
}


function hashId(id: string): number {
  let h = 0;
  for (let i = 0; i < id.length; i++) h = (h * 31 + id.charCodeAt(i)) >>> 0;
  return h;
}

export { seeded } from '../../test/support/random.js';
