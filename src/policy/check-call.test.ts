import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import type { Guard } from '../core/guard.js';
import { Bulkhead } from './bulkhead.js';
import { Fallback } from './fallback.js';
import { Retry } from './retry.js';
import { RetryBudget } from './retry-budget.js';
import { Timeout } from './timeout.js';
import { wrap } from './wrap.js';

/** CallsExecute is any guard's execute, called with whatever a JavaScript caller may pass. */
type AnyExecute = { execute(fn: unknown, options?: unknown): Promise<unknown> };

const guards: [string, () => Guard | Fallback<string>][] = [
  ['Retry', () => new Retry({ maxAttempts: 5, backoff: { initialMs: 0, maxMs: 0 } })],
  ['Timeout', () => new Timeout({ timeoutMs: 1_000 })],
  ['Bulkhead', () => new Bulkhead()],
  ['Fallback', () => new Fallback({ value: 'fallback' })],
  ['wrap', () => wrap(new Retry(), new Timeout())],
];

const badCalls: [unknown, unknown, RegExp][] = [
  [undefined, undefined, /execute: fn must be a function, got undefined/],
  ['not a task', undefined, /execute: fn must be a function, got "not a task"/],
  [() => 1, 5, /execute: options must be an object, got 5/],
  [() => 1, { signal: 'stop' }, /execute: options\.signal must be an AbortSignal, got "stop"/],
  [() => 1, { signal: { aborted: false } }, /execute: options\.signal must be an AbortSignal/],
];

describe('execute with bad arguments', () => {
  for (const [name, make] of guards) {
    for (const [fn, options, message] of badCalls) {
      it(`${name} rejects at once with a TypeError for fn ${inspect(fn)} and options ${inspect(options)}`, async () => {
        const guard = make();
        const err = await (guard as unknown as AnyExecute).execute(fn, options).then(
          (v) => assert.fail(`answered ${inspect(v)}`),
          (e: unknown) => e,
        );
        assert.ok(err instanceof TypeError);
        assert.match(err.message, new RegExp(`^${name}\\.`));
        assert.match(err.message, message);
      });
    }
  }

  it("is the caller's error: never counted, retried, refused or fallen back from", async () => {
    const budget = new RetryBudget();
    const retry = new Retry({ maxAttempts: 5, budget, backoff: { initialMs: 0, maxMs: 0 } });
    const retries: unknown[] = [];
    retry.onRetry((e) => retries.push(e));
    const bulkhead = new Bulkhead({ maxConcurrent: 1 });
    const fallback = new Fallback({ value: 'fallback' });
    const fellBack: unknown[] = [];
    fallback.onFallback((e) => fellBack.push(e));
    const all = wrap(fallback, retry, bulkhead, new Timeout());
    for (const g of [retry, bulkhead, fallback, all] as unknown as AnyExecute[]) {
      await assert.rejects(g.execute(undefined), TypeError);
      await assert.rejects(
        g.execute(() => 1, { signal: 1 }),
        TypeError,
      );
    }
    assert.equal(budget.stats().calls, 0, 'no call deposited in the retry budget');
    assert.equal(budget.stats().retries, 0);
    assert.deepEqual(retries, [], 'nothing retried');
    assert.deepEqual(bulkhead.stats(), { active: 0, queued: 0, rejected: 0 });
    assert.deepEqual(fellBack, [], 'nothing fell back');
  });
});
