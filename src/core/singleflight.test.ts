import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from './clock.js';
import { SingleFlight } from './singleflight.js';
import { AbortedError, TimeoutError } from './errors.js';

describe('SingleFlight', () => {
  it('runs one call for concurrent callers of a key and shares the value', async () => {
    const sf = new SingleFlight<string, number>();
    let calls = 0;
    let release!: (v: number) => void;
    const fn = () => {
      calls++;
      return new Promise<number>((r) => (release = r));
    };
    const ps = Array.from({ length: 10 }, () => sf.do('k', fn));
    assert.equal(sf.size, 1);
    release(42);
    assert.deepEqual(await Promise.all(ps), Array(10).fill(42));
    assert.equal(calls, 1);
    assert.equal(sf.size, 0);
  });

  it('shares an error with every waiter, and the next call starts fresh', async () => {
    const sf = new SingleFlight<string, number>();
    const boom = new Error('boom');
    const ps = Array.from({ length: 3 }, () => sf.do('k', () => Promise.reject(boom)));
    for (const p of ps) await assert.rejects(p, boom);
    assert.equal(await sf.do('k', () => 7), 7);
  });

  it('rejects every waiter when the leader throws synchronously', async () => {
    const sf = new SingleFlight<string, number>();
    const boom = new Error('sync');
    const a = sf.do('k', () => {
      throw boom;
    });
    const b = sf.do('k', () => 1);
    await assert.rejects(a, boom);
    await assert.rejects(b, boom);
    assert.equal(sf.size, 0);
  });

  it('times out a leader that never settles on its clock, and frees the key', async () => {
    const clock = new ManualClock();
    const sf = new SingleFlight<string, number>({ timeoutMs: 20, clock });
    let aborted = false;
    const p = sf.do('k', (signal) => {
      signal.addEventListener('abort', () => (aborted = true));
      return new Promise<number>(() => {});
    });
    const q = sf.do('k', () => 2);
    let settled = false;
    p.catch(() => {}).finally(() => (settled = true));
    await clock.advanceAsync(19);
    assert.equal(settled, false, 'cut off early');
    assert.equal(sf.has('k'), true);
    await clock.advanceAsync(1);
    await assert.rejects(p, TimeoutError);
    await assert.rejects(q, TimeoutError);
    assert.ok(aborted);
    assert.equal(await sf.do('k', () => 3), 3);
    assert.equal(clock.pendingTimers, 0, 'the settled call cleared its timer');
  });

  it('clears the timeout timer when the last waiter leaves', async () => {
    const clock = new ManualClock();
    const sf = new SingleFlight<string, number>({ timeoutMs: 1_000, clock });
    const ac = new AbortController();
    const a = sf.do('k', () => new Promise<number>(() => {}), { signal: ac.signal });
    assert.equal(clock.pendingTimers, 1);
    ac.abort();
    await assert.rejects(a, AbortedError);
    assert.equal(clock.pendingTimers, 0);
  });

  it('rejects bad options naming them', () => {
    assert.throws(() => new SingleFlight({ timeoutMs: -1 }), /timeoutMs/);
    assert.throws(() => new SingleFlight({ clock: { now: () => 0 } as never }), /clock/);
    assert.throws(() => new SingleFlight(null as never), TypeError);
  });

  it("ends only the aborting caller's wait", async () => {
    const sf = new SingleFlight<string, number>();
    let release!: (v: number) => void;
    const ac = new AbortController();
    const a = sf.do('k', () => new Promise<number>((r) => (release = r)), { signal: ac.signal });
    const b = sf.do('k', () => 0);
    ac.abort();
    await assert.rejects(a, AbortedError);
    release(9);
    assert.equal(await b, 9);
  });

  it('aborts the shared call when every waiter has left', async () => {
    const sf = new SingleFlight<string, number>();
    let sharedSignal!: AbortSignal;
    const ac = new AbortController();
    const a = sf.do('k', (s) => ((sharedSignal = s), new Promise<number>(() => {})), { signal: ac.signal });
    ac.abort();
    await assert.rejects(a, AbortedError);
    assert.ok(sharedSignal.aborted);
    assert.equal(sf.has('k'), false);
    assert.equal(await sf.do('k', () => 5), 5);
  });
});
