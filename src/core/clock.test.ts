import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock, systemClock } from './clock.js';

describe('ManualClock', () => {
  it('moves only when advanced or set', () => {
    const c = new ManualClock(5);
    assert.equal(c.now(), 5);
    assert.equal(c.advance(10), 15);
    c.set(100);
    assert.equal(c.now(), 100);
  });
  it('rejects going backwards and non-finite steps', () => {
    const c = new ManualClock(10);
    assert.throws(() => c.set(5), RangeError);
    assert.throws(() => c.advance(-1), RangeError);
    assert.throws(() => c.advance(Number.NaN), RangeError);
    assert.throws(() => new ManualClock(Infinity), RangeError);
  });
});

describe('systemClock', () => {
  it('is monotonic', () => {
    let prev = systemClock.now();
    for (let i = 0; i < 1000; i++) {
      const t = systemClock.now();
      assert.ok(t >= prev);
      prev = t;
    }
  });
});
