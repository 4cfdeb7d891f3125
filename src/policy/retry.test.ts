import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { ManualClock } from '../core/clock.js';
import {
  AbortedError,
  BreakerOpenError,
  BulkheadRejectedError,
  ClosedError,
  OverloadedError,
  RateLimitedError,
  RetryBudgetExhaustedError,
  TimeoutError,
} from '../core/errors.js';
import { Retry, defaultShouldRetry, type RetryEvent, type RetryOptions } from './retry.js';
import { RetryBudget } from './retry-budget.js';

/** No waits between attempts: these tests are about counting, not timing. */
const instant = { initialMs: 0, maxMs: 0, jitter: 'none' as const };

function activeTimers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
}

describe('Retry', () => {
  it('tries again until the task succeeds, within maxAttempts', async () => {
    let calls = 0;
    const retry = new Retry({ maxAttempts: 3, backoff: instant });
    const value = await retry.execute(() => {
      if (++calls < 3) throw new Error(`fail ${calls}`);
      return 'ok';
    });
    assert.equal(value, 'ok');
    assert.equal(calls, 3);
  });

  it('rejects with the last failure when attempts run out', async () => {
    let calls = 0;
    const retry = new Retry({ maxAttempts: 4, backoff: instant });
    await assert.rejects(
      retry.execute(async () => {
        throw new Error(`fail ${++calls}`);
      }),
      /fail 4/,
    );
    assert.equal(calls, 4);
  });

  it('runs a task that returns a plain value or throws synchronously', async () => {
    const retry = new Retry({ maxAttempts: 1 });
    assert.equal(await retry.execute(() => 7), 7);
    await assert.rejects(
      retry.execute(() => {
        throw new RangeError('sync');
      }),
      RangeError,
    );
  });

  const notRetried = [
    new AbortedError(),
    new BreakerOpenError(),
    new BulkheadRejectedError(),
    new RateLimitedError(),
    new OverloadedError(),
    new RetryBudgetExhaustedError(),
    new ClosedError(),
  ];
  for (const err of notRetried) {
    it(`does not retry ${err.name} by default`, async () => {
      let calls = 0;
      const retry = new Retry({ maxAttempts: 5, backoff: instant });
      await assert.rejects(
        retry.execute(() => {
          calls++;
          throw err;
        }),
        (e) => e === err,
      );
      assert.equal(calls, 1);
    });
  }

  it('retries timeouts, plain errors and non-Error throws by default', () => {
    for (const err of [new TimeoutError(), new Error('x'), 'string', undefined, { code: 'ERR_BREAKER_OPEN' }]) {
      assert.equal(defaultShouldRetry(err), true, inspect(err));
    }
  });

  it('asks shouldRetry with the error and the 1-based attempt', async () => {
    const seen: [string, number][] = [];
    const retry = new Retry({
      maxAttempts: 5,
      backoff: instant,
      shouldRetry: (err, attempt) => (seen.push([(err as Error).message, attempt]), attempt < 2),
    });
    let calls = 0;
    await assert.rejects(
      retry.execute(() => Promise.reject(new Error(`e${++calls}`))),
      /e2/,
    );
    assert.deepEqual(seen, [
      ['e1', 1],
      ['e2', 2],
    ]);
  });

  it('emits onRetry before each wait with the backoff delay, and stops after dispose', async () => {
    const retry = new Retry({ maxAttempts: 3, backoff: { initialMs: 2, multiplier: 3, jitter: 'none' } });
    const events: RetryEvent[] = [];
    const dispose = retry.onRetry((e) => events.push(e));
    const boom = new Error('boom');
    await assert.rejects(
      retry.execute(() => Promise.reject(boom)),
      boom,
    );
    assert.deepEqual(events, [
      { attempt: 1, error: boom, delayMs: 2 },
      { attempt: 2, error: boom, delayMs: 6 },
    ]);
    dispose();
    await assert.rejects(
      retry.execute(() => Promise.reject(boom)),
      boom,
    );
    assert.equal(events.length, 2);
  });

  it('uses jittered backoff with the injected random', async () => {
    const retry = new Retry({ maxAttempts: 3, backoff: { initialMs: 10, jitter: 'full', random: () => 0.25 } });
    const delays: number[] = [];
    retry.onRetry((e) => delays.push(e.delayMs));
    await assert.rejects(retry.execute(() => Promise.reject(new Error('x'))));
    assert.deepEqual(delays, [2.5, 5]);
  });

  it('waits the backoff delay on its clock before the next attempt', async () => {
    const clock = new ManualClock();
    const retry = new Retry({ maxAttempts: 3, backoff: { initialMs: 100, multiplier: 2, jitter: 'none' }, clock });
    let calls = 0;
    const p = retry.execute(() => (++calls < 3 ? Promise.reject(new Error('x')) : 'done'));
    await clock.advanceAsync(0);
    assert.equal(calls, 1);
    await clock.advanceAsync(99);
    assert.equal(calls, 1, 'not before 100 ms');
    await clock.advanceAsync(1);
    assert.equal(calls, 2);
    await clock.advanceAsync(199);
    assert.equal(calls, 2, 'then not before 200 ms more');
    await clock.advanceAsync(1);
    assert.equal(await p, 'done');
    assert.equal(calls, 3);
    assert.equal(clock.pendingTimers, 0);
  });

  it('stops waiting the moment the caller aborts, leaving no timer behind', async () => {
    const retry = new Retry({ maxAttempts: 3, backoff: { initialMs: 60_000, maxMs: 60_000, jitter: 'none' } });
    const ac = new AbortController();
    const before = activeTimers();
    let calls = 0;
    const p = retry.execute(
      () => {
        calls++;
        throw new Error('down');
      },
      { signal: ac.signal },
    );
    await new Promise((r) => setImmediate(r));
    assert.equal(activeTimers(), before + 1, 'waiting for the backoff');
    ac.abort(new Error('user left'));
    await assert.rejects(p, (e: unknown) => e instanceof AbortedError && (e.cause as Error).message === 'user left');
    assert.equal(activeTimers(), before);
    assert.equal(calls, 1);
  });

  it('does not call the task at all when the signal is already aborted', async () => {
    let calls = 0;
    await assert.rejects(
      new Retry().execute(() => calls++, { signal: AbortSignal.abort() }),
      AbortedError,
    );
    assert.equal(calls, 0);
  });

  it('does not retry a failure that happened after the caller aborted', async () => {
    const ac = new AbortController();
    let calls = 0;
    const p = new Retry({ maxAttempts: 5, backoff: instant }).execute(
      async (signal) => {
        calls++;
        ac.abort();
        throw new Error(`aborted: ${signal.aborted}`);
      },
      { signal: ac.signal },
    );
    await assert.rejects(p, /aborted: true/);
    assert.equal(calls, 1);
  });

  it('rejects with RetryBudgetExhaustedError, cause the last failure, when the budget refuses', async () => {
    const budget = new RetryBudget({ clock: new ManualClock(), percentCanRetry: 0, minRetriesPerSec: 0.1 }); // 1 retry per 10 s
    const retry = new Retry({ maxAttempts: 5, backoff: instant, budget });
    let calls = 0;
    const err = await retry.execute(() => Promise.reject(new Error(`fail ${++calls}`))).catch((e: unknown) => e);
    assert.ok(err instanceof RetryBudgetExhaustedError);
    assert.equal((err.cause as Error).message, 'fail 2');
    assert.equal(calls, 2);
  });

  it('reproduces a retry storm without a budget, and caps it with one', async () => {
    // N callers, each allowed 3 retries, against a downstream that fails every call.
    const N = 1_000;
    const run = async (budget?: RetryBudget) => {
      let attempts = 0;
      const retry = new Retry({ maxAttempts: 4, backoff: instant, ...(budget ? { budget } : {}) });
      const down = () => {
        attempts++;
        return Promise.reject(new Error('inventory: 503'));
      };
      const results = await Promise.allSettled(Array.from({ length: N }, () => retry.execute(down)));
      assert.ok(results.every((r) => r.status === 'rejected'));
      return attempts;
    };
    assert.equal(await run(), N * 4, 'without a budget the downstream sees 4× the calls');
    const budget = new RetryBudget({ clock: new ManualClock() });
    const attempts = await run(budget);
    const floor = budget.reserve;
    assert.ok(attempts <= N * 1.2 + floor, `${attempts} attempts > ${N * 1.2 + floor}`);
    assert.ok(attempts >= N * 1.2, 'the budget still allows its 20 %');
  });

  it('shares one budget between Retry instances for the same downstream', async () => {
    const budget = new RetryBudget({ clock: new ManualClock(), minRetriesPerSec: 0, percentCanRetry: 0.5 });
    const a = new Retry({ maxAttempts: 10, backoff: instant, budget });
    const b = new Retry({ maxAttempts: 10, backoff: instant, budget });
    let attempts = 0;
    const fail = () => (attempts++, Promise.reject(new Error('x')));
    await Promise.allSettled([a.execute(fail), b.execute(fail), a.execute(fail), b.execute(fail)]);
    assert.equal(attempts, 4 + 2);
  });

  const bad: [RetryOptions, RegExp, ErrorConstructor][] = [
    [{ maxAttempts: 0 }, /maxAttempts.*got 0/, RangeError],
    [{ maxAttempts: 2.5 }, /maxAttempts.*got 2\.5/, RangeError],
    [{ maxAttempts: Number.NaN }, /maxAttempts.*got NaN/, RangeError],
    [{ maxAttempts: '3' as never }, /maxAttempts must be a number, got "3"/, TypeError],
    [{ backoff: 100 as never }, /backoff must be a BackoffOptions object, got 100/, TypeError],
    [{ backoff: { initialMs: -1 } }, /initialMs.*got -1/, RangeError],
    [{ backoff: { jitter: 'some' as never } }, /jitter.*got some/, RangeError],
    [{ shouldRetry: true as never }, /shouldRetry must be a function, got true/, TypeError],
    [{ budget: { allowRetry: () => true } as never }, /budget must be a RetryBudget/, TypeError],
  ];
  for (const [options, message, type] of bad) {
    it(`rejects ${inspect(options)} with ${type.name}`, () => {
      assert.throws(
        () => new Retry(options),
        (err: Error) => err instanceof type && message.test(err.message),
      );
    });
  }
});
