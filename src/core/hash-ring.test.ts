import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { hash32 } from './hash.js';
import { HashRing } from './hash-ring.js';

describe('hash32', () => {
  it('matches MurmurHash3 x86_32 reference values for ASCII keys', () => {
    // UTF-16 units two per block; for the empty string and seeds the reference values are the spec's.
    assert.equal(hash32(''), 0);
    assert.equal(hash32('', 1), 0x514e28b7);
    assert.equal(hash32('', 0xffffffff), 0x81f16f39);
  });

  it('changes about half the output bits when one input bit changes (avalanche)', () => {
    let flips = 0;
    let trials = 0;
    for (let i = 0; i < 2_000; i++) {
      const key = `key-${i}`;
      const h = hash32(key);
      const other = hash32(key.slice(0, -1) + String.fromCharCode(key.charCodeAt(key.length - 1) ^ 1));
      let x = (h ^ other) >>> 0;
      while (x) {
        flips += x & 1;
        x >>>= 1;
      }
      trials += 32;
    }
    const ratio = flips / trials;
    assert.ok(ratio > 0.45 && ratio < 0.55, `bit flip ratio ${ratio}`);
  });
});

describe('HashRing', () => {
  it('answers undefined / −1 when empty and the member for every key otherwise', () => {
    const ring = new HashRing();
    assert.equal(ring.get('k'), undefined);
    assert.equal(ring.position('k'), -1);
    ring.add('a', 'b', 'c');
    assert.equal(ring.size, 3);
    assert.equal(ring.pointCount, 150);
    assert.deepEqual(ring.members(), ['a', 'b', 'c']);
    for (let i = 0; i < 100; i++) assert.ok(ring.has(ring.get(`k${i}`)!));
  });

  it('agrees with itself whatever the order members were added in (every node builds the same ring)', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.string({ minLength: 1, maxLength: 12 }), { minLength: 1, maxLength: 12 }), fc.array(fc.string(), { maxLength: 50 }), (members, keys) => {
        const a = new HashRing({ replicas: 20 });
        const b = new HashRing({ replicas: 20 });
        a.add(...members);
        b.set([...members].reverse());
        for (const k of keys) assert.equal(a.get(k), b.get(k));
      }),
    );
  });

  it('moves only the keys that a new member takes, and only to it (property)', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.string({ minLength: 1, maxLength: 8 }), { minLength: 2, maxLength: 8 }), (members) => {
        const [extra, ...rest] = members;
        const ring = new HashRing({ replicas: 30 });
        ring.set(rest);
        const before = Array.from({ length: 300 }, (_, i) => ring.get(`k${i}`));
        ring.add(extra!);
        for (let i = 0; i < 300; i++) {
          const now = ring.get(`k${i}`);
          if (now !== before[i]) assert.equal(now, extra);
        }
        ring.remove(extra!);
        for (let i = 0; i < 300; i++) assert.equal(ring.get(`k${i}`), before[i]);
      }),
    );
  });

  it('walks clockwise with position / memberAt / memberIndexAt, wrapping around', () => {
    const ring = new HashRing({ replicas: 4 });
    ring.set(['x', 'y']);
    const pos = ring.position('some key');
    assert.equal(ring.memberAt(pos), ring.get('some key'));
    assert.equal(ring.memberAt(pos + ring.pointCount), ring.memberAt(pos));
    assert.equal(ring.memberAt(-1), ring.memberAt(ring.pointCount - 1));
    assert.equal(ring.members()[ring.memberIndexAt(pos)], ring.memberAt(pos));
  });

  it('breaks hash ties by member name, so every node agrees', () => {
    const ring = new HashRing({ replicas: 3, hash: () => 7 }); // every point collides
    ring.set(['b', 'a', 'c']);
    assert.equal(ring.get('anything'), 'a');
  });

  it('rejects bad members and options', () => {
    assert.throws(() => new HashRing({ replicas: 0 }), RangeError);
    assert.throws(() => new HashRing({ hash: 1 as never }), TypeError);
    const ring = new HashRing();
    assert.throws(() => ring.add(''), TypeError);
    assert.throws(() => ring.set([3 as never]), TypeError);
  });
});
