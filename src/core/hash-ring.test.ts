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
      fc.property(
        fc.uniqueArray(fc.string({ minLength: 1, maxLength: 12 }), { minLength: 1, maxLength: 12 }),
        fc.array(fc.string(), { maxLength: 50 }),
        (members, keys) => {
          const a = new HashRing({ replicas: 20 });
          const b = new HashRing({ replicas: 20 });
          a.add(...members);
          b.set([...members].reverse());
          for (const k of keys) assert.equal(a.get(k), b.get(k));
        },
      ),
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
    assert.equal(ring.slotOf(ring.memberAt(pos)), ring.memberIndexAt(pos));
  });

  it('breaks hash ties by member name, so every node agrees', () => {
    const ring = new HashRing({ replicas: 3, hash: () => 7 }); // every point collides
    ring.set(['b', 'a', 'c']);
    assert.equal(ring.get('anything'), 'a');
  });

  /** naiveOwner is the ring built from scratch the obvious way: every point listed, sorted by (hash, name). */
  function naiveOwner(counts: Map<string, number>, hash: (s: string) => number): (key: string) => string | undefined {
    const pts: [number, string][] = [];
    for (const [m, c] of counts) for (let r = 0; r < c; r++) pts.push([hash(`${r}-${m}`) >>> 0, m]);
    pts.sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
    return (key) => {
      if (pts.length === 0) return undefined;
      const h = hash(key) >>> 0;
      const p = pts.find((x) => x[0] >= h) ?? pts[0]!;
      return p[1];
    };
  }

  it('after any sequence of adds, removals and point counts, owns every key as a ring built from scratch (property)', () => {
    // A weak 8-bit hash makes hash ties (between members and within one) common.
    const weak = (s: string) => hash32(s) & 0xff;
    const op = fc.oneof(
      fc.record({ kind: fc.constant('add' as const), m: fc.integer({ min: 0, max: 11 }) }),
      fc.record({ kind: fc.constant('remove' as const), m: fc.integer({ min: 0, max: 11 }) }),
      fc.record({ kind: fc.constant('points' as const), m: fc.integer({ min: 0, max: 11 }), c: fc.integer({ min: 0, max: 40 }) }),
      fc.record({ kind: fc.constant('set' as const), ms: fc.uniqueArray(fc.integer({ min: 0, max: 11 }), { maxLength: 6 }) }),
    );
    fc.assert(
      fc.property(fc.boolean(), fc.array(op, { maxLength: 30 }), (useWeak, ops) => {
        const hash = useWeak ? weak : hash32;
        const ring = new HashRing({ replicas: 7, hash });
        const counts = new Map<string, number>();
        for (const o of ops) {
          if (o.kind === 'add') {
            ring.add(`m${o.m}`);
            if (!counts.has(`m${o.m}`)) counts.set(`m${o.m}`, 7);
          } else if (o.kind === 'remove') {
            ring.remove(`m${o.m}`);
            counts.delete(`m${o.m}`);
          } else if (o.kind === 'points') {
            ring.setPoints(`m${o.m}`, o.c);
            if (o.c === 0) counts.delete(`m${o.m}`);
            else counts.set(`m${o.m}`, o.c);
          } else {
            ring.set(o.ms.map((m) => `m${m}`));
            counts.clear();
            for (const m of o.ms) counts.set(`m${m}`, 7);
          }
        }
        const expected = naiveOwner(counts, hash);
        assert.equal(ring.size, counts.size);
        assert.equal(
          ring.pointCount,
          [...counts.values()].reduce((a, b) => a + b, 0),
        );
        assert.deepEqual(ring.members(), [...counts.keys()].sort());
        for (let i = 0; i < 300; i++) assert.equal(ring.get(`k${i}`), expected(`k${i}`), `key k${i}`);
      }),
      { numRuns: 300 },
    );
  });

  it('rebuilds, in steps of any size, the ring update would make: same owner for every key, this ring untouched meanwhile (property)', () => {
    const weak = (s: string) => hash32(s) & 0xff;
    const change = fc.tuple(fc.integer({ min: 0, max: 11 }), fc.integer({ min: 0, max: 30 }));
    fc.assert(
      fc.property(
        fc.boolean(),
        fc.array(change, { maxLength: 12 }),
        fc.array(change, { maxLength: 16 }),
        fc.integer({ min: 1, max: 200 }),
        (useWeak, before, changes, stepSize) => {
          const hash = useWeak ? weak : hash32;
          const ring = new HashRing({ replicas: 7, hash });
          ring.update(before.map(([m, c]) => [`m${m}`, c]));
          const owners = Array.from({ length: 100 }, (_, i) => ring.get(`k${i}`));
          const counts = new Map(ring.members().map((m) => [m, ring.pointsOf(m)]));
          for (const [m, c] of changes)
            if (c === 0) counts.delete(`m${m}`);
            else counts.set(`m${m}`, c); // a member listed twice: the last wins
          const build = ring.rebuild(
            changes.map(([m, c]) => [`m${m}`, c]),
            stepSize,
          );
          let steps = 1;
          while (!build.step()) {
            steps++;
            assert.equal(ring.get(`k${steps % 100}`), owners[steps % 100], 'the source ring answers as before');
          }
          assert.equal(build.step(), true, 'a complete build stays complete');
          const next = build.ring;
          const expected = naiveOwner(counts, hash);
          assert.equal(next.size, counts.size);
          assert.deepEqual(next.members(), [...counts.keys()].sort());
          assert.equal(
            next.pointCount,
            [...counts.values()].reduce((a, b) => a + b, 0),
          );
          for (let i = 0; i < 300; i++) assert.equal(next.get(`k${i}`), expected(`k${i}`), `key k${i}`);
          // The rebuilt ring takes incremental changes like any other.
          next.setPoints('m3', 5);
          counts.set('m3', 5);
          const after = naiveOwner(counts, hash);
          for (let i = 0; i < 100; i++) assert.equal(next.get(`k${i}`), after(`k${i}`), `key k${i} after setPoints`);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('rebuilds a ring of 2^18 points (radix sort, fresh arrays zeroed in steps) as update builds it, in bounded steps', () => {
    const members = Array.from({ length: 256 }, (_, i) => `10.0.${i >> 4}.${i & 15}:8080`);
    const incremental = new HashRing();
    for (const m of members) incremental.setPoints(m, 1024); // one member at a time: the merge path
    const build = new HashRing().rebuild(
      members.map((m) => [m, 1024]),
      1 << 16,
    );
    let steps = 1;
    while (!build.step()) steps++;
    assert.ok(steps >= 32, `${steps} steps`); // 2^18 points × 8 units to hash alone need 32 steps of 2^16
    for (let i = 0; i < 20_000; i++) assert.equal(build.ring.get(`key:${i}`), incremental.get(`key:${i}`), `key:${i}`);
    // Halving every member's points drops by rank, no hashing: half the keys stay where they were.
    const halved = build.ring.rebuild(
      members.map((m) => [m, 512]),
      1 << 16,
    );
    while (!halved.step());
    for (const m of members) incremental.setPoints(m, 512);
    for (let i = 0; i < 20_000; i++) assert.equal(halved.ring.get(`key:${i}`), incremental.get(`key:${i}`), `key:${i} halved`);
  });

  it('builds rings that sort with the radix sort side by side, in interleaved steps, each as update builds it (scratch arrays are never shared)', () => {
    const a = Array.from({ length: 64 }, (_, i) => `a${i}`);
    const b = Array.from({ length: 96 }, (_, i) => `b${i}`);
    const ref = (members: string[]) => {
      const r = new HashRing();
      for (const m of members) r.setPoints(m, 1024);
      return r;
    };
    for (let round = 0; round < 2; round++) {
      // Round 2 reuses the scratch arrays the first round left (if the collector has not taken them).
      const x = new HashRing().rebuild(
        a.map((m) => [m, 1024]),
        1 << 12,
      );
      const y = new HashRing().rebuild(
        b.map((m) => [m, 1024]),
        1 << 12,
      );
      let dx = false;
      let dy = false;
      while (!dx || !dy) {
        dx ||= x.step();
        dy ||= y.step();
      }
      const [ra, rb] = [ref(a), ref(b)];
      for (let i = 0; i < 5_000; i++) {
        assert.equal(x.ring.get(`key:${i}`), ra.get(`key:${i}`), `a key:${i}`);
        assert.equal(y.ring.get(`key:${i}`), rb.get(`key:${i}`), `b key:${i}`);
      }
    }
  });

  it('refuses to go on rebuilding a ring that changed under the build, and bad steps', () => {
    const ring = new HashRing({ replicas: 4 });
    ring.add('a', 'b');
    const build = ring.rebuild([['c', 4]], 1);
    build.step();
    ring.add('d');
    assert.throws(() => {
      while (!build.step());
    }, /the ring changed while a rebuild of it ran/);
    assert.throws(() => ring.rebuild([], 0), RangeError);
    assert.throws(() => ring.rebuild([['', 1]]).step(), TypeError); // changes are read in the steps
    assert.throws(() => ring.rebuild([['a', -1]]).step(), RangeError);
  });

  it("answers each member's share of the hash space, summing to 1, in proportion to its points", () => {
    const ring = new HashRing({ replicas: 500 });
    ring.set(['a', 'b']);
    ring.setPoints('c', 1000);
    const shares = ring.shares();
    const sum = [...shares.values()].reduce((x, y) => x + y, 0);
    assert.ok(Math.abs(sum - 1) < 1e-9, `sum ${sum}`);
    assert.ok(shares.get('c')! > 0.4 && shares.get('c')! < 0.6, `c ${shares.get('c')}`);
    let hits = 0;
    for (let i = 0; i < 20_000; i++) if (ring.get(`k${i}`) === 'c') hits++;
    assert.ok(Math.abs(hits / 20_000 - shares.get('c')!) < 0.02);
  });

  it('rejects bad members and options', () => {
    assert.throws(() => new HashRing({ replicas: 0 }), RangeError);
    assert.throws(() => new HashRing({ hash: 1 as never }), TypeError);
    const ring = new HashRing();
    assert.throws(() => ring.add(''), TypeError);
    assert.throws(() => ring.set([3 as never]), TypeError);
  });

  it('hashes the virtual node names pointName gives, and refuses a pointName that is not a function', () => {
    const names: string[] = [];
    const ring = new HashRing({ replicas: 3, pointName: (m, i) => (names.push(`${i}${m}`), `${i}${m}`) });
    ring.add('a');
    assert.deepEqual(names.sort(), ['0a', '1a', '2a']);
    ring.remove('a');
    assert.equal(ring.size, 0);
    assert.throws(() => new HashRing({ pointName: 5 as never }), /HashRing: pointName must be a function, got 5/);
  });
});
