import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from './clock.js';
import { CoarseClock, getDefaultCoarseClock, setDefaultCoarseClock } from './coarse-clock.js';

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
    assert.equal(source.pendingTimers, 1, 'the refresh timer runs on the source clock');
    source.advance(3);
    assert.equal(c.now(), 3, 'the timer refreshed the cached time');
    source.advance(4);
    assert.equal(c.running, true, 'a read 4 ms ago keeps it running');
    source.advance(10);
    assert.equal(c.running, false, 'stopped after idleStopMs without reads');
    assert.equal(source.pendingTimers, 0);
    source.advance(5);
    assert.equal(c.now(), 22, 'a read while stopped goes to the source');
    assert.equal(c.running, true);
    await c.close();
    assert.equal(c.running, false);
  });

  it('never goes backwards even if the source does', () => {
    let t = 100;
    const real = new ManualClock();
    const source = {
      now: () => t,
      setTimeout: real.setTimeout.bind(real),
      setInterval: real.setInterval.bind(real),
      clearTimeout: real.clearTimeout.bind(real),
    };
    const c = new CoarseClock({ source, refreshEvery: 1, resolutionMs: 60_000 });
    assert.equal(c.now(), 100);
    t = 50;
    assert.equal(c.now(), 100);
    void c.close();
  });

  it('the default coarse clock is made once on first use and can be replaced', async () => {
    const first = getDefaultCoarseClock();
    assert.equal(getDefaultCoarseClock(), first);
    assert.ok(first.now() <= performance.now(), 'never ahead of the system clock');
    const mine = new CoarseClock({ source: new ManualClock(7) });
    setDefaultCoarseClock(mine);
    assert.equal(getDefaultCoarseClock(), mine);
    assert.equal(getDefaultCoarseClock().now(), 7);
    setDefaultCoarseClock(undefined);
    assert.notEqual(getDefaultCoarseClock(), mine);
    assert.throws(() => setDefaultCoarseClock({} as CoarseClock), TypeError);
    await mine.close();
  });
});
