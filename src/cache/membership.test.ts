import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../core/clock.js';
import { WatchResyncError } from '../core/errors.js';
import { MemoryRegistry } from '../registry/memory-registry.js';
import type { Registry, RegistryEvent, WatchOptions } from '../registry/types.js';
import { bindRegistry } from './membership.js';

/** PeerLog is a fake pool: it records the peer sets it is given. */
class PeerLog {
  sets: string[][] = [];
  constructor(readonly self: string) {}
  setPeers(...urls: string[]) {
    this.sets.push([...urls].sort());
  }
  get last() {
    return this.sets.at(-1) ?? [];
  }
}

/** FlakyRegistry is a MemoryRegistry whose first watch fails after its first event. */
class FlakyRegistry extends MemoryRegistry {
  watches = 0;
  override watch(options?: WatchOptions): AsyncIterable<RegistryEvent> {
    const inner = super.watch(options);
    if (++this.watches > 1) return inner;
    return (async function* () {
      for await (const e of inner) {
        yield e;
        throw new WatchResyncError();
      }
    })();
  }
}

/** until lets promise callbacks run (no timers: every timer is on a ManualClock) until `ok()` holds. */
const until = async (what: string, ok: () => boolean) => {
  for (let i = 0; i < 50 && !ok(); i++) await new Promise((r) => setImmediate(r));
  assert.ok(ok(), what);
};

describe('membership', () => {
  it('registers this node, lists the service and follows its changes', async () => {
    const registry = new MemoryRegistry();
    await registry.register({ id: 'other', name: 'bulwark-cache', address: '127.0.0.1:9002', metadata: { url: 'http://127.0.0.1:9002' } });
    const pool = new PeerLog('http://127.0.0.1:9001');
    const m = await bindRegistry(pool, registry);
    assert.deepEqual(m.instance, { id: '127.0.0.1-9001', name: 'bulwark-cache', address: '127.0.0.1:9001', metadata: { url: 'http://127.0.0.1:9001' } });
    assert.deepEqual(pool.last, ['http://127.0.0.1:9001', 'http://127.0.0.1:9002']);
    await registry.register({ id: 'third', name: 'bulwark-cache', address: '127.0.0.1:9003' }); // no metadata.url: http://address
    await until('third joins', () => pool.last.length === 3);
    await registry.deregister({ id: 'other', name: 'bulwark-cache', address: '127.0.0.1:9002' });
    await until('other leaves', () => pool.last.join() === 'http://127.0.0.1:9001,http://127.0.0.1:9003');
    await m.close();
    const left = await registry.getService('bulwark-cache');
    assert.deepEqual(
      left.map((i) => i.id),
      ['third'],
      'close() deregistered this node',
    );
    await registry.close();
  });

  it('leaves out instances whose URL it cannot use', async () => {
    const registry = new MemoryRegistry();
    await registry.register({ id: 'bad', name: 'bulwark-cache', address: '127.0.0.1:9002', metadata: { url: 'ftp://x' } });
    const pool = new PeerLog('http://127.0.0.1:9001');
    const m = await bindRegistry(pool, registry);
    assert.deepEqual(pool.last, ['http://127.0.0.1:9001']);
    await m.close();
    await registry.close();
  });

  it('opens the watch again after the backoff on its clock, and catches up on what changed meanwhile', async () => {
    const clock = new ManualClock();
    const registry = new FlakyRegistry();
    const pool = new PeerLog('http://127.0.0.1:9001');
    const m = await bindRegistry(pool, registry as Registry, { clock, backoff: { initialMs: 50, jitter: 'none' } });
    await registry.register({ id: 'a', name: 'bulwark-cache', address: '127.0.0.1:9002' }); // delivered, then the watch fails
    await registry.register({ id: 'b', name: 'bulwark-cache', address: '127.0.0.1:9003' }); // missed by the failed watch
    await until('a joins', () => pool.last.length === 2);
    await clock.advanceAsync(49);
    assert.equal(registry.watches, 1, 'not before the backoff');
    await clock.advanceAsync(1);
    await until('catches up after the watch failed', () => pool.last.length === 3);
    assert.equal(registry.watches, 2);
    await registry.register({ id: 'c', name: 'bulwark-cache', address: '127.0.0.1:9004' });
    await until('follows the new watch', () => pool.last.length === 4);
    await m.close();
    await registry.close();
  });

  it('registers this node with the metadata it is given, beside its url', async () => {
    const registry = new MemoryRegistry();
    const m = await bindRegistry(new PeerLog('http://127.0.0.1:9001'), registry, { metadata: { 'bulwark.status': '/dashboard/events', zone: 'a' } });
    const [got] = await registry.getService('bulwark-cache');
    assert.deepEqual(got?.metadata, { 'bulwark.status': '/dashboard/events', zone: 'a', url: 'http://127.0.0.1:9001' });
    assert.deepEqual(m.instance.metadata, got?.metadata);
    await m.close();
    await registry.close();
  });

  it('rejects a bad registry or options', async () => {
    const pool = new PeerLog('http://127.0.0.1:9001');
    await assert.rejects(bindRegistry(pool, {} as Registry), /registry/);
    await assert.rejects(bindRegistry(pool, new MemoryRegistry(), { ttlMs: -1 }), /ttlMs/);
    await assert.rejects(
      bindRegistry(pool, new MemoryRegistry(), { metadata: { url: 'http://elsewhere:1' } }),
      /HttpPool.bindRegistry: metadata.url is the pool's own URL/,
    );
    await assert.rejects(
      bindRegistry(pool, new MemoryRegistry(), { metadata: { zone: 1 } as never }),
      /HttpPool.bindRegistry: metadata.zone must be a string, got 1/,
    );
    await assert.rejects(bindRegistry(pool, new MemoryRegistry(), { metadata: 'x' as never }), /HttpPool.bindRegistry: metadata must be an object of strings/);
  });

  it('renews its registration every ttlMs / 3 on its clock, so it outlives the TTL, and deregisters on close', async () => {
    const clock = new ManualClock();
    const registry = new MemoryRegistry({ clock, sweepIntervalMs: 0 });
    const pool = new PeerLog('http://127.0.0.1:9001');
    const m = await bindRegistry(pool, registry, { clock, ttlMs: 3_000 });
    for (let i = 0; i < 10; i++) await clock.advanceAsync(1_000);
    assert.deepEqual(
      (await registry.getService('bulwark-cache')).map((i) => i.id),
      ['127.0.0.1-9001'],
    );
    assert.deepEqual(pool.last, ['http://127.0.0.1:9001']);
    await m.close();
    assert.equal(registry.stats().instances, 0);
    assert.equal(clock.pendingTimers, 0, 'no timer left behind');
    await registry.close();
  });
});
