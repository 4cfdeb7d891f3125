import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../core/clock.js';
import { AbortedError, ClosedError, NotFoundError, WatchResyncError } from '../core/errors.js';
import { MemoryRegistry } from './memory-registry.js';
import type { RegistryEvent, ServiceInstance } from './types.js';

const inst = (id: string, extra: Partial<ServiceInstance> = {}): ServiceInstance => ({ id, name: 'api', address: '127.0.0.1:8080', ...extra });

describe('MemoryRegistry', () => {
  it('expires an instance not registered again within its TTL and tells watchers', async () => {
    const clock = new ManualClock();
    const r = new MemoryRegistry({ clock, sweepIntervalMs: 0 });
    const w = r.watch({ service: 'api' })[Symbol.asyncIterator]();
    await r.register(inst('a'), { ttlMs: 1000 });
    await r.register(inst('b'));
    assert.equal((await w.next()).value?.type, 'create');
    assert.equal((await w.next()).value?.type, 'create');
    clock.advance(999);
    assert.equal((await r.getService('api')).length, 2);
    clock.advance(1);
    assert.deepEqual(
      (await r.getService('api')).map((i) => i.id),
      ['b'],
    );
    assert.deepEqual((await w.next()).value, { type: 'delete', instance: inst('a') });
    await r.close();
  });

  it('renews the TTL on a second register, without an event when nothing changed', async () => {
    const clock = new ManualClock();
    const r = new MemoryRegistry({ clock, sweepIntervalMs: 0, ttlMs: 1000 });
    const events: RegistryEvent[] = [];
    const it = r.watch()[Symbol.asyncIterator]();
    await r.register(inst('a'));
    clock.advance(800);
    await r.register(inst('a'));
    clock.advance(800);
    assert.equal((await r.getService('api')).length, 1);
    await r.register(inst('a', { version: '2' }));
    await r.close();
    for (let e = await it.next(); !e.done; e = await it.next()) events.push(e.value);
    assert.deepEqual(
      events.map((e) => e.type),
      ['create', 'update'],
    );
  });

  it('tells a watcher that falls behind to resync after delivering what it queued, instead of dropping events', async () => {
    const r = new MemoryRegistry({ watchQueueSize: 3, sweepIntervalMs: 0 });
    const it = r.watch()[Symbol.asyncIterator]();
    for (let i = 0; i < 5; i++) await r.register(inst(`i${i}`));
    const got: string[] = [];
    await assert.rejects(async () => {
      for (;;) {
        const n = await it.next();
        if (n.done) break;
        got.push(n.value.instance.id);
      }
    }, WatchResyncError);
    assert.deepEqual(got, ['i0', 'i1', 'i2']);
    assert.equal((await it.next()).done, true);
    // other watchers are not affected
    const w2 = r.watch()[Symbol.asyncIterator]();
    await r.deregister(inst('i0'));
    assert.equal((await w2.next()).value?.type, 'delete');
    await r.close();
  });

  it('ends a watch when its signal aborts, and every watch on close', async () => {
    const r = new MemoryRegistry({ sweepIntervalMs: 0 });
    const ac = new AbortController();
    const a = r.watch({ signal: ac.signal })[Symbol.asyncIterator]();
    const b = r.watch()[Symbol.asyncIterator]();
    const pa = a.next();
    ac.abort();
    assert.equal((await pa).done, true);
    const pb = b.next();
    await r.close();
    assert.equal((await pb).done, true);
    await assert.rejects(r.getService('api'), ClosedError);
  });

  it('rejects NotFoundError for a service without instances and forgets emptied services', async () => {
    const r = new MemoryRegistry({ sweepIntervalMs: 0 });
    await assert.rejects(r.getService('api'), NotFoundError);
    await r.register(inst('a'));
    assert.deepEqual(await r.listServices(), ['api']);
    await r.deregister(inst('a'));
    assert.deepEqual(await r.listServices(), []);
    await assert.rejects(r.getService('api'), NotFoundError);
    await r.close();
  });

  it('keeps what it stored safe from the caller mutating its input', async () => {
    const r = new MemoryRegistry({ sweepIntervalMs: 0 });
    const mine = { id: 'a', name: 'api', address: '127.0.0.1:1', metadata: { zone: 'x' } };
    await r.register(mine);
    mine.metadata.zone = 'y';
    mine.address = 'evil:1';
    const [got] = await r.getService('api');
    assert.equal(got!.address, '127.0.0.1:1');
    assert.equal(got!.metadata?.zone, 'x');
    assert.ok(Object.isFrozen(got));
    await r.close();
  });

  it('validates options at construction', () => {
    assert.throws(() => new MemoryRegistry({ ttlMs: -1 }), /ttlMs/);
    assert.throws(() => new MemoryRegistry({ watchQueueSize: 0 }), /watchQueueSize/);
    assert.throws(() => new MemoryRegistry({ clock: {} as never }), /clock/);
  });

  it('hands an event only to the watchers of its service and to watchers of every service', async () => {
    const reg = new MemoryRegistry({ sweepIntervalMs: 0 });
    const queues = ['a', 'b', undefined].map((service) => reg.watch({ service })[Symbol.asyncIterator]());
    assert.equal(reg.stats().watchers, 3);
    await reg.register({ id: 'x', name: 'a', address: '127.0.0.1:1' });
    await reg.register({ id: 'y', name: 'b', address: '127.0.0.1:2' });
    const [a, b, all] = queues as [AsyncIterator<RegistryEvent>, AsyncIterator<RegistryEvent>, AsyncIterator<RegistryEvent>];
    assert.equal((await a.next()).value.instance.id, 'x');
    assert.equal((await b.next()).value.instance.id, 'y');
    assert.deepEqual([(await all.next()).value.instance.id, (await all.next()).value.instance.id], ['x', 'y']);
    await a.return!();
    assert.equal(reg.stats().watchers, 2);
    assert.deepEqual(reg.stats(), { services: 2, instances: 2, watchers: 2, events: 2, expired: 0 });
    await reg.close();
    assert.equal(reg.stats().watchers, 0);
  });

  it('runs its sweep on the injected clock, and counts what expired', async () => {
    const clock = new ManualClock();
    const reg = new MemoryRegistry({ clock, sweepIntervalMs: 1_000 });
    await reg.register({ id: 'x', name: 'a', address: '127.0.0.1:1' }, { ttlMs: 1_500 });
    const events = reg.watch({ service: 'a' })[Symbol.asyncIterator]();
    clock.advance(1_999);
    assert.equal(reg.stats().instances, 1, 'not yet swept');
    clock.advance(1);
    assert.equal(reg.stats().expired, 1, 'the sweep at 2 000 ms removed it');
    assert.equal((await events.next()).value.type, 'delete');
    await reg.close();
    assert.equal(clock.pendingTimers, 0, 'close stops the sweep timer');
  });

  it('rejects AbortedError for calls whose signal is already aborted, without doing them', async () => {
    const reg = new MemoryRegistry({ sweepIntervalMs: 0 });
    const signal = AbortSignal.abort();
    const i = { id: 'x', name: 'a', address: '127.0.0.1:1' };
    await assert.rejects(reg.register(i, { signal }), AbortedError);
    await assert.rejects(reg.getService('a', { signal }), AbortedError);
    await reg.register(i);
    await assert.rejects(reg.deregister(i, { signal }), AbortedError);
    assert.equal((await reg.getService('a')).length, 1);
    await reg[Symbol.asyncDispose]();
    await assert.rejects(reg.getService('a'), ClosedError);
  });
});
