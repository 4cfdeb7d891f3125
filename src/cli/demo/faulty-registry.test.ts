import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../../core/clock.js';
import { RegistryUnavailableError } from '../../core/errors.js';
import { MemoryRegistry } from '../../registry/memory-registry.js';
import { RegistryCache } from '../../registry/registry-cache.js';
import { FaultyRegistry } from './faulty-registry.js';

const inst = { id: 'a', name: 'payments', address: '127.0.0.1:1' };

describe('FaultyRegistry', () => {
  it('refuses lookups while down and answers again once back', async () => {
    const memory = new MemoryRegistry();
    const r = new FaultyRegistry(memory);
    await r.register(inst);
    r.setAnswering(false);
    await assert.rejects(r.getService('payments'), RegistryUnavailableError);
    await assert.rejects(r.listServices(), RegistryUnavailableError);
    r.setAnswering(true);
    assert.equal((await r.getService('payments')).length, 1);
    assert.equal(r.refused, 2);
    await r.close();
  });

  it('breaks open watches when it goes down and refuses new ones until back', async () => {
    const memory = new MemoryRegistry();
    const r = new FaultyRegistry(memory);
    const it1 = r.watch({ service: 'payments' })[Symbol.asyncIterator]();
    const pending = it1.next();
    await new Promise((res) => setImmediate(res));
    r.setAnswering(false);
    await assert.rejects(pending, RegistryUnavailableError);
    await assert.rejects(r.watch({ service: 'payments' })[Symbol.asyncIterator]().next(), RegistryUnavailableError);
    r.setAnswering(true);
    const it2 = r.watch({ service: 'payments' })[Symbol.asyncIterator]();
    const next = it2.next();
    await new Promise((res) => setImmediate(res));
    await memory.register(inst);
    assert.equal((await next).value?.type, 'create');
    await it2.return?.();
    await r.close();
  });

  it('lets a RegistryCache in front of it answer stale entries while it is down', async () => {
    const memory = new MemoryRegistry();
    const r = new FaultyRegistry(memory);
    await memory.register(inst);
    const clock = new ManualClock();
    const cache = new RegistryCache(r, { ttlMs: 1, minRetryIntervalMs: 0, watch: false, clock });
    assert.equal((await cache.getService('payments')).length, 1);
    clock.advance(5); // past the entry's TTL
    r.setAnswering(false);
    assert.equal((await cache.getService('payments'))[0]!.id, 'a');
    assert.ok(cache.stats().stale >= 1);
    await cache.close();
    await r.close();
  });
});
