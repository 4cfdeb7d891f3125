import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { ManualClock } from '../core/clock.js';
import { BreakerOpenError, BulkheadRejectedError, TimeoutError } from '../core/errors.js';
import { neverAborted, type ExecuteOptions, type Guard, type Task } from '../core/guard.js';
import { Bulkhead } from './bulkhead.js';
import { Fallback } from './fallback.js';
import { Retry } from './retry.js';
import { RetryBudget } from './retry-budget.js';
import { Timeout } from './timeout.js';
import { wrap } from './wrap.js';

/** A guard that logs entry and exit, and what signal it was given. */
class Tracer implements Guard {
  constructor(
    readonly name: string,
    readonly log: string[],
  ) {}
  async execute<T>(fn: Task<T>, options?: ExecuteOptions): Promise<T> {
    this.log.push(`enter ${this.name}`);
    try {
      return await fn(options?.signal ?? neverAborted);
    } finally {
      this.log.push(`exit ${this.name}`);
    }
  }
}

/** A minimal breaker fake: open after `threshold` consecutive failures (our own small Guard, not the real breaker). */
class FakeBreaker implements Guard {
  failures = 0;
  calls = 0;
  constructor(readonly threshold: number) {}
  async execute<T>(fn: Task<T>, options?: ExecuteOptions): Promise<T> {
    if (this.failures >= this.threshold) throw new BreakerOpenError('fake breaker open');
    this.calls++;
    try {
      const v = await fn(options?.signal ?? neverAborted);
      this.failures = 0;
      return v;
    } catch (err) {
      this.failures++;
      throw err;
    }
  }
}

const instant = { initialMs: 0, maxMs: 0, jitter: 'none' as const };

describe('wrap', () => {
  it('nests guards outermost first', async () => {
    const log: string[] = [];
    const guard = wrap(new Tracer('a', log), new Tracer('b', log), new Tracer('c', log));
    assert.equal(await guard.execute(() => (log.push('task'), 1)), 1);
    assert.deepEqual(log, ['enter a', 'enter b', 'enter c', 'task', 'exit c', 'exit b', 'exit a']);
    assert.equal(guard.guards.length, 3);
  });

  it('hands the task the innermost signal, which aborts when an outer timeout fires', async () => {
    const log: string[] = [];
    let seen!: AbortSignal;
    const guard = wrap(new Timeout({ timeoutMs: 20 }), new Tracer('inner', log));
    await assert.rejects(
      guard.execute((signal) => ((seen = signal), new Promise(() => {}))),
      TimeoutError,
    );
    assert.equal(seen.aborted, true);
    assert.ok(seen.reason instanceof TimeoutError);
  });

  it('passes the caller signal to the outermost guard', async () => {
    let seen: AbortSignal | undefined;
    const ac = new AbortController();
    const outer: Guard = { execute: (fn, options) => ((seen = options?.signal), Promise.resolve(fn(options!.signal!))) };
    await wrap(outer, new Tracer('x', [])).execute(() => 1, { signal: ac.signal });
    assert.equal(seen, ac.signal);
  });

  it('never listens on the shared neverAborted signal (no listener piles up on it)', async () => {
    const guard = wrap(new Fallback({ value: -1 }), new Retry({ maxAttempts: 2 }), new Bulkhead(), new Timeout({ timeoutMs: 1_000 }));
    const seen: number[] = [];
    for (let i = 0; i < 5; i++) await guard.execute(async (_signal) => seen.push(getEventListeners(neverAborted, 'abort').length));
    assert.deepEqual(seen, [0, 0, 0, 0, 0]);
    assert.equal(getEventListeners(neverAborted, 'abort').length, 0);
  });

  it('with no guards runs the task, turning a synchronous throw into a rejection', async () => {
    assert.equal(await wrap().execute(() => 3), 3);
    await assert.rejects(
      wrap().execute(() => {
        throw new Error('sync');
      }),
      /sync/,
    );
  });

  it('composes wraps inside wraps', async () => {
    const log: string[] = [];
    const inner = wrap(new Tracer('b', log), new Tracer('c', log));
    await wrap(new Tracer('a', log), inner).execute(() => log.push('task'));
    assert.deepEqual(log.slice(0, 4), ['enter a', 'enter b', 'enter c', 'task']);
  });

  it('retries each attempt through a fresh timeout, then falls back (recommended order)', async () => {
    let calls = 0;
    const guard = wrap(
      new Fallback<string>({ value: 'cached' }),
      new Retry({ maxAttempts: 3, backoff: instant }),
      new Bulkhead({ maxConcurrent: 2 }),
      new Timeout({ timeoutMs: 10 }),
    );
    const signals: AbortSignal[] = [];
    const value = await guard.execute((signal) => {
      calls++;
      signals.push(signal);
      return new Promise<string>(() => {});
    });
    assert.equal(value, 'cached');
    assert.equal(calls, 3);
    assert.equal(new Set(signals).size, 3, 'every attempt got its own deadline');
    assert.ok(signals.every((s) => s.aborted));
  });

  it('stops retrying once the breaker opens, and the fallback answers', async () => {
    const breaker = new FakeBreaker(2);
    let calls = 0;
    const guard = wrap(new Fallback({ value: 'fb' }), new Retry({ maxAttempts: 5, backoff: instant }), breaker);
    assert.equal(await guard.execute(() => (calls++, Promise.reject(new Error('down')))), 'fb');
    assert.equal(calls, 2, 'BreakerOpenError is not retried');
  });

  it('does not count a full bulkhead as a downstream failure when the bulkhead is outside the breaker', async () => {
    const breaker = new FakeBreaker(1);
    const bulkhead = new Bulkhead({ maxConcurrent: 1 });
    const guard = wrap(bulkhead, breaker);
    let release!: () => void;
    const slow = guard.execute(() => new Promise<void>((r) => (release = r)));
    await assert.rejects(
      guard.execute(() => 'x'),
      BulkheadRejectedError,
    );
    assert.equal(breaker.failures, 0);
    release();
    await slow;
  });

  it('with a retry budget, a failing downstream behind the full stack sees at most 1.2× calls + the floor', async () => {
    const budget = new RetryBudget({ clock: new ManualClock() });
    let attempts = 0;
    const guard = wrap(
      new Fallback({ value: 'degraded' }),
      new Retry({ maxAttempts: 4, backoff: instant, budget }),
      new Bulkhead({ maxConcurrent: 1_000, maxQueued: 1_000 }),
      new Timeout({ timeoutMs: 1_000 }),
    );
    const results = await Promise.all(Array.from({ length: 500 }, () => guard.execute(() => (attempts++, Promise.reject(new Error('503'))))));
    assert.ok(results.every((r) => r === 'degraded'));
    assert.ok(attempts <= 500 * 1.2 + budget.reserve, `${attempts} attempts`);
  });

  it('carries a Fallback value type into the result type, and requires tasks to answer it', async () => {
    const guard = wrap(new Fallback<string | number>({ value: 0 }), new Retry({ maxAttempts: 1 }));
    const v: string | number = await guard.execute(() => Promise.reject<string>(new Error('x')));
    assert.equal(v, 0);
    const numbers = wrap(new Fallback({ value: 0, lastGood: true }), new Retry({ maxAttempts: 1 }));
    assert.equal(await numbers.execute(() => 7), 7);
    // The last good value is an earlier task's result: a task of another type does not compile.
    // @ts-expect-error string is not the Fallback's number
    const wrong = await numbers.execute(() => Promise.reject<string>(new Error('x')));
    assert.equal(wrong, 7);
    const plain = wrap(new Retry({ maxAttempts: 1 }));
    const s: string = await plain.execute(() => 'any type without a Fallback');
    assert.equal(s.length, 27);
  });

  it('rejects anything without an execute method, naming its position', () => {
    assert.throws(() => wrap(new Retry(), {} as never), /wrap: guards\[1\] must have an execute/);
    assert.throws(() => wrap(null as never), TypeError);
  });
});
