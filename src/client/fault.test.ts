import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../core/clock.js';
import { FaultInjectedError, TimeoutError } from '../core/errors.js';
import { BreakerGroup } from '../breaker/breaker-group.js';
import { CircuitBreaker } from '../breaker/circuit-breaker.js';
import { MemoryRegistry } from '../registry/memory-registry.js';
import { ResilientClient, type ResilientClientOptions } from './resilient-client.js';

async function setup(options: Partial<ResilientClientOptions> = {}) {
  const clock = new ManualClock();
  const registry = new MemoryRegistry();
  for (const id of ['a', 'b']) await registry.register({ id, name: 'svc', address: `127.0.0.1:${id === 'a' ? 9001 : 9002}` });
  const breakers = new BreakerGroup({
    clock,
    factory: (name: string) => new CircuitBreaker({ name, clock, minimumCalls: 4, failureRate: 0.5 }),
    exclude: (name: string) => !name.includes('/'),
  });
  const client = new ResilientClient({ registry, clock, breakers, balancer: { strategy: 'round-robin', outlier: false }, timeoutMs: 0, ...options });
  /** settle waits for `p`, moving the clock on 5 ms at a time (retry backoffs wait on it), for at most 10 s of it. */
  const settle = async <T>(p: Promise<T>): Promise<T | unknown> => {
    let done = false;
    const q = p
      .then(
        (v) => v,
        (e: unknown) => e,
      )
      .finally(() => (done = true));
    for (let i = 0; i < 2_000 && !done; i++) await clock.advanceAsync(5);
    return q;
  };
  return {
    clock,
    client,
    settle,
    async close() {
      await client.close();
      await registry.close();
    },
  };
}

describe('ResilientClient fault injection', () => {
  it('fails attempts with FaultInjectedError that the breakers, retry and fallback see, without calling the instance', async () => {
    const t = await setup();
    t.client.setFault('svc', { abort: { percent: 100, status: 503 } });
    let ran = 0;
    const err = await t.settle(t.client.call('svc', () => ran++));
    assert.ok(err instanceof FaultInjectedError);
    assert.equal(err.status, 503);
    assert.equal(ran, 0);
    const s = t.client.stats();
    assert.equal(s.attempts, 3, 'retried as a failure');
    assert.equal(s.failedAttempts, 3);
    // Failures count even where the caller's isFailure would not count them: the rehearsal is of the instance failing.
    for (let i = 0; i < 4; i++) await t.client.call('svc', () => 1, { isFailure: () => false, retry: false }).catch(() => undefined);
    const state = await t.client.service('svc');
    const failures = (id: string) => (state.breakerOf(id) as CircuitBreaker).stats().failures;
    assert.equal(failures('a') + failures('b'), 7, 'every injected failure reached an instance breaker');
    assert.ok(state.isOpen('a') || state.isOpen('b'), 'and one of them opened');
    assert.equal(await t.settle(t.client.call('svc', () => 1, { fallback: () => -1 })), -1);
    assert.equal(state.fault!.stats().aborted, t.client.stats().failedAttempts, 'the injector counted each one');
    await t.close();
  });

  it('delays attempts under their timeout: a delay longer than the timeout is a TimeoutError', async () => {
    const t = await setup();
    t.client.setFault('svc', { delay: { ms: 200, percent: 100 } });
    let settled = false;
    const p = t.client.call('svc', () => 'ok', { retry: false }).finally(() => (settled = true));
    await t.clock.advanceAsync(199);
    assert.equal(settled, false);
    await t.clock.advanceAsync(1);
    assert.equal(await p, 'ok');
    const slow = t.client.call('svc', () => 'ok', { retry: false, timeoutMs: 100 }).catch((e: unknown) => e);
    await t.clock.advanceAsync(300);
    assert.ok((await slow) instanceof TimeoutError);
    await t.close();
  });

  it('applies the fault option to every service, setFault replaces it for one, and undefined goes back to it', async () => {
    const t = await setup({ fault: { abort: { percent: 100 }, ttlMs: 60_000 } });
    await assert.rejects(
      t.client.call('svc', () => 1, { retry: false }),
      FaultInjectedError,
    );
    t.client.setFault('svc', { delay: { ms: 0, percent: 0 } });
    assert.equal(await t.client.call('svc', () => 1, { retry: false }), 1);
    t.client.setFault('svc', undefined);
    await assert.rejects(
      t.client.call('svc', () => 1, { retry: false }),
      FaultInjectedError,
    );
    t.clock.advance(60_000); // the ttl, counted from when the fault was set
    assert.equal(await t.client.call('svc', () => 1, { retry: false }), 1, 'expired: calls pass straight through');
    await t.close();
  });

  it('keeps a fault set before the service opens until it opens', async () => {
    const t = await setup();
    t.client.setFault('svc', { abort: { percent: 100 } });
    await assert.rejects(
      t.client.call('svc', () => 1, { retry: false }),
      FaultInjectedError,
    );
    await t.close();
  });

  it('refuses bad fault options naming the option and value, and changes nothing', async () => {
    const t = await setup();
    t.client.setFault('svc', { abort: { percent: 100 } });
    assert.throws(
      () => t.client.setFault('svc', { abort: { percent: 120 } }),
      (e: unknown) => e instanceof RangeError && e.message === 'ResilientClient.setFault: abort.percent must be a finite number in [0, 100], got 120',
    );
    assert.throws(() => t.client.setFault('', undefined), TypeError);
    await assert.rejects(
      t.client.call('svc', () => 1, { retry: false }),
      FaultInjectedError,
    );
    assert.throws(
      () => new ResilientClient({ registry: new MemoryRegistry(), fault: { ttlMs: 90_000_000 } }),
      (e: unknown) => e instanceof RangeError && e.message === 'ResilientClient: fault.ttlMs must be a finite number in [1, 86400000], got 90000000',
    );
    await t.close();
  });
});

describe('ResilientClient weight overrides', () => {
  it('applies overrides to the open balancer and to one made later, and refuses bad ones', async () => {
    const t = await setup();
    t.client.setWeights('svc', { a: 0 }); // before the service opens
    for (let i = 0; i < 20; i++) assert.equal(await t.client.call('svc', (inst) => inst.id), 'b');
    t.client.setWeights('svc', { b: 0 });
    for (let i = 0; i < 20; i++) assert.equal(await t.client.call('svc', (inst) => inst.id), 'a');
    assert.throws(
      () => t.client.setWeights('svc', { a: -1 }),
      (e: unknown) => e instanceof RangeError && e.message === 'ResilientClient.setWeights: weights.a must be a finite number in [0, 1000000], got -1',
    );
    assert.equal(await t.client.call('svc', (inst) => inst.id), 'a', 'a refused change changes nothing');
    t.client.setWeights('svc', undefined);
    const seen = new Set<string>();
    for (let i = 0; i < 20; i++) seen.add(await t.client.call('svc', (inst) => inst.id));
    assert.deepEqual([...seen].sort(), ['a', 'b']);
    await t.close();
  });
});
