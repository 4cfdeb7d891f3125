import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { ManualClock } from '../core/clock.js';
import { CoarseClock, coarseClock } from './coarse-clock.js';

describe('CoarseClock', () => {
  it('answers the cached time between refreshes and reads the source every refreshEvery reads', async () => {
    const source = new ManualClock(100);
    const c = new CoarseClock({ source, refreshEvery: 4, resolutionMs: 60_000 });
    assert.equal(c.now(), 100); // the first read starts the timer and reads the source
    source.advance(50);
    assert.equal(c.now(), 100);
    assert.equal(c.now(), 100);
    assert.equal(c.now(), 100);
    assert.equal(c.now(), 150); // 4th read since the last refresh
    await c.close();
  });

  it('refreshes from its timer while nobody reads, and stops the timer when idle', async () => {
    const source = new ManualClock(0);
    const c = new CoarseClock({ source, refreshEvery: 1_000_000, resolutionMs: 1, idleStopMs: 5 });
    c.now();
    assert.equal(c.running, true);
    source.advance(10);
    await sleep(30);
    assert.equal(c.now(), 10, 'the timer refreshed the cached time');
    await sleep(40);
    assert.equal(c.running, false, 'stopped after idleStopMs without reads');
    source.advance(5);
    assert.equal(c.now(), 15, 'a read while stopped goes to the source');
    assert.equal(c.running, true);
    await c.close();
    assert.equal(c.running, false);
  });

  it('never goes backwards even if the source does', () => {
    let t = 100;
    const c = new CoarseClock({ source: { now: () => t }, refreshEvery: 1, resolutionMs: 60_000 });
    assert.equal(c.now(), 100);
    t = 50;
    assert.equal(c.now(), 100);
    void c.close();
  });

  it('the shared coarseClock moves with performance.now() without being read, and never ahead of it', async () => {
    const before = coarseClock.now();
    await sleep(20); // its 5 ms timer is due (and so runs) before this one
    const after = coarseClock.now();
    assert.ok(after > before, `${after} > ${before}`);
    assert.ok(after <= performance.now());
  });
});
