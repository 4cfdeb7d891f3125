import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as tick } from 'node:timers/promises';
import { ManualClock } from '../core/clock.js';
import { ClosedError, NotFoundError } from '../core/errors.js';
import type { Registry, RegistryEvent, ServiceInstance, WatchOptions } from '../registry/types.js';
import { RegistryFollower } from './registry-follower.js';
import { inst } from './test-fixtures.js';

/**
 * LateRegistry behaves as an etcd watch does: a watch misses every change until it is established
 * (`establish()`), then gets every change; with `callsOnReady: false` it never says it is established
 * (a registry written before `onReady` existed).
 */
class LateRegistry implements Registry {
  readonly byId = new Map<string, ServiceInstance>();
  lists = 0;
  private readonly pending: (() => void)[] = [];
  private readonly live = new Set<(e: RegistryEvent) => void>();

  constructor(private readonly callsOnReady = true) {}

  async register(i: ServiceInstance): Promise<void> {
    const type = this.byId.has(i.id) ? 'update' : 'create';
    this.byId.set(i.id, i);
    for (const push of this.live) push({ type, instance: i });
  }
  async deregister(i: ServiceInstance): Promise<void> {
    if (this.byId.delete(i.id)) for (const push of this.live) push({ type: 'delete', instance: i });
  }
  async getService(name: string): Promise<ServiceInstance[]> {
    this.lists++;
    const out = [...this.byId.values()].filter((i) => i.name === name);
    if (out.length === 0) throw new NotFoundError(name);
    return out;
  }
  async listServices(): Promise<string[]> {
    return [];
  }
  /** establish makes every watch started so far live (and calls its onReady). */
  establish(): void {
    for (const f of this.pending.splice(0)) f();
  }
  watch(options?: WatchOptions): AsyncIterable<RegistryEvent> {
    const queue: RegistryEvent[] = [];
    let wake: (() => void) | undefined;
    const push = (e: RegistryEvent) => {
      queue.push(e);
      wake?.();
    };
    this.pending.push(() => {
      this.live.add(push);
      if (this.callsOnReady) options?.onReady?.();
    });
    const live = this.live;
    const signal = options?.signal;
    return {
      async *[Symbol.asyncIterator]() {
        try {
          while (!signal?.aborted) {
            const e = queue.shift();
            if (e !== undefined) yield e;
            else {
              await new Promise<void>((resolve) => {
                wake = resolve;
                signal?.addEventListener('abort', () => resolve(), { once: true });
              });
              wake = undefined;
            }
          }
        } finally {
          live.delete(push);
        }
      },
    };
  }
  async close(): Promise<void> {}
}

async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await tick();
}

/** follow starts a follower of `svc` and keeps the view its hooks build. */
function follow(reg: Registry, readyWaitMs?: number) {
  const view = new Map<string, ServiceInstance>();
  const hooks = {
    onList(list: readonly ServiceInstance[]) {
      view.clear();
      for (const i of list) view.set(i.id, i);
    },
    onEvent(e: RegistryEvent) {
      if (e.type === 'delete') view.delete(e.instance.id);
      else view.set(e.instance.id, e.instance);
    },
  };
  const f = new RegistryFollower(reg, 'svc', hooks, new ManualClock(), () => 0, readyWaitMs === undefined ? {} : { readyWaitMs });
  return { f, ids: () => [...view.keys()].sort() };
}

describe('RegistryFollower', () => {
  it('lists only once the watch is established, so a change made while the watch was starting is not lost', async () => {
    const reg = new LateRegistry();
    await reg.register(inst('a'));
    const { f, ids } = follow(reg, 60_000);
    await settle();
    assert.equal(reg.lists, 0, 'no listing before the watch is ready');
    await reg.register(inst('b')); // the watch is not live yet: this change comes as no event
    reg.establish();
    await f.ready();
    await settle();
    assert.deepEqual(ids(), ['a', 'b']);
    await reg.deregister(inst('a')); // after onReady: through the watch
    await settle();
    assert.deepEqual(ids(), ['b']);
    await f.close();
  });

  it('converges when a change lands both in the listing and in the watch', async () => {
    const reg = new LateRegistry();
    await reg.register(inst('a'));
    const { f, ids } = follow(reg, 60_000);
    reg.establish();
    await reg.register(inst('b'));
    await reg.deregister(inst('a'));
    await f.ready();
    await settle();
    assert.deepEqual(ids(), ['b']);
    await f.close();
  });

  it('lists after readyWaitMs for a registry that never calls onReady', async () => {
    const reg = new LateRegistry(false);
    await reg.register(inst('a'));
    const { f, ids } = follow(reg, 20);
    reg.establish(); // live, but says nothing
    await new Promise((r) => setTimeout(r, 40)); // the follower's fallback timer is unref'd: hold the loop open past it
    await f.ready();
    assert.equal(reg.lists, 1);
    assert.deepEqual(ids(), ['a']);
    await reg.register(inst('b'));
    await settle();
    assert.deepEqual(ids(), ['a', 'b']);
    await f.close();
  });

  it('takes a first event as the sign that a silent watch is established', async () => {
    const reg = new LateRegistry(false);
    await reg.register(inst('a'));
    const { f, ids } = follow(reg, 60_000);
    reg.establish();
    await reg.register(inst('b'));
    await f.ready();
    await settle();
    assert.deepEqual(ids(), ['a', 'b']);
    await f.close();
  });

  it('closes while still waiting for the watch, and ready() rejects', async () => {
    const reg = new LateRegistry();
    const { f } = follow(reg, 60_000);
    const ready = f.ready();
    await f.close();
    await assert.rejects(ready, ClosedError);
    assert.equal(reg.lists, 0);
  });

  it('rejects a bad readyWaitMs naming it', () => {
    assert.throws(() => follow(new LateRegistry(), -1), /readyWaitMs/);
  });
});
