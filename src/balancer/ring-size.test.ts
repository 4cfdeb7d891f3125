import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { RingSize } from './ring-size.js';

/** sized is a RingSize whose `present` is the total `weights` want at its scale, as RingHash keeps it. */
function sized(replicas: number, min: number, max: number, weights: readonly number[]): { size: RingSize; entries: { weight: number }[] } {
  const size = new RingSize(replicas, min, max);
  for (const w of weights) size.present += size.pointsFor(w);
  return { size, entries: weights.map((weight) => ({ weight })) };
}

describe('RingSize', () => {
  it('gives 10 000 instances of weight 1 80 points each under the default bounds', () => {
    const { size, entries } = sized(1280, 1024, 1 << 20, new Array<number>(10_000).fill(1));
    assert.equal(size.rescale(entries), true);
    assert.equal(size.scale, 80);
    assert.equal(size.present, 800_000);
    assert.equal(size.rescale(entries), false, 'settled');
  });

  it('grows back only once twice the points fit twice over (hysteresis)', () => {
    const { size, entries } = sized(1280, 1024, 1 << 20, new Array<number>(10_000).fill(1));
    size.rescale(entries);
    const half = entries.slice(0, 5000); // 400 000 points at 80; 800 000 at 160 would fit, but not twice over
    size.present = half.length * size.pointsFor(1);
    assert.equal(size.rescale(half), false);
    assert.equal(size.scale, 80);
    const quarter = entries.slice(0, 2500); // 200 000 at 80: 400 000 at 160 fits twice over
    size.present = quarter.length * size.pointsFor(1);
    assert.equal(size.rescale(quarter), true);
    assert.equal(size.scale, 160);
  });

  it('grows back to replicas when the list shrinks, and at least 1 point each, at most maxRingSize', () => {
    const { size, entries } = sized(1280, 1024, 1 << 20, new Array<number>(10_000).fill(1));
    size.rescale(entries);
    const few = entries.slice(0, 10);
    size.present = few.reduce((s, e) => s + size.pointsFor(e.weight), 0);
    assert.equal(size.rescale(few), true);
    assert.equal(size.scale, 1280);
    assert.equal(size.present, 12_800);
    assert.equal(size.pointsFor(0), 1);
    assert.equal(size.pointsFor(1e9), 1 << 20);
  });

  it('keeps the ring within its bounds at a power-of-two multiple of replicas, and settles (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2048 }),
        fc.integer({ min: 1, max: 5000 }),
        fc.integer({ min: 1, max: 50_000 }),
        fc.array(fc.integer({ min: 1, max: 100 }), { maxLength: 200 }),
        (replicas, a, b, weights) => {
          const [min, max] = a <= b ? [a, b] : [b, a];
          const { size, entries } = sized(replicas, min, max, weights);
          const before = size.scale;
          const changed = size.rescale(entries);
          assert.equal(changed, size.scale !== before);
          assert.equal(
            size.present,
            weights.reduce((s, w) => s + size.pointsFor(w), 0),
            'present is the total at the new scale',
          );
          assert.ok(Number.isInteger(Math.log2(size.scale / replicas)), `scale ${size.scale} is replicas × 2^k`);
          assert.ok(size.present <= max || size.present === weights.length, 'within maxRingSize unless every instance is down to 1 point');
          assert.equal(size.rescale(entries), false, 'a second look changes nothing');
        },
      ),
      { numRuns: 300 },
    );
  });
});
