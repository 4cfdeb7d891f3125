import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { hash32 } from './hash.js';
import { PointHasher, RadixSort } from './ring-points.js';

describe('PointHasher', () => {
  it('hashes a virtual node as hash32 hashes its name `${index}-${member}` (property)', () => {
    const hasher = new PointHasher();
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 40, unit: 'binary' }), fc.array(fc.nat({ max: 2 ** 32 - 1 }), { maxLength: 20 }), (member, indexes) => {
        for (const i of [0, 9, 10, 99, 100, ...indexes]) assert.equal(hasher.hash(member, i), hash32(`${i}-${member}`), `${i}-${member}`);
      }),
      { numRuns: 500 },
    );
  });
});

describe('RadixSort', () => {
  it('sorts uint32 keys stably, carrying two arrays along, over ranges of any size (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.nat({ max: 2 ** 32 - 1 }), { maxLength: 300 }), fc.integer({ min: 1, max: 50 }), fc.boolean(), (raw, chunk, narrow) => {
        const keys = Uint32Array.from(raw, (k) => (narrow ? k & 0x1000103 : k)); // narrow: many equal keys
        const n = keys.length;
        const a = Uint32Array.from(keys.keys());
        const b = Uint32Array.from(a, (i) => i * 3);
        const expected = [...a].sort((x, y) => keys[x]! - keys[y]! || x - y);
        const sort = new RadixSort(keys, a, b, new Uint32Array(n), new Uint32Array(n), new Uint32Array(n));
        const over = (f: (from: number, to: number) => void) => {
          for (let i = 0; i < n; i += chunk) f.call(sort, i, Math.min(n, i + chunk));
        };
        const original = Uint32Array.from(keys);
        over(sort.count);
        sort.prefix();
        for (let d = 0; d < 4; d++) over((from, to) => sort.pass(d, from, to));
        assert.deepEqual([...a], expected);
        assert.deepEqual(
          [...keys],
          expected.map((i) => original[i]),
        );
        assert.deepEqual(
          [...b],
          expected.map((i) => i * 3),
        );
      }),
      { numRuns: 300 },
    );
  });
});
