import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Backoff, addJitter } from './backoff.js';

describe('Backoff', () => {
  it('grows exponentially up to the cap without jitter', () => {
    const b = new Backoff({ initialMs: 100, maxMs: 1_000, multiplier: 2, jitter: 'none' });
    assert.deepEqual(
      Array.from({ length: 6 }, () => b.next()),
      [100, 200, 400, 800, 1_000, 1_000],
    );
    b.reset();
    assert.equal(b.next(), 100);
  });

  it('full jitter stays within [0, exponential]', () => {
    let r = 0;
    const b = new Backoff({ initialMs: 100, maxMs: 1_000, jitter: 'full', random: () => (r = (r + 0.37) % 1) });
    for (let i = 0; i < 10; i++) {
      const exp = Math.min(1_000, 100 * 2 ** i);
      const w = b.next();
      assert.ok(w >= 0 && w <= exp, `${w} outside [0, ${exp}]`);
    }
  });

  it('decorrelated jitter stays within [initial, cap] for any random sequence (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.double({ min: 0, max: 0.999999, noNaN: true }), { minLength: 1, maxLength: 50 }), (rs) => {
        let i = 0;
        const b = new Backoff({ initialMs: 50, maxMs: 5_000, jitter: 'decorrelated', random: () => rs[i++ % rs.length]! });
        for (let k = 0; k < rs.length; k++) {
          const w = b.next();
          assert.ok(w >= 50 && w <= 5_000, String(w));
        }
      }),
    );
  });

  it('rejects bad options naming them', () => {
    assert.throws(() => new Backoff({ initialMs: -1 }), /initialMs/);
    assert.throws(() => new Backoff({ initialMs: 100, maxMs: 10 }), /maxMs/);
    assert.throws(() => new Backoff({ multiplier: 0.5 }), /multiplier/);
    assert.throws(() => new Backoff({ jitter: 'weird' as never }), /jitter/);
    assert.throws(() => new Backoff({ random: 3 as never }), /random/);
  });
});

describe('addJitter', () => {
  it('spreads within ±fraction', () => {
    assert.equal(
      addJitter(1_000, 0.1, () => 0),
      900,
    );
    assert.equal(
      addJitter(1_000, 0.1, () => 0.5),
      1_000,
    );
    assert.ok(Math.abs(addJitter(1_000, 0.1, () => 0.999999) - 1_100) < 0.01);
  });
});
