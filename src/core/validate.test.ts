/**
 * within() names a nested part's bad option under its owner: a table of what the part throws and what the
 * owner's caller reads.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { within } from './validate.js';

type Row = [label: string, path: string, thrown: Error, expected: Error];

const rows: Row[] = [
  [
    'a nested option',
    'bulkhead',
    new RangeError('Bulkhead: maxConcurrent must be an integer ≥ 1, got 0'),
    new RangeError('Owner: bulkhead.maxConcurrent must be an integer ≥ 1, got 0'),
  ],
  [
    'a nested object that is not one',
    'bulkhead',
    new TypeError('Bulkhead: options must be an object, got 5'),
    new TypeError('Owner: bulkhead must be an object, got 5'),
  ],
  [
    "the owner's own options, built into a part",
    '',
    new RangeError('Bulkhead: maxQueued must be an integer ≥ 0, got NaN'),
    new RangeError('Owner: maxQueued must be an integer ≥ 0, got NaN'),
  ],
  [
    'a message that names another part',
    'balancer',
    new RangeError('OutlierDetector: x must be y'),
    new RangeError('Owner: balancer: OutlierDetector: x must be y'),
  ],
  ['a message that names no part', '', new TypeError('strategy must be one of …'), new TypeError('Owner: strategy must be one of …')],
];

describe('within', () => {
  for (const [label, path, thrown, expected] of rows) {
    it(`reports ${label} under the owner`, () => {
      assert.throws(
        () =>
          within('Owner', path, 'Bulkhead', () => {
            throw thrown;
          }),
        (err: Error) => {
          assert.equal(err.constructor, expected.constructor);
          assert.equal(err.message, expected.message);
          assert.equal(err.cause, thrown);
          return true;
        },
      );
    });
  }

  it('answers what the build answers, and lets any other error through unchanged', () => {
    assert.equal(
      within('Owner', 'x', 'Part', () => 42),
      42,
    );
    const other = new Error('Part: not an option error');
    assert.throws(
      () =>
        within('Owner', 'x', 'Part', () => {
          throw other;
        }),
      (err) => err === other,
    );
  });
});
