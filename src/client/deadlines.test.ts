import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { AbortedError, TimeoutError } from '../core/errors.js';
import { neverAborted } from '../core/guard.js';
import { AttemptTimeout, Deadlines } from './deadlines.js';

describe('Deadlines', () => {
  it('answers the value of a task that settles in time', async () => {
    const d = new Deadlines(1_000);
    assert.equal(await d.run(() => 5), 5);
    assert.equal(await d.run(async () => 6), 6);
    await assert.rejects(d.run(() => Promise.reject(new Error('no'))), /no/);
    await assert.rejects(
      d.run(() => {
        throw new Error('sync');
      }),
      /sync/,
    );
  });

  it('shares one signal among attempts that start in the same granule', async () => {
    const d = new Deadlines(10_000); // 100 ms granules
    const signals: AbortSignal[] = [];
    await Promise.all([d.run((s) => signals.push(s)), d.run((s) => signals.push(s)), d.run((s) => signals.push(s))]);
    assert.equal(new Set(signals).size <= 2, true, 'three attempts in a row made three signals');
    assert.equal(signals[0]!.aborted, false);
  });

  it('rejects a task that ignores its signal with TimeoutError between timeoutMs and timeoutMs + 1 granule, and aborts the signal', async () => {
    const d = new Deadlines(30);
    let signal: AbortSignal | undefined;
    const start = performance.now();
    const err = await d
      .run((s) => {
        signal = s;
        return new Promise(() => {});
      })
      .catch((e: unknown) => e);
    const took = performance.now() - start;
    assert.ok(err instanceof TimeoutError);
    assert.equal(signal!.aborted, true);
    assert.equal(signal!.reason, err);
    assert.ok(took >= 29, `fired early: ${took} ms`);
  });

  it('does not abort the shared signal when every attempt of the granule finished in time', async () => {
    const d = new Deadlines(20);
    let signal: AbortSignal | undefined;
    await d.run((s) => {
      signal = s;
      return 1;
    });
    await new Promise((r) => setTimeout(r, 45));
    assert.equal(signal!.aborted, false);
  });

  it('does not keep the process alive once no attempt is in flight', async () => {
    const d = new Deadlines(60_000);
    await d.run(() => 1);
    // The granule's timer is unref'd again: only the test's own handles remain.
    const timers = (process as unknown as { getActiveResourcesInfo(): string[] }).getActiveResourcesInfo().filter((r) => r === 'Timeout');
    assert.equal(timers.length, 0);
  });
});

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
});
