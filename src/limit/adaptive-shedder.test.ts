import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../core/clock.js';
import { OverloadedError } from '../core/errors.js';
import type { AdmissionToken } from '../core/admission.js';
import { AdaptiveShedder } from './adaptive-shedder.js';
import type { EventLoopUtilization } from 'node:perf_hooks';
import { EventLoopLoad, type EventLoopMeters, type LoadSample } from './event-loop-load.js';

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
    await assert.rejects(
      shedder.execute(() => Promise.reject(new Error('x'))),
      /x/,
    );
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

  it('samples on its clock: busy share and delay p99 of each interval, the histogram reset each time; close() stops the timer', async () => {
    const clock = new ManualClock();
    let busy = 0; // cumulative busy ms, as eventLoopUtilization reports it
    const delays: number[] = []; // ns, what the delay histogram recorded since its last reset
    const meters: EventLoopMeters = {
      eventLoopUtilization: (current?: EventLoopUtilization, previous?: EventLoopUtilization) => {
        if (current === undefined) return { idle: clock.now() - busy, active: busy, utilization: 0 };
        const active = current.active - (previous?.active ?? 0);
        const idle = current.idle - (previous?.idle ?? 0);
        return { idle, active, utilization: active / (active + idle) };
      },
      delay: {
        get count() {
          return delays.length;
        },
        percentile: (p: number) => [...delays].sort((a, b) => a - b)[Math.min(delays.length - 1, Math.ceil((p / 100) * delays.length) - 1)]!,
        reset: () => void (delays.length = 0),
        enable: () => true,
        disable: () => true,
      },
    };
    const load = new EventLoopLoad({ sampleMs: 100, clock, meters });
    assert.equal(clock.pendingTimers, 1, 'one sampling timer, on the clock');
    assert.deepEqual(load.read(), { utilization: 0, delayP99Ms: 0 }, 'zeros before the first sample');
    busy += 75; // 75 of the next 100 ms busy, one tick delayed by 60 ms
    delays.push(10e6, 10e6, 60e6);
    clock.advance(99);
    assert.deepEqual(load.read(), { utilization: 0, delayP99Ms: 0 }, 'no sample before sampleMs');
    clock.advance(1);
    assert.deepEqual(load.read(), { utilization: 0.75, delayP99Ms: 60 });
    clock.advance(100); // an idle interval: nothing recorded since the reset
    assert.deepEqual(load.read(), { utilization: 0, delayP99Ms: 0 });
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
