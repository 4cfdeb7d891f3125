import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from './clock.js';
import { RollingWindow } from './rolling-window.js';

describe('RollingWindow', () => {
  it('sums what was added within the window and forgets older buckets', () => {
    const clock = new ManualClock(0);
    const w = new RollingWindow({ buckets: 4, bucketMs: 100, channels: 2, clock });
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
    const w = new RollingWindow({ buckets: 3, bucketMs: 10, clock });
    for (let i = 0; i < 5; i++) w.add(0, 1);
    clock.advance(1_000);
    assert.equal(w.sum(0), 0);
    w.add(0, 2);
    assert.equal(w.sum(0), 2);
  });

  it('reduce visits buckets oldest first with their age', () => {
    const clock = new ManualClock(0);
    const w = new RollingWindow({ buckets: 3, bucketMs: 10, clock });
    w.add(0, 1);
    clock.advance(10);
    w.add(0, 2);
    clock.advance(10);
    w.add(0, 3);
    const seen = w.reduce(0, [] as Array<[number, number]>, (acc, v, age) => (acc.push([v, age]), acc));
    assert.deepEqual(seen, [[1, 2], [2, 1], [3, 0]]);
  });

  it('accepts a time the caller already read', () => {
    const w = new RollingWindow({ buckets: 2, bucketMs: 10, clock: new ManualClock(0) });
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
          const w = new RollingWindow({ buckets, bucketMs, clock });
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
    assert.throws(() => new RollingWindow({ bucketMs: -1 }), /bucketMs/);
    assert.throws(() => new RollingWindow({ bucketMs: Number.NaN }), RangeError);
    assert.throws(() => new RollingWindow({ clock: {} as never }), TypeError);
  });
});
