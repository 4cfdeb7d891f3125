/**
 * Fixtures for the balancer's unit tests (and the client's): instances and a seeded random source.
 * Not part of the public API: nothing in src/ outside tests imports it.
 */
import { setImmediate as tick } from 'node:timers/promises';
import { NotFoundError } from '../core/errors.js';
import type { Registry, RegistryEvent, ServiceInstance, WatchOptions } from '../registry/types.js';

/** inst builds a ServiceInstance of service `svc` with an optional weight. */
export function inst(id: string, weight?: string, extra: Partial<ServiceInstance> = {}): ServiceInstance {
  return Object.freeze({
    id,
    name: 'svc',
    address: `127.0.0.1:${1000 + (hashId(id) % 50000)}`,
    ...(weight === undefined ? {} : { metadata: { weight } }),
    ...extra,
  });
}

/** instances builds `n` instances `i0` … `i(n-1)`. */
export function instances(n: number, prefix = 'i'): ServiceInstance[] {
  return Array.from({ length: n }, (_, i) => inst(`${prefix}${i}`));
}

/** FakeRegistry is a Registry of our own for unit tests: a map, scripted failures, pushable watches. */
export class FakeRegistry implements Registry {
  readonly byId = new Map<string, ServiceInstance>();
  listFailures: Error[] = [];
  lists = 0;
  readonly watches = new Set<{ push: (e: RegistryEvent | Error) => void; signal: AbortSignal | undefined }>();

  async register(i: ServiceInstance): Promise<void> {
    const type = this.byId.has(i.id) ? 'update' : 'create';
    this.byId.set(i.id, i);
    this.emit({ type, instance: i });
  }
  async deregister(i: ServiceInstance): Promise<void> {
    if (this.byId.delete(i.id)) this.emit({ type: 'delete', instance: i });
  }
  async getService(name: string): Promise<ServiceInstance[]> {
    this.lists++;
    const err = this.listFailures.shift();
    if (err) throw err;
    const out = [...this.byId.values()].filter((i) => i.name === name);
    if (out.length === 0) throw new NotFoundError(`no ${name}`);
    return out;
  }
  async listServices(): Promise<string[]> {
    return [...new Set([...this.byId.values()].map((i) => i.name))];
  }
  watch(options?: WatchOptions): AsyncIterable<RegistryEvent> {
    const queue: (RegistryEvent | Error)[] = [];
    let wake: (() => void) | undefined;
    const w = { push: (e: RegistryEvent | Error) => (queue.push(e), wake?.()), signal: options?.signal };
    const watches = this.watches;
    return {
      async *[Symbol.asyncIterator]() {
        watches.add(w);
        options?.onReady?.(); // established as soon as it is iterated
        try {
          while (!options?.signal?.aborted) {
            const e = queue.shift();
            if (e instanceof Error) throw e;
            if (e !== undefined) yield e;
            else {
              await new Promise<void>((resolve) => {
                wake = resolve;
                options?.signal?.addEventListener('abort', () => resolve(), { once: true });
              });
              wake = undefined;
            }
          }
        } finally {
          watches.delete(w);
        }
      },
    };
  }
  async close(): Promise<void> {}
  emit(e: RegistryEvent | Error): void {
    for (const w of this.watches) w.push(e);
  }
}

export async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await tick();
}

function hashId(id: string): number {
  let h = 0;
  for (let i = 0; i < id.length; i++) h = (h * 31 + id.charCodeAt(i)) >>> 0;
  return h;
}

export { seeded } from '../../test/support/random.js';
