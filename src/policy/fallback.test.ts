import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { getEventListeners } from 'node:events';
import { ManualClock } from '../core/clock.js';
import { AbortedError, BreakerOpenError, TimeoutError } from '../core/errors.js';
import { Fallback, type FallbackEvent, type FallbackOptions } from './fallback.js';

const fail = (message = 'down') => Promise.reject(new Error(message));

describe('Fallback', () => {
  it('answers the default value when the call fails, and the real value when it does not', async () => {
    const fallback = new Fallback({ value: { name: 'guest' } });
    assert.deepEqual(await fallback.execute(() => fail()), { name: 'guest' });
    assert.deepEqual(await fallback.execute(async () => ({ name: 'ann' })), { name: 'ann' });
  });

  it('falls back for a task that throws synchronously, and passes a plain value through', async () => {
    const fallback = new Fallback({ value: 0 });
    assert.equal(
      await fallback.execute(() => {
        throw new Error('sync');
      }),
      0,
    );
    assert.equal(await fallback.execute(() => 9), 9);
  });

  it('answers undefined as a default value when it is given explicitly', async () => {
    const fallback = new Fallback<undefined>({ value: undefined });
    assert.equal(await fallback.execute(() => fail()), undefined);
  });

  it('rethrows the original error when nothing answers', async () => {
    const err = new BreakerOpenError('open');
    await assert.rejects(
      new Fallback().execute(() => Promise.reject(err)),
      (e) => e === err,
    );
    await assert.rejects(
      new Fallback({ chain: [() => Promise.reject(new Error('cache miss'))] }).execute(() => Promise.reject(err)),
      (e) => e === err,
    );
  });

  it('answers the last good value, only while younger than maxAgeMs', async () => {
    const clock = new ManualClock();
    const fallback = new Fallback<string>({ lastGood: { maxAgeMs: 1_000 }, value: 'default', clock });
    assert.equal(await fallback.execute(() => fail()), 'default', 'nothing good seen yet');
    assert.equal(await fallback.execute(async () => 'v1'), 'v1');
    clock.advance(1_000);
    assert.equal(await fallback.execute(() => fail()), 'v1');
    assert.equal(await fallback.execute(() => 'v2'), 'v2');
    clock.advance(1_001);
    assert.equal(await fallback.execute(() => fail()), 'default', 'too old');
    assert.equal(fallback.lastGoodValue, 'v2');
  });

  it('keeps the last good value forever with lastGood: true', async () => {
    const clock = new ManualClock();
    const fallback = new Fallback<number>({ lastGood: true, clock });
    await fallback.execute(() => 1);
    clock.advance(1e9);
    assert.equal(await fallback.execute(() => fail()), 1);
  });

  it('tries each chain strategy in turn, with the error and a signal, until one answers', async () => {
    const tried: string[] = [];
    const original = new Error('search down');
    const fallback = new Fallback<string>({
      chain: [
        (err) => {
          tried.push(`cache:${(err as Error).message}`);
          throw new Error('miss');
        },
        async (_err, signal) => {
          tried.push(`db:${signal.aborted}`);
          return 'from db';
        },
        () => {
          tried.push('never');
          return 'x';
        },
      ],
      value: 'default',
    });
    assert.equal(await fallback.execute(() => Promise.reject(original)), 'from db');
    assert.deepEqual(tried, ['cache:search down', 'db:false']);
  });

  it('tries the chain before the default value (cache, then default)', async () => {
    const cache = new Map<string, string>([['user:1', 'cached user 1']]);
    const load = (key: string) =>
      new Fallback<string>({
        chain: [() => cache.get(key) ?? Promise.reject(new Error('miss'))],
        value: 'guest',
      }).execute(() => fail());
    assert.equal(await load('user:1'), 'cached user 1');
    assert.equal(await load('user:2'), 'guest');
  });

  it('does not fall back when the caller aborted, nor for AbortedError', async () => {
    const fallback = new Fallback({ value: 'fb' });
    const ac = new AbortController();
    const p = fallback.execute(
      () => {
        ac.abort();
        return fail('aborted mid-call');
      },
      { signal: ac.signal },
    );
    await assert.rejects(p, /aborted mid-call/);
    await assert.rejects(
      fallback.execute(() => Promise.reject(new AbortedError())),
      AbortedError,
    );
  });

  it('stops waiting for a chain strategy that never answers when the caller aborts', async () => {
    const ac = new AbortController();
    let strategySignal!: AbortSignal;
    const fallback = new Fallback<string>({
      chain: [(_err, signal) => ((strategySignal = signal), new Promise<string>(() => {}))],
      value: 'never used',
    });
    const p = fallback.execute(() => Promise.reject(new Error('down')), { signal: ac.signal });
    await new Promise((r) => setImmediate(r));
    ac.abort(new Error('user left'));
    await assert.rejects(p, /down/, 'the original error, not the default value: the caller left');
    assert.equal(strategySignal, ac.signal);
    assert.equal(getEventListeners(ac.signal, 'abort').length, 0);
  });

  it('falls back only for errors shouldFallback accepts', async () => {
    const fallback = new Fallback({ value: 'fb', shouldFallback: (err) => err instanceof TimeoutError });
    assert.equal(await fallback.execute(() => Promise.reject(new TimeoutError())), 'fb');
    await assert.rejects(
      fallback.execute(() => fail('validation')),
      /validation/,
    );
  });

  it('emits onFallback with what answered', async () => {
    const clock = new ManualClock();
    const fallback = new Fallback<string>({ lastGood: { maxAgeMs: 10 }, chain: [() => fail(), () => 'c1'], clock });
    const events: FallbackEvent[] = [];
    fallback.onFallback((e) => events.push(e));
    const e1 = new Error('1');
    await fallback.execute(() => Promise.reject(e1));
    await fallback.execute(() => 'good');
    const e2 = new Error('2');
    await fallback.execute(() => Promise.reject(e2));
    assert.deepEqual(events, [
      { error: e1, source: 'chain', index: 1 },
      { error: e2, source: 'last-good' },
    ]);
    const e3 = new Error('3');
    await assert.rejects(new Fallback().execute(() => Promise.reject(e3)));
  });

  const bad: [FallbackOptions<unknown>, RegExp, ErrorConstructor][] = [
    [{ lastGood: 'yes' as never }, /lastGood must be a boolean or \{ maxAgeMs \}, got "yes"/, TypeError],
    [{ lastGood: { maxAgeMs: -1 } }, /lastGood\.maxAgeMs.*got -1/, RangeError],
    [{ lastGood: { maxAgeMs: Number.NaN } }, /lastGood\.maxAgeMs.*got NaN/, RangeError],
    [{ chain: (() => 1) as never }, /chain must be an array of functions/, TypeError],
    [{ chain: [() => 1, 'x' as never] }, /chain\[1\] must be a function, got "x"/, TypeError],
    [{ shouldFallback: 1 as never }, /shouldFallback must be a function, got 1/, TypeError],
    [{ clock: Date as never }, /clock must be a Clock/, TypeError],
  ];
  for (const [options, message, type] of bad) {
    it(`rejects ${inspect(options)} with ${type.name}`, () => {
      assert.throws(
        () => new Fallback(options),
        (err: Error) => err instanceof type && message.test(err.message),
      );
    });
  }
});
