import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../core/clock.js';
import { OverloadedError } from '../core/errors.js';
import type { AdmissionToken } from '../core/admission.js';
import { AdaptiveShedder } from './adaptive-shedder.js';
import { EventLoopLoad, type LoadSample } from './event-loop-load.js';

/** A shedder on a manual clock and a load signal the test sets. */
function setup(extra: Record<string, unknown> = {}) {
  const clock = new ManualClock(1_000);
  let sample: LoadSample = { utilization: 0.1, delayP99Ms: 1 };
  const shedder = new AdaptiveShedder({ clock, load: () => sample, ...extra });
  return {
    clock,
    shedder,
    setLoad: (s: LoadSample) => (sample = s),
  };
}

/** History: for 2 s, `perBucket` calls per 100 ms bucket, each taking `rtMs`. */
function warm(clock: ManualClock, shedder: AdaptiveShedder, perBucket: number, rtMs: number): void {
  for (let b = 0; b < 20; b++) {
    const tokens: AdmissionToken[] = [];
    for (let i = 0; i < perBucket; i++) tokens.push(shedder.admit());
    clock.advance(rtMs);
    for (const t of tokens) t.success();
    clock.advance(100 - rtMs);
  }
}

function fill(shedder: AdaptiveShedder, n: number): { tokens: AdmissionToken[]; dropped: number } {
  const tokens: AdmissionToken[] = [];
  let dropped = 0;
  for (let i = 0; i < n; i++) {
    try {
      tokens.push(shedder.admit());
    } catch (err) {
      assert.ok(err instanceof OverloadedError);
      assert.equal(err.code, 'ERR_OVERLOADED');
      dropped++;
    }
  }
  return { tokens, dropped };
}

describe('AdaptiveShedder', () => {
  it('never drops while the event loop is not overloaded, however many calls are in flight', () => {
    const { clock, shedder } = setup();
    warm(clock, shedder, 10, 10);
    assert.equal(fill(shedder, 5_000).dropped, 0);
  });

  it('does not drop on an overloaded loop while in-flight stays under maxPass × minRt', () => {
    const { clock, shedder, setLoad } = setup();
    warm(clock, shedder, 10, 10); // maxPass 10 per 100 ms, minRt 10 ms → max in flight 1
    setLoad({ utilization: 0.99, delayP99Ms: 1 });
    const s = shedder.stats();
    assert.equal(s.maxInFlight, 1);
    const t = shedder.admit();
    t.success();
    assert.equal(shedder.stats().dropped, 0);
  });

  it('drops when the loop is overloaded and in-flight exceeds maxPass × minRt', () => {
    const { clock, shedder, setLoad } = setup();
    warm(clock, shedder, 50, 20); // maxPass 50 per 100 ms, minRt 20 ms → max in flight 10
    assert.equal(shedder.stats().maxInFlight, 10);
    setLoad({ utilization: 0.95, delayP99Ms: 1 });
    // avgInFlight follows in-flight as calls end: keep many in flight and let some finish.
    const { tokens } = fill(shedder, 40);
    for (const t of tokens.splice(0, 5)) t.failure();
    const { dropped } = fill(shedder, 20);
    assert.equal(dropped, 20);
    assert.ok(shedder.stats().inFlight > 10);
  });

  it('counts event-loop delay p99 above the bound as overload too', () => {
    const { clock, shedder, setLoad } = setup({ delayP99Ms: 50 });
    warm(clock, shedder, 50, 20);
    setLoad({ utilization: 0.2, delayP99Ms: 80 });
    const { tokens } = fill(shedder, 40);
    for (const t of tokens.splice(0, 5)) t.failure();
    assert.ok(fill(shedder, 20).dropped > 0);
    assert.equal(shedder.stats().overloaded, true);
  });

  it('keeps dropping for coolOffMs after a drop while in-flight is high, then stops', () => {
    const { clock, shedder, setLoad } = setup();
    warm(clock, shedder, 50, 20);
    setLoad({ utilization: 0.95, delayP99Ms: 1 });
    const { tokens } = fill(shedder, 40);
    for (const t of tokens.splice(0, 5)) t.failure();
    assert.ok(fill(shedder, 1).dropped === 1);
    setLoad({ utilization: 0.1, delayP99Ms: 1 }); // the load signal says fine again…
    clock.advance(999);
    assert.equal(fill(shedder, 1).dropped, 1, '…but it is still hot 999 ms after the drop');
    clock.advance(1_000);
    assert.equal(fill(shedder, 1).dropped, 0, 'cooled off');
  });

  it('ends a token once: a second success() or failure() changes nothing', () => {
    const { shedder } = setup();
    const t = shedder.admit();
    t.success();
    t.success();
    t.failure();
    assert.equal(shedder.stats().inFlight, 0);
    assert.equal(shedder.stats().passed, 1);
  });

  it('execute counts a resolved task as success and a thrown one as failure', async () => {
    const { shedder } = setup();
    assert.equal(await shedder.execute(() => 7), 7);
    await assert.rejects(shedder.execute(() => Promise.reject(new Error('x'))), /x/);
    assert.equal(shedder.stats().passed, 1);
    assert.equal(shedder.stats().inFlight, 0);
  });

  for (const [opts, err] of [
    [{ utilizationThreshold: 0 }, RangeError],
    [{ utilizationThreshold: 1.5 }, RangeError],
    [{ delayP99Ms: 0 }, RangeError],
    [{ coolOffMs: -1 }, RangeError],
    [{ windowMs: NaN }, RangeError],
    [{ buckets: 1 }, RangeError],
    [{ load: 3 }, TypeError],
    [{ clock: { now: 1 } }, TypeError],
  ] as const) {
    it(`rejects options ${JSON.stringify(opts)} with ${err.name}`, () => {
      assert.throws(() => new AdaptiveShedder(opts as never), err);
    });
  }

  it('samples the real event loop on its clock: a busy loop reads as busy and delayed; close() stops the timer', async () => {
    const clock = new ManualClock();
    const load = new EventLoopLoad({ sampleMs: 100, clock });
    assert.equal(clock.pendingTimers, 1, 'one sampling timer, on the clock');
    assert.deepEqual(load.read(), { utilization: 0, delayP99Ms: 0 }, 'zeros before the first sample');
    // The delay monitor measures between its own (10 ms) ticks: let it tick once before and once after.
    await new Promise((r) => setTimeout(r, 15));
    const start = performance.now();
    while (performance.now() - start < 60) {
      // keep the loop busy: 60 ms without yielding
    }
    await new Promise((r) => setTimeout(r, 15));
    clock.advance(100); // the sample is taken now, not when a real timer happens to fire
    const s = load.read();
    assert.ok(s.utilization > 0.5, `utilization ${s.utilization} after 60 ms of a blocked loop`);
    assert.ok(s.delayP99Ms >= 20, `delay p99 ${s.delayP99Ms} ms after 60 ms of a blocked loop`);
    await load.close();
    assert.equal(clock.pendingTimers, 0, 'close() cleared the timer');
    await load.close(); // idempotent
    const shedder = new AdaptiveShedder({ clock });
    assert.equal(clock.pendingTimers, 1, 'the shedder samples on its clock');
    shedder.admit().success();
    await shedder[Symbol.asyncDispose]();
    assert.equal(clock.pendingTimers, 0);
  });
});
