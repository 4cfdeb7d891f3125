import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../core/clock.js';
import { AbortedError, NotFoundError } from '../core/errors.js';
import { announce } from './announce.js';
import { MemoryRegistry } from './memory-registry.js';
import type { CallOptions, RegisterOptions, ServiceInstance } from './types.js';

const me: ServiceInstance = { id: 'me', name: 'api', address: '127.0.0.1:8080' };
const flush = () => new Promise((r) => setImmediate(r));

describe('announce', () => {
  it('registers, renews every ttlMs / 3 on the clock so the instance never expires, and deregisters on close', async () => {
    const clock = new ManualClock();
    const registry = new MemoryRegistry({ clock, sweepIntervalMs: 0 });
    const a = await announce(registry, me, { ttlMs: 3_000, clock, signals: [] });
    assert.equal((await registry.getService('api')).length, 1);
    for (let i = 0; i < 10; i++) await clock.advanceAsync(1_000);
    assert.equal((await registry.getService('api')).length, 1, 'still registered after 10 s with a 3 s TTL');
    assert.equal(a.stats().registrations, 11);
    await a.close();
    assert.equal(await a.shutdown, undefined, 'close() resolves shutdown with no signal');
    await assert.rejects(registry.getService('api'), NotFoundError);
    assert.deepEqual(a.stats(), { registrations: 11, failures: 0, registered: false });
    assert.equal(clock.pendingTimers, 0, 'the renewal timer is gone');
    await a.close(); // idempotent
    await registry.close();
  });

  it('reports a failed renewal and tries again at the next turn', async () => {
    const clock = new ManualClock();
    const registry = new MemoryRegistry({ clock, sweepIntervalMs: 0 });
    let fail = false;
    const flaky = {
      register: (i: ServiceInstance, o?: RegisterOptions) => (fail ? Promise.reject(new Error('registry down')) : registry.register(i, o)),
      deregister: (i: ServiceInstance, o?: CallOptions) => registry.deregister(i, o),
    };
    const errors: string[] = [];
    const a = await announce(flaky, me, { ttlMs: 300, clock, signals: [], onError: (e) => errors.push((e as Error).message) });
    fail = true;
    await clock.advanceAsync(100);
    assert.deepEqual(errors, ['registry down']);
    fail = false;
    await clock.advanceAsync(100);
    assert.deepEqual(a.stats(), { registrations: 2, failures: 1, registered: true });
    await a.close();
    await registry.close();
  });

  it('resolves shutdown after deregisterTimeoutMs of clock time when deregistration hangs', async () => {
    const clock = new ManualClock();
    const errors: unknown[] = [];
    let signal: AbortSignal | undefined;
    const hanging = {
      register: async () => {},
      deregister: (_i: ServiceInstance, o?: CallOptions) => {
        signal = o?.signal;
        return new Promise<void>(() => {});
      },
    };
    const a = await announce(hanging, me, { clock, signals: [], deregisterTimeoutMs: 2_000, onError: (e) => errors.push(e) });
    const closed = a.close();
    await clock.advanceAsync(1_999);
    assert.equal(errors.length, 0);
    await clock.advanceAsync(1);
    await closed;
    assert.ok(errors[0] instanceof AbortedError);
    assert.equal(signal?.aborted, true, 'the deregistration was told to give up');
  });

  it('listens for SIGTERM and SIGINT by default and stops listening once closed; signals: [] listens for none', async () => {
    const registry = new MemoryRegistry();
    const before = [process.listenerCount('SIGTERM'), process.listenerCount('SIGINT')];
    const a = await announce(registry, me);
    assert.deepEqual([process.listenerCount('SIGTERM'), process.listenerCount('SIGINT')], [before[0]! + 1, before[1]! + 1]);
    const b = await announce(registry, { ...me, id: 'me2' }, { signals: [] });
    assert.deepEqual([process.listenerCount('SIGTERM'), process.listenerCount('SIGINT')], [before[0]! + 1, before[1]! + 1]);
    await a.close();
    await b.close();
    assert.deepEqual([process.listenerCount('SIGTERM'), process.listenerCount('SIGINT')], before);
    await registry.close();
  });

  it('rejects a bad registry, instance or options before registering anything, and honours an aborted signal', async () => {
    const registry = new MemoryRegistry();
    await assert.rejects(announce({} as MemoryRegistry, me), /registry/);
    await assert.rejects(announce(registry, { ...me, id: 'a/b' }), /instance\.id/);
    await assert.rejects(announce(registry, me, { ttlMs: -1 }), /ttlMs/);
    await assert.rejects(announce(registry, me, { signals: ['TERM' as NodeJS.Signals] }), /signals/);
    await assert.rejects(announce(registry, me, { signal: AbortSignal.abort() }), AbortedError);
    await flush();
    await assert.rejects(registry.getService('api'), NotFoundError);
    await registry.close();
  });
});
