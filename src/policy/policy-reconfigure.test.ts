import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as tick } from 'node:timers/promises';
import { ManualClock } from '../core/clock.js';
import { BulkheadRejectedError, TimeoutError } from '../core/errors.js';
import { Bulkhead } from './bulkhead.js';
import { Retry } from './retry.js';
import { RetryBudget } from './retry-budget.js';
import { Timeout } from './timeout.js';

/** gate is a task that runs until `open()` is called. */
function gate(): { task: () => Promise<string>; open: () => void; started: () => number } {
  let release!: () => void;
  const p = new Promise<void>((r) => (release = r));
  let n = 0;
  return {
    task: async () => {
      n++;
      await p;
      return 'done';
    },
    open: () => release(),
    started: () => n,
  };
}

describe('Bulkhead.reconfigure', () => {
  it('more slots start that many waiters at once', async () => {
    const b = new Bulkhead({ maxConcurrent: 1, maxQueued: 5 });
    const g = gate();
    const calls = [1, 2, 3, 4].map(() => b.execute(g.task));
    await tick();
    assert.deepEqual(b.stats(), { active: 1, queued: 3, rejected: 0 });
    b.reconfigure({ maxConcurrent: 3 });
    await tick();
    assert.deepEqual(b.stats(), { active: 3, queued: 1, rejected: 0 });
    assert.equal(g.started(), 3);
    g.open();
    assert.deepEqual(await Promise.all(calls), ['done', 'done', 'done', 'done']);
    assert.deepEqual(b.stats(), { active: 0, queued: 0, rejected: 0 });
  });

  it('fewer slots and a shorter queue fail no call: running ones finish, queued ones run in order, new ones are refused meanwhile', async () => {
    const b = new Bulkhead({ maxConcurrent: 3, maxQueued: 3 });
    const order: number[] = [];
    const gates = [0, 1, 2, 3, 4, 5].map(() => gate());
    const calls = gates.map((g, i) =>
      b.execute(async () => {
        order.push(i);
        return g.task();
      }),
    );
    await tick();
    assert.deepEqual(b.stats(), { active: 3, queued: 3, rejected: 0 });
    b.reconfigure({ maxConcurrent: 1, maxQueued: 1 });
    assert.deepEqual(b.options(), { maxConcurrent: 1, maxQueued: 1 });
    await assert.rejects(
      b.execute(async () => 'new'),
      BulkheadRejectedError,
    ); // the queue is over its new bound
    for (const g of gates) g.open();
    assert.deepEqual(await Promise.all(calls), ['done', 'done', 'done', 'done', 'done', 'done']);
    assert.deepEqual(order, [0, 1, 2, 3, 4, 5]);
    // Now one runs at a time: a second call waits, a third is refused.
    const g = gate();
    const first = b.execute(g.task);
    const second = b.execute(g.task);
    await assert.rejects(b.execute(g.task), BulkheadRejectedError);
    await tick();
    assert.equal(g.started(), 1);
    g.open();
    assert.deepEqual(await Promise.all([first, second]), ['done', 'done']);
  });

  it('while more run than the new bound, a freed slot goes to a waiter only once fewer than the bound run', async () => {
    const b = new Bulkhead({ maxConcurrent: 2, maxQueued: 2 });
    const [g0, g1, g2] = [gate(), gate(), gate()];
    const c0 = b.execute(g0.task);
    const c1 = b.execute(g1.task);
    const c2 = b.execute(g2.task);
    await tick();
    b.reconfigure({ maxConcurrent: 1 });
    g0.open();
    await c0;
    await tick();
    assert.deepEqual(b.stats(), { active: 1, queued: 1, rejected: 0 }); // c1 still runs: c2 waits
    g1.open();
    await c1;
    await tick();
    assert.equal(g2.started(), 1);
    g2.open();
    await c2;
  });

  it("refuses a bad value with the constructor's message and changes nothing", () => {
    const b = new Bulkhead({ maxConcurrent: 4, maxQueued: 2 });
    assert.throws(() => b.reconfigure({ maxQueued: 1, maxConcurrent: 0 }), {
      name: 'RangeError',
      message: 'Bulkhead: maxConcurrent must be an integer in [1, 1000000000], got 0',
    });
    assert.throws(() => b.reconfigure({ maxConcurent: 1 } as never), {
      name: 'TypeError',
      message: 'Bulkhead: maxConcurent is not an option; the options are maxConcurrent, maxQueued',
    });
    assert.deepEqual(b.options(), { maxConcurrent: 4, maxQueued: 2 });
  });
});

describe('Timeout.reconfigure', () => {
  it('gives calls that start from then on the new deadline; a call under way keeps its own', async () => {
    const clock = new ManualClock();
    const t = new Timeout({ timeoutMs: 1_000, clock });
    const never = () => new Promise<never>(() => {});
    const before = t.execute(never);
    const beforeSettled = before.catch((e: unknown) => e);
    t.reconfigure({ timeoutMs: 100 });
    assert.deepEqual(t.options(), { timeoutMs: 100 });
    const after = t.execute(never).catch((e: unknown) => e);
    await clock.advanceAsync(101);
    assert.ok((await after) instanceof TimeoutError);
    let settled = false;
    void beforeSettled.then(() => (settled = true));
    await tick();
    assert.equal(settled, false);
    await clock.advanceAsync(1_000);
    assert.ok((await beforeSettled) instanceof TimeoutError);
  });

  it('refuses a bad value and the clock, changing nothing', () => {
    const clock = new ManualClock();
    const t = new Timeout({ timeoutMs: 1_000, clock });
    assert.throws(() => t.reconfigure({ timeoutMs: 0 }), { name: 'RangeError', message: /^Timeout: timeoutMs must be a finite number in \[1, / });
    assert.throws(() => t.reconfigure({ clock } as never), {
      name: 'TypeError',
      message: 'Timeout: clock cannot change on a running Timeout; it is set at construction only',
    });
    assert.equal(t.timeoutMs, 1_000);
  });
});

describe('Retry.reconfigure', () => {
  it('applies maxAttempts and a whole backoff to calls that fail from then on', async () => {
    const clock = new ManualClock();
    const r = new Retry({ maxAttempts: 2, backoff: { initialMs: 0, maxMs: 0, jitter: 'none' }, clock });
    let calls = 0;
    const failing = () => {
      calls++;
      return Promise.reject(new Error('x'));
    };
    await assert.rejects(r.execute(failing));
    assert.equal(calls, 2);
    r.reconfigure({ maxAttempts: 4 });
    assert.deepEqual(r.options(), { maxAttempts: 4, backoff: { initialMs: 0, maxMs: 0, multiplier: 2, jitter: 'none' } });
    calls = 0;
    await assert.rejects(r.execute(failing));
    assert.equal(calls, 4);
    r.reconfigure({ backoff: { initialMs: 50, maxMs: 500 } });
    assert.deepEqual(r.options().backoff, { initialMs: 50, maxMs: 500, multiplier: 2, jitter: 'none' });
    r.reconfigure({ backoff: undefined });
    assert.deepEqual(r.options().backoff, { initialMs: 100, maxMs: 10_000, multiplier: 2, jitter: 'full' });
  });

  it('refuses bad values and fixed keys, changing nothing', () => {
    const r = new Retry({ maxAttempts: 2 });
    const before = r.options();
    assert.throws(() => r.reconfigure({ maxAttempts: 5, backoff: { initialMs: 100, maxMs: 10 } }), {
      name: 'RangeError',
      message: 'Retry: backoff.maxMs must be a finite number ≥ 100, got 10',
    });
    assert.throws(() => r.reconfigure({ maxAttempts: 0 }), { name: 'RangeError', message: 'Retry: maxAttempts must be an integer in [1, 1000], got 0' });
    assert.throws(() => r.reconfigure({ shouldRetry: () => true } as never), /Retry: shouldRetry cannot change on a running Retry/);
    assert.throws(() => r.reconfigure({ backoff: { random: Math.random } }), /Retry: backoff.random cannot change on a running Retry/);
    assert.deepEqual(r.options(), before);
  });
});

describe('RetryBudget.reconfigure', () => {
  it('a new share and floor apply to what is already counted', () => {
    const clock = new ManualClock();
    const b = new RetryBudget({ percentCanRetry: 0.1, minRetriesPerSec: 0, clock });
    for (let i = 0; i < 100; i++) b.recordCall();
    assert.equal(b.stats().balance, 10);
    b.reconfigure({ percentCanRetry: 0.5 });
    assert.equal(b.stats().balance, 50);
    b.reconfigure({ minRetriesPerSec: 1 }); // + 1/s × 10 s
    assert.equal(b.stats().balance, 60);
  });

  it('a new window shape carries the calls and retries counted, dated now', () => {
    const clock = new ManualClock();
    const b = new RetryBudget({ percentCanRetry: 0.5, minRetriesPerSec: 0, windowMs: 10_000, clock });
    for (let i = 0; i < 100; i++) b.recordCall();
    clock.advance(9_000);
    for (let i = 0; i < 10; i++) assert.equal(b.allowRetry(), true);
    b.reconfigure({ windowMs: 2_000, buckets: 4 });
    assert.deepEqual(b.stats(), { calls: 100, retries: 10, balance: 40, refused: 0 });
    clock.advance(2_600); // the carried counts leave the new window
    assert.equal(b.stats().calls, 0);
  });

  it('refuses a bad value and the clock, changing nothing', () => {
    const clock = new ManualClock();
    const b = new RetryBudget({ clock });
    assert.throws(() => b.reconfigure({ percentCanRetry: 0.5, buckets: 0 }), {
      name: 'RangeError',
      message: 'RetryBudget: buckets must be an integer in [1, 1000], got 0',
    });
    assert.throws(() => b.reconfigure({ clock } as never), /RetryBudget: clock cannot change on a running RetryBudget/);
    assert.deepEqual(b.options(), { windowMs: 10_000, buckets: 10, percentCanRetry: 0.2, minRetriesPerSec: 10 });
  });
});
