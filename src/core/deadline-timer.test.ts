import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from './clock.js';
import { DeadlineTimer, GRACE_MS, LATE_MS } from './deadline-timer.js';
import { lateClock } from './test-fixtures.js';

describe('DeadlineTimer', () => {
  it('fires at its deadline when its timer runs on time', () => {
    const clock = new ManualClock(100);
    const fired: number[] = [];
    const t = new DeadlineTimer(clock, 50, () => fired.push(clock.now()));
    clock.advance(49);
    assert.deepEqual(fired, []);
    assert.equal(t.pending, true);
    clock.advance(1);
    assert.deepEqual(fired, [150]);
    assert.equal(t.pending, false);
    clock.advance(1_000);
    assert.deepEqual(fired, [150], 'once');
  });

  it('after a stall (its timer ran late) fires one timer turn later, not at once', () => {
    const manual = new ManualClock(0);
    const clock = lateClock(manual);
    let fired = 0;
    const t = new DeadlineTimer(clock, 50, () => fired++);
    manual.advance(49);
    clock.lateMs = 300; // the process was blocked: the timer runs 300 ms after its deadline
    manual.advance(1);
    assert.equal(fired, 0, 'not in the turn that found it late');
    assert.equal(t.pending, true);
    manual.advance(GRACE_MS);
    assert.equal(fired, 1);
    assert.equal(t.pending, false);
  });

  it('is on time when it runs less than LATE_MS late', () => {
    const manual = new ManualClock(0);
    const clock = lateClock(manual);
    let fired = 0;
    new DeadlineTimer(clock, 50, () => fired++);
    clock.lateMs = LATE_MS / 2;
    manual.advance(50);
    assert.equal(fired, 1);
  });

  it('cancel stops it before the deadline and during the grace turn', () => {
    const manual = new ManualClock(0);
    const clock = lateClock(manual);
    let fired = 0;
    const before = new DeadlineTimer(clock, 50, () => fired++);
    before.cancel();
    before.cancel(); // idempotent
    const during = new DeadlineTimer(clock, 50, () => fired++);
    clock.lateMs = 10;
    manual.advance(50);
    assert.equal(during.pending, true);
    during.cancel();
    assert.equal(during.pending, false);
    manual.advance(1_000);
    assert.equal(fired, 0);
  });

  it('keeps ref/unref across the grace timer', () => {
    const manual = new ManualClock(0);
    const clock = lateClock(manual);
    const handles: { hasRef(): boolean }[] = [];
    const setTimeout = clock.setTimeout;
    clock.setTimeout = (fn, ms) => {
      const h = setTimeout(fn, ms);
      handles.push(h);
      return h;
    };
    const t = new DeadlineTimer(clock, 50, () => {}).unref();
    assert.equal(handles[0]!.hasRef(), false);
    clock.lateMs = 5;
    manual.advance(50);
    assert.equal(handles.length, 2);
    assert.equal(handles[1]!.hasRef(), false, 'the grace timer is unref’d too');
    t.ref();
    assert.equal(handles[1]!.hasRef(), true);
  });

  it('fires exactly once, never before its deadline, and at most GRACE_MS after the turn that found it late (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10_000 }), fc.integer({ min: 0, max: 5_000 }), fc.integer({ min: 0, max: 10_000 }), (waitMs, late, extraMs) => {
        const manual = new ManualClock(1_000);
        const clock = lateClock(manual);
        const at: number[] = [];
        new DeadlineTimer(clock, waitMs, () => at.push(manual.now()));
        clock.lateMs = late;
        manual.advance(waitMs + GRACE_MS + extraMs);
        assert.equal(at.length, 1);
        assert.equal(at[0], late >= LATE_MS ? 1_000 + waitMs + GRACE_MS : 1_000 + waitMs);
      }),
    );
  });
});
