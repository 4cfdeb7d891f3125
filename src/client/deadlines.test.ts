import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { AbortedError, TimeoutError } from '../core/errors.js';
import { neverAborted } from '../core/guard.js';
import { AttemptTimeout } from './deadlines.js';

describe('AttemptTimeout', () => {
  it('uses a dedicated signal linked to the caller when the caller has one', async () => {
    const t = new AttemptTimeout(5_000);
    const caller = new AbortController();
    let signal: AbortSignal | undefined;
    const p = t.run((s) => {
      signal = s;
      return new Promise(() => {});
    }, caller.signal);
    caller.abort();
    await assert.rejects(p, AbortedError);
    assert.equal(signal!.aborted, true);
    assert.notEqual(signal, neverAborted);
  });

  it('shares the granule signal among attempts without a caller signal, and names the attempt on timeout', async () => {
    const t = new AttemptTimeout(20);
    const signals: AbortSignal[] = [];
    await t.run((s) => signals.push(s), neverAborted);
    const err = await t.run((s) => (signals.push(s), new Promise(() => {})), neverAborted).catch((e: unknown) => e);
    assert.ok(err instanceof TimeoutError);
    assert.match(err.message, /^attempt timed out after 20 ms$/);
    assert.notEqual(signals[0], neverAborted);
  });
});
