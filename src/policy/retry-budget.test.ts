import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import fc from 'fast-check';
import { ManualClock } from '../core/clock.js';
import { RetryBudget, retryBudgetDefaults, type RetryBudgetOptions } from './retry-budget.js';

function drain(budget: RetryBudget): number {
  let n = 0;
  while (budget.allowRetry()) if (++n > 1e6) throw new Error('budget never refuses');
  return n;
}

describe('RetryBudget', () => {
  it('allows the floor of minRetriesPerSec × window seconds with no calls at all', () => {
    const budget = new RetryBudget({ clock: new ManualClock() });
    assert.equal(drain(budget), 100);
    assert.equal(budget.stats().refused, 1);
  });

  it('allows 20 % of calls on top of the floor', () => {
    const clock = new ManualClock();
    const budget = new RetryBudget({ clock });
    for (let i = 0; i < 1000; i++) budget.recordCall();
    assert.equal(budget.stats().balance, 300);
    assert.equal(drain(budget), 300);
    assert.deepEqual({ ...budget.stats(), refused: 0 }, { calls: 1000, retries: 300, balance: 0, refused: 0 });
  });

  it('counts calls not yet flushed (fewer than 16) when a retry is asked for', () => {
    const budget = new RetryBudget({ clock: new ManualClock(), minRetriesPerSec: 0, percentCanRetry: 0.5 });
    for (let i = 0; i < 6; i++) budget.recordCall();
    assert.equal(drain(budget), 3);
  });

  it('forgets calls and retries once the window has passed', () => {
    const clock = new ManualClock();
    const budget = new RetryBudget({ clock, minRetriesPerSec: 0 });
    for (let i = 0; i < 100; i++) budget.recordCall();
    assert.equal(drain(budget), 20);
    clock.advance(11_000); // retries are counted over one bucket more than the window
    assert.equal(budget.allowRetry(), false, 'the calls have expired too');
    for (let i = 0; i < 50; i++) budget.recordCall();
    assert.equal(drain(budget), 10);
  });

  it('refills as old retries leave the window while calls keep coming', () => {
    const clock = new ManualClock();
    const budget = new RetryBudget({ clock, minRetriesPerSec: 1 }); // floor 10 per 10 s
    let allowed = 0;
    for (let s = 0; s < 60; s++) {
      for (let i = 0; i < 100; i++) budget.recordCall();
      allowed += drain(budget);
      clock.advance(1_000);
    }
    // 100 calls/s at 20 % is 20 retries/s; over 60 s about 1 200 plus one floor, never much more.
    assert.ok(allowed >= 1_000 && allowed <= 1_200 + 10, `allowed ${allowed}`);
  });

  it('allows nothing when both percentCanRetry and minRetriesPerSec are 0', () => {
    const budget = new RetryBudget({ clock: new ManualClock(), percentCanRetry: 0, minRetriesPerSec: 0 });
    for (let i = 0; i < 100; i++) budget.recordCall();
    assert.equal(budget.allowRetry(), false);
  });

  it('never lets retries exceed percentCanRetry × calls + the floor in any trailing window (property)', () => {
    const event = fc.oneof(
      fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 3_000 }) }),
      fc.record({ kind: fc.constant('calls' as const), n: fc.integer({ min: 1, max: 40 }) }),
      fc.record({ kind: fc.constant('retries' as const), n: fc.integer({ min: 1, max: 40 }) }),
    );
    fc.assert(
      fc.property(
        fc.record({
          windowMs: fc.integer({ min: 1_000, max: 20_000 }),
          buckets: fc.integer({ min: 1, max: 20 }),
          percentCanRetry: fc.constantFrom(0, 0.1, 0.2, 0.5, 1, 2),
          minRetriesPerSec: fc.constantFrom(0, 0.5, 1, 10),
        }),
        fc.array(event, { maxLength: 120 }),
        (opts, events) => {
          const clock = new ManualClock(12_345);
          const budget = new RetryBudget({ ...opts, clock });
          const calls: number[] = [];
          const retries: number[] = [];
          const floor = (opts.minRetriesPerSec * opts.windowMs) / 1000;
          for (const e of events) {
            if (e.kind === 'advance') clock.advance(e.ms);
            else if (e.kind === 'calls')
              for (let i = 0; i < e.n; i++) {
                budget.recordCall();
                calls.push(clock.now());
              }
            else {
              for (let i = 0; i < e.n; i++) {
                if (!budget.allowRetry()) continue;
                const t = clock.now();
                retries.push(t);
                const inWindow = (xs: number[]) => xs.filter((x) => x > t - opts.windowMs && x <= t).length;
                const limit = opts.percentCanRetry * inWindow(calls) + floor;
                assert.ok(inWindow(retries) <= limit + 1e-6, `${inWindow(retries)} retries > ${limit} at ${t}`);
              }
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  const bad: [RetryBudgetOptions, RegExp, ErrorConstructor][] = [
    [{ windowMs: 0 }, /windowMs.*got 0/, RangeError],
    [{ windowMs: Number.NaN }, /windowMs.*got NaN/, RangeError],
    [{ windowMs: '10s' as unknown as number }, /windowMs must be a number, got "10s"/, TypeError],
    [{ buckets: 2.5 }, /buckets.*got 2\.5/, RangeError],
    [{ buckets: 0 }, /buckets.*got 0/, RangeError],
    [{ percentCanRetry: -0.1 }, /percentCanRetry.*got -0\.1/, RangeError],
    [{ percentCanRetry: Infinity }, /percentCanRetry.*got Infinity/, RangeError],
    [{ minRetriesPerSec: -1 }, /minRetriesPerSec.*got -1/, RangeError],
    [{ clock: {} as never }, /clock must be a Clock/, TypeError],
  ];
  for (const [options, message, type] of bad) {
    it(`rejects ${inspect(options)} with ${type.name}`, () => {
      assert.throws(
        () => new RetryBudget(options),
        (err: Error) => err instanceof type && message.test(err.message),
      );
    });
  }

  it('rejects options that are not an object', () => {
    assert.throws(() => new RetryBudget(5 as never), TypeError);
  });

  it('exports frozen Finagle defaults', () => {
    assert.ok(Object.isFrozen(retryBudgetDefaults));
    assert.deepEqual({ ...retryBudgetDefaults }, { windowMs: 10_000, buckets: 10, percentCanRetry: 0.2, minRetriesPerSec: 10 });
  });
});
