/**
 * SeriesPairObserver counts what two SeriesObservers count — every bucket, count and sum to the last
 * bit — whether the two values of a pair land in one bucket or not, one at a time (`observe`) or by the
 * batch in milliseconds (`observeMs`, with its runs of pairs in the same bucket).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { BUCKETS, COUNT, DEFAULT_BUCKETS, SUM, SeriesObserver, SeriesPairObserver } from './family.js';

const bounds = Float64Array.from(DEFAULT_BUCKETS);
const live = { live: true };
const hist = (): Float64Array => new Float64Array(BUCKETS + bounds.length);

/** Milliseconds on and about the bounds (in ms), between them, above them, and not finite. */
const ms: fc.Arbitrary<number> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...DEFAULT_BUCKETS.map((b) => b * 1000)) },
  { weight: 4, arbitrary: fc.double({ min: 0, max: 12_000, noNaN: true }) },
  { weight: 4, arbitrary: fc.constantFrom(0.3, 0.31, 4.9, 5, 5.1, 30, 31, 10_000.5, 15_000) },
  { weight: 1, arbitrary: fc.constantFrom(Infinity, -Infinity, NaN, -1) },
);

/** reference answers what two SeriesObservers count of the pairs (seconds). */
function reference(pairs: [number, number][]): [Float64Array, Float64Array] {
  const a = hist();
  const b = hist();
  const oa = new SeriesObserver(live, bounds, a);
  const ob = new SeriesObserver(live, bounds, b);
  for (const [x, y] of pairs) {
    oa.observe(x);
    ob.observe(y);
  }
  return [a, b];
}

describe('SeriesPairObserver', () => {
  it('counts a pair whose values land in different buckets in each one’s bucket', () => {
    const p = new SeriesPairObserver(live, bounds);
    p.observe(0.004, 0.02); // a ≤ 5 ms, b in (10, 25] ms
    p.observe(0.02, 0.004); // the other way round
    p.observe(0.3, 11); // b above every bound: +Inf only
    p.observe(0.004, 0.004); // one bucket for both
    assert.deepEqual([...p.histA], [4, 0.004 + 0.02 + 0.3 + 0.004, 2, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0]);
    assert.deepEqual([...p.histB], [4, 0.02 + 0.004 + 11 + 0.004, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert.equal(p.histB[COUNT], 4);
    assert.equal(p.histA[SUM], 0.004 + 0.02 + 0.3 + 0.004);
  });

  it('counts runs of pairs handed over in milliseconds, a run broken by a pair elsewhere or split in two buckets', () => {
    const p = new SeriesPairObserver(live, bounds);
    // Three pairs ≤ 5 ms, one split (3 ms, 40 ms), two in (5, 10] ms, one not finite, one ≤ 5 ms again,
    // two above every bound (+Inf) and one not finite after them.
    const pairs = [1, 2, 3, 4, 0.5, 0.5, 3, 40, 6, 7, 7, 6, Infinity, 2, 1, 1, 11_000, 12_000, 20_000, 11_000, Infinity, 11_000];
    p.observeMs(Float64Array.from(pairs), pairs.length);
    const [a, b] = reference([
      [0.001, 0.002],
      [0.003, 0.004],
      [0.0005, 0.0005],
      [0.003, 0.04],
      [0.006, 0.007],
      [0.007, 0.006],
      [Infinity, 0.002],
      [0.001, 0.001],
      [11, 12],
      [20, 11],
      [Infinity, 11],
    ]);
    assert.deepEqual([...p.histA], [...a]);
    assert.deepEqual([...p.histB], [...b]);
    assert.equal(p.histA[BUCKETS], 5); // 1, 3, 0.5, 3 and 1 ms (Infinity is not counted)
    assert.equal(p.histB[BUCKETS + 3], 1); // 40 ms in (25, 50]
    assert.equal(p.histA[COUNT], 9); // 11 pairs, Infinity twice left out
    assert.equal(p.histB[COUNT], 11);
  });

  it('counts what two SeriesObservers count, one pair at a time or by the batch, sums to the last bit', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(ms, ms), { maxLength: 300 }), fc.integer({ min: 1, max: 300 }), (pairs, cut) => {
        const seconds = pairs.map(([x, y]): [number, number] => [x / 1000, y / 1000]);
        const [a, b] = reference(seconds);
        const one = new SeriesPairObserver(live, bounds);
        for (const [x, y] of seconds) one.observe(x, y);
        assert.deepEqual([...one.histA], [...a]);
        assert.deepEqual([...one.histB], [...b]);
        // By the batch, in two batches cut anywhere (a run goes across the cut).
        const flat = Float64Array.from(pairs.flat());
        const batched = new SeriesPairObserver(live, bounds);
        const at = 2 * Math.min(cut, pairs.length);
        batched.observeMs(flat.subarray(0, at), at);
        batched.observeMs(flat.subarray(at), flat.length - at);
        assert.deepEqual([...batched.histA], [...a]);
        assert.deepEqual([...batched.histB], [...b]);
      }),
      { numRuns: 300 },
    );
  });

  it('counts nothing once its owner is untracked', () => {
    const owner = { live: true };
    const p = new SeriesPairObserver(owner, bounds);
    owner.live = false;
    p.observe(0.001, 0.001);
    p.observeMs(Float64Array.of(1, 1), 2);
    assert.deepEqual([...p.histA], [...hist()]);
  });
});
