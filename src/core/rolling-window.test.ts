import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from './clock.js';
import { RollingWindow } from './rolling-window.js';
import { OutcomeTimeWindow } from './outcome-window.js';
import { ThrottleWindow } from './throttle-window.js';

describe('RollingWindow', () => {
  it('sums what was added within the window and forgets older buckets', () => {
    const clock = new ManualClock(0);
    const w = new RollingWindow({ windowMs: 400, buckets: 4, channels: 2, clock });
    w.add(0, 1);
    w.add(1, 5);
    clock.advance(100);
    w.add(0, 2);
    assert.equal(w.sum(0), 3);
    assert.equal(w.sum(1), 5);
    clock.advance(300); // the first bucket (t=0) has left the window
    assert.equal(w.sum(0), 2);
    assert.equal(w.sum(1), 0);
    clock.advance(100);
    assert.equal(w.sum(0), 0);
  });

  it('clears everything after a gap longer than the window', () => {
    const clock = new ManualClock(0);
    const w = new RollingWindow({ windowMs: 30, buckets: 3, clock });
    for (let i = 0; i < 5; i++) w.add(0, 1);
    clock.advance(1_000);
    assert.equal(w.sum(0), 0);
    w.add(0, 2);
    assert.equal(w.sum(0), 2);
  });

  it('reduce visits buckets oldest first with their age', () => {
    const clock = new ManualClock(0);
    const w = new RollingWindow({ windowMs: 30, buckets: 3, clock });
    w.add(0, 1);
    clock.advance(10);
    w.add(0, 2);
    clock.advance(10);
    w.add(0, 3);
    const seen = w.reduce(0, [] as Array<[number, number]>, (acc, v, age) => (acc.push([v, age]), acc));
    assert.deepEqual(seen, [
      [1, 2],
      [2, 1],
      [3, 0],
    ]);
  });

  it('accepts a time the caller already read', () => {
    const w = new RollingWindow({ windowMs: 20, buckets: 2, clock: new ManualClock(0) });
    w.add(0, 1, 0);
    w.add(0, 1, 15);
    assert.equal(w.sum(0, 15), 2);
    assert.equal(w.sum(0, 25), 1);
  });

  it('always equals a naive model (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 50 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 9 })), { maxLength: 100 }),
        (buckets, bucketMs, steps) => {
          const clock = new ManualClock(0);
          const w = new RollingWindow({ windowMs: buckets * bucketMs, buckets, clock });
          const log: Array<[number, number]> = [];
          for (const [dt, v] of steps) {
            clock.advance(dt);
            w.add(0, v);
            log.push([Math.floor(clock.now() / bucketMs), v]);
            const head = Math.floor(clock.now() / bucketMs);
            const expected = log.filter(([b]) => b > head - buckets).reduce((s, [, x]) => s + x, 0);
            assert.equal(w.sum(0), expected);
          }
        },
      ),
    );
  });

  it('rejects bad options naming them', () => {
    assert.throws(() => new RollingWindow({ buckets: 0 }), /buckets/);
    assert.throws(() => new RollingWindow({ buckets: 1.5 }), RangeError);
    assert.throws(() => new RollingWindow({ windowMs: -1 }), /windowMs/);
    assert.throws(() => new RollingWindow({ windowMs: Number.NaN }), RangeError);
    assert.throws(() => new RollingWindow({ clock: {} as never }), TypeError);
  });

  it("the breakers' windows keep the same totals as the general one (property: one roll logic)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 50 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 60 }), fc.integer({ min: 0, max: 3 })), { maxLength: 120 }),
        (buckets, bucketMs, steps) => {
          const clock = new ManualClock(0);
          const windowMs = buckets * bucketMs;
          const general = new RollingWindow({ windowMs, buckets, channels: 3, clock });
          const outcome = new OutcomeTimeWindow(windowMs, buckets, 0);
          const throttle = new ThrottleWindow(windowMs, buckets, 0);
          for (const [dt, kind] of steps) {
            clock.advance(dt);
            const now = clock.now();
            if (kind === 0) {
              general.add(0, 1);
              outcome.success(now);
              throttle.addSuccess(now);
            } else if (kind === 1) {
              general.add(0, 1);
              general.add(1, 1);
              outcome.record(true, false, now);
              throttle.addFailure(now);
            } else if (kind === 2) {
              general.add(0, 1);
              general.add(2, 1);
              outcome.record(false, true, now);
              throttle.addDrop(now);
            } else {
              outcome.advance(now);
              throttle.advance(now);
            }
            outcome.advance(now);
            throttle.advance(now);
            assert.deepEqual([outcome.calls, outcome.failures, outcome.slow], [general.sum(0), general.sum(1), general.sum(2)]);
            assert.deepEqual(
              [throttle.successes + throttle.failures + throttle.drops, throttle.failures, throttle.drops],
              [general.sum(0), general.sum(1), general.sum(2)],
            );
          }
        },
      ),
    );
  });

  it('each window equals a naive model of timestamped events over random advances, jumps past the window and resets (property)', () => {
    // The model keeps every event with its bucket number (floor(t / bucketMs)); a bucket is in the window
    // while it is one of the `buckets` newest. A reset forgets the events so far. Jumps up to 4 windows long
    // let the ring be emptied whole (in O(1): its stale buckets must read as empty until they are reused).
    const ops = fc.array(
      fc.record({ dt: fc.oneof(fc.integer({ min: 0, max: 60 }), fc.integer({ min: 0, max: 1_600 })), kind: fc.integer({ min: 0, max: 5 }) }),
      {
        maxLength: 80,
      },
    );
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 400 }),
        fc.integer({ min: 0, max: 1_000 }),
        ops,
        (buckets, windowMs, start, steps) => {
          const bucketMs = windowMs / buckets;
          const clock = new ManualClock(start);
          const general = new RollingWindow({ windowMs, buckets, channels: 3, clock });
          const outcome = new OutcomeTimeWindow(windowMs, buckets, start);
          const throttle = new ThrottleWindow(windowMs, buckets, start);
          let events: Array<{ abs: number; kind: number }> = [];
          const totals = [0, 0, 0];
          for (const { dt, kind } of steps) {
            const now = clock.advance(dt);
            const abs = Math.floor(now / bucketMs);
            if (kind <= 2) {
              events.push({ abs, kind });
              totals[kind]!++;
              general.add(kind, 1);
              if (kind === 0) throttle.addSuccess(now);
              else if (kind === 1) throttle.addFailure(now);
              else throttle.addDrop(now);
              outcome.record(kind === 1, kind === 2, now);
            } else if (kind === 3) {
              events = [];
              general.reset();
              throttle.reset(now);
              outcome.reset(now);
            } // else: time passes only
            general.sum(0);
            throttle.advance(now);
            outcome.advance(now);
            const live = events.filter((e) => e.abs > abs - buckets);
            const count = (k: number) => live.filter((e) => e.kind === k).length;
            assert.deepEqual([general.sum(0), general.sum(1), general.sum(2)], [count(0), count(1), count(2)]);
            assert.deepEqual([throttle.successes, throttle.failures, throttle.drops], [count(0), count(1), count(2)]);
            assert.deepEqual([outcome.calls, outcome.failures, outcome.slow], [live.length, count(1), count(2)]);
            assert.deepEqual([throttle.successesTotal, throttle.failuresTotal, throttle.dropsTotal], totals);
            // Bucket by bucket, oldest first: reduce, and the run of failing buckets (go-zero's history()).
            const perBucket = (k: number) =>
              Array.from({ length: buckets }, (_, i) => [live.filter((e) => e.abs === abs - (buckets - 1 - i) && e.kind === k).length, buckets - 1 - i]);
            for (const k of [0, 1, 2])
              assert.deepEqual(
                general.reduce(k, [] as number[][], (acc, v, age) => (acc.push([v, age]), acc)),
                perBucket(k),
              );
            let run = 0;
            for (let age = buckets - 1; age >= 0; age--) {
              const inBucket = live.filter((e) => e.abs === abs - age);
              if (inBucket.some((e) => e.kind === 0)) run = 0;
              else if (inBucket.some((e) => e.kind === 1)) run++;
            }
            assert.equal(throttle.failingBuckets(), run);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
