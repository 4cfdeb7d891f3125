import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as tick } from 'node:timers/promises';
import { BulkheadRejectedError, TimeoutError } from '../core/errors.js';
import { ManualClock } from '../core/clock.js';
import { BreakerGroup } from '../breaker/breaker-group.js';
import { CircuitBreaker } from '../breaker/circuit-breaker.js';
import { MemoryRegistry } from '../registry/memory-registry.js';
import { ResilientClient } from './resilient-client.js';

/** A client over services 'svc' and 'other' (two instances each), with no breakers in the way and no backoff waits. */
async function setup() {
  const clock = new ManualClock();
  const registry = new MemoryRegistry({ clock });
  for (const name of ['svc', 'other']) {
    for (const id of ['a', 'b']) await registry.register({ id, name, address: `127.0.0.1:${(name === 'svc' ? 9000 : 9100) + (id === 'a' ? 1 : 2)}` });
  }
  const breakers = new BreakerGroup({ factory: (name) => new CircuitBreaker({ name, clock }), exclude: () => true, clock });
  const client = new ResilientClient({ registry, clock, breakers, retryBackoff: { initialMs: 0, maxMs: 0 }, maxAttempts: 2 });
  let attempts = 0;
  const failing = () => {
    attempts++;
    return Promise.reject(new Error('down'));
  };
  return {
    clock,
    client,
    failing,
    attempts: () => {
      const n = attempts;
      attempts = 0;
      return n;
    },
    async close() {
      await client.close();
      await registry.close();
    },
  };
}

describe('ResilientClient.reconfigureService', () => {
  it("answers the client's options for a service it has not changed", async () => {
    const t = await setup();
    assert.deepEqual(t.client.serviceOptions('svc'), {
      timeoutMs: 10_000,
      maxAttempts: 2,
      bulkhead: { maxConcurrent: 1_000, maxQueued: 0 },
      retryBudget: { windowMs: 10_000, buckets: 10, percentCanRetry: 0.2, minRetriesPerSec: 10 },
      retryBackoff: { initialMs: 0, maxMs: 0, multiplier: 2, jitter: 'full' },
    });
    await t.close();
  });

  it("changes maxAttempts of an open service, and of one not called yet when it opens; other services keep the client's", async () => {
    const t = await setup();
    await assert.rejects(t.client.call('svc', t.failing));
    assert.equal(t.attempts(), 2);
    t.client.reconfigureService('svc', { maxAttempts: 4 });
    await assert.rejects(t.client.call('svc', t.failing));
    assert.equal(t.attempts(), 4);
    await assert.rejects(t.client.call('svc', t.failing, { retry: { maxAttempts: undefined } }));
    assert.equal(t.attempts(), 4); // a call's { maxAttempts } defaults to the service's
    t.client.reconfigureService('other', { maxAttempts: 1 }); // before its first call
    await assert.rejects(t.client.call('other', t.failing));
    assert.equal(t.attempts(), 1);
    t.client.reconfigureService('svc', { maxAttempts: 1 });
    await assert.rejects(t.client.call('svc', t.failing));
    assert.equal(t.attempts(), 1);
    await t.close();
  });

  it("gives the service's attempts a new deadline; a call under way keeps its own", async () => {
    const t = await setup();
    const hang = () => new Promise<never>(() => {});
    await t.client.call('svc', async () => 'warm');
    const before = t.client.call('svc', hang, { retry: false }).catch((e: unknown) => e);
    t.client.reconfigureService('svc', { timeoutMs: 100 });
    const after = t.client.call('svc', hang, { retry: false }).catch((e: unknown) => e);
    await t.clock.advanceAsync(102);
    assert.ok((await after) instanceof TimeoutError);
    let settled = false;
    void before.then(() => (settled = true));
    await tick();
    assert.equal(settled, false);
    await t.clock.advanceAsync(10_000);
    assert.ok((await before) instanceof TimeoutError);
    await t.close();
  });

  it('lays a nested option over the one the service runs: its bulkhead keeps the calls it runs', async () => {
    const t = await setup();
    let open!: () => void;
    const gate = new Promise<string>((r) => (open = () => r('done')));
    await t.client.call('svc', async () => 'warm');
    const running = [t.client.call('svc', () => gate), t.client.call('svc', () => gate)];
    await tick();
    t.client.reconfigureService('svc', { bulkhead: { maxConcurrent: 1 } });
    assert.deepEqual(t.client.serviceOptions('svc').bulkhead, { maxConcurrent: 1, maxQueued: 0 });
    await assert.rejects(
      t.client.call('svc', async () => 'x', { retry: false }),
      BulkheadRejectedError,
    );
    open();
    assert.deepEqual(await Promise.all(running), ['done', 'done']);
    assert.equal(await t.client.call('svc', async () => 'after'), 'after');
    await t.close();
  });

  it("refuses a bad value with the constructor's message, and the client's own options; nothing changes", async () => {
    const t = await setup();
    await t.client.call('svc', async () => 'warm');
    const before = t.client.serviceOptions('svc');
    assert.throws(() => new ResilientClient({ registry: new MemoryRegistry(), bulkhead: { maxConcurrent: 0 } }), {
      name: 'RangeError',
      message: 'ResilientClient: bulkhead.maxConcurrent must be an integer in [1, 1000000000], got 0',
    });
    assert.throws(() => t.client.reconfigureService('svc', { maxAttempts: 5, bulkhead: { maxConcurrent: 0 } }), {
      name: 'RangeError',
      message: 'ResilientClient: bulkhead.maxConcurrent must be an integer in [1, 1000000000], got 0',
    });
    assert.throws(() => t.client.reconfigureService('svc', { maxAttempts: 5, retryBudget: { percentCanRetry: -1 } }), {
      name: 'RangeError',
      message: 'ResilientClient: retryBudget.percentCanRetry must be a finite number in [0, 1000], got -1',
    });
    assert.throws(() => t.client.reconfigureService('svc', { timeoutMs: -1 }), {
      name: 'RangeError',
      message: /^ResilientClient: timeoutMs must be a finite number in \[0, /,
    });
    assert.throws(() => t.client.reconfigureService('svc', { balancer: { strategy: 'random' } } as never), {
      name: 'TypeError',
      message: /^ResilientClient: balancer cannot change on a running client; it is set at construction only/,
    });
    assert.throws(() => t.client.reconfigureService('svc', { maxAtempts: 5 } as never), {
      name: 'TypeError',
      message: /^ResilientClient: maxAtempts is not an option; the options are /,
    });
    assert.deepEqual(t.client.serviceOptions('svc'), before);
    await assert.rejects(t.client.call('svc', t.failing));
    assert.equal(t.attempts(), 2);
    await t.close();
  });
  it("keeps no entry for a service set back to the client's options (its deadline is the client's again), and bounds the services with options of their own by maxServices", async () => {
    const clock = new ManualClock();
    const registry = new MemoryRegistry({ clock });
    for (const name of ['svc', 'b', 'c']) await registry.register({ id: 'a', name, address: '127.0.0.1:9001' });
    const client = new ResilientClient({ registry, clock, maxServices: 2, maxAttempts: 1, timeoutMs: 1_000 });
    const hang = () => new Promise<never>(() => {});
    const before = client.serviceOptions('svc');
    client.reconfigureService('svc', { timeoutMs: 50 });
    client.reconfigureService('b', { maxAttempts: 2 });
    // A third service's own options are one too many; the first two may still change.
    assert.throws(
      () => client.reconfigureService('c', { maxAttempts: 2 }),
      /at most maxServices \(2\) services may hold settings of their own; c would be one more/,
    );
    assert.deepEqual(client.serviceOptions('c'), before);
    client.reconfigureService('b', { maxAttempts: 3 });
    // Back to the client's options: the entry is freed, and 'svc' runs the client's 1 s deadline again.
    await client.call('svc', async () => 'open');
    client.reconfigureService('svc', before);
    client.reconfigureService('c', { maxAttempts: 2 });
    const call = client.call('svc', hang).catch((e: unknown) => e);
    await clock.advanceAsync(60);
    let settled = false;
    void call.then(() => (settled = true));
    await tick();
    assert.equal(settled, false, 'the 50 ms deadline no longer applies');
    await clock.advanceAsync(1_000);
    assert.ok((await call) instanceof TimeoutError);
    // The same bound for weights and faults; removing one frees its place.
    client.setWeights('svc', { a: 1 });
    client.setWeights('b', { a: 2 });
    assert.throws(() => client.setWeights('c', { a: 1 }), /ResilientClient.setWeights: at most maxServices \(2\)/);
    client.setWeights('svc', undefined);
    client.setWeights('c', { a: 1 });
    client.setFault('svc', { abort: { percent: 1, status: 503 } });
    client.setFault('b', { abort: { percent: 1, status: 503 } });
    assert.throws(() => client.setFault('c', { abort: { percent: 1, status: 503 } }), /ResilientClient.setFault: at most maxServices \(2\)/);
    client.setFault('svc', undefined);
    client.setFault('c', { abort: { percent: 1, status: 503 } });
    await client.close();
    await registry.close();
  });
});
