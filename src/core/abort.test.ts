import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { delay, linkSignal, raceSignal, throwIfAborted } from './abort.js';
import { AbortedError } from './errors.js';

describe('abort helpers', () => {
  it('delay resolves after the time and rejects when aborted', async () => {
    await delay(1);
    const ac = new AbortController();
    const p = delay(10_000, ac.signal);
    ac.abort(new Error('stop'));
    await assert.rejects(p, (e: unknown) => e instanceof AbortedError && (e.cause as Error).message === 'stop');
    await assert.rejects(delay(1, ac.signal), AbortedError);
  });

  it('throwIfAborted throws a coded error only when aborted', () => {
    throwIfAborted(undefined);
    const ac = new AbortController();
    throwIfAborted(ac.signal);
    ac.abort();
    assert.throws(() => throwIfAborted(ac.signal), AbortedError);
  });

  it('linkSignal follows the parent and can be unlinked', () => {
    const parent = new AbortController();
    const a = linkSignal(parent.signal);
    const b = linkSignal(parent.signal);
    b.unlink();
    parent.abort('why');
    assert.equal(a.controller.signal.aborted, true);
    assert.equal(a.controller.signal.reason, 'why');
    assert.equal(b.controller.signal.aborted, false);
    const c = linkSignal(parent.signal);
    assert.equal(c.controller.signal.aborted, true);
  });
});

describe('raceSignal', () => {
  it('answers the promise when it settles first, and the abort answer (or throw) when the signal aborts first', async () => {
    const ac = new AbortController();
    assert.equal(await raceSignal(Promise.resolve(1), ac.signal, () => 'aborted'), 1);
    let settle!: (v: number) => void;
    const slow = new Promise<number>((r) => (settle = r));
    const raced = raceSignal(slow, ac.signal, () => 'aborted');
    ac.abort();
    assert.equal(await raced, 'aborted');
    settle(2);
    await assert.rejects(
      raceSignal(slow, ac.signal, () => {
        throw new Error('gone');
      }),
      /gone/,
    );
    await assert.rejects(
      raceSignal(Promise.reject(new Error('own')), new AbortController().signal, () => 0),
      /own/,
    );
  });
});
