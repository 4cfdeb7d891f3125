import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import type { Guard } from '../core/guard.js';
import { Bulkhead } from './bulkhead.js';
import { Fallback } from './fallback.js';
import { Retry } from './retry.js';
import { Timeout } from './timeout.js';
import { wrap } from './wrap.js';

const guards: [string, () => Guard][] = [
  ['Retry', () => new Retry({ maxAttempts: 5, backoff: { initialMs: 0, maxMs: 0 } })],
  ['Timeout', () => new Timeout({ timeoutMs: 1_000 })],
  ['Bulkhead', () => new Bulkhead()],
  ['Fallback', () => new Fallback({ value: 'fallback' }) as Guard],
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
        const err = await (guard.execute as (fn: unknown, options: unknown) => Promise<unknown>)(fn, options).then(
          (v) => assert.fail(`answered ${inspect(v)}`),
          (e: unknown) => e,
        );
        assert.ok(err instanceof TypeError);
        assert.match(err.message, new RegExp(`^${name}\\.`));
        assert.match(err.message, message);
      });
    }
  }
});
