import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../core/clock.js';
import { NoInstanceError } from '../core/errors.js';
import { HashRing } from '../core/hash-ring.js';
import type { ServiceInstance } from '../registry/types.js';
import fc from 'fast-check';
import { RingHash } from './ring-hash.js';
import { inst, instances, seeded } from './test-fixtures.js';

const KEYS = 1_000_000;

function loads(p: RingHash, list: readonly ServiceInstance[], key: (i: number) => string, n = KEYS, start = false): Map<string, number> {
  const counts = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const picked = p.pick(list, key(i));
    if (start) p.start(picked);
    counts.set(picked.id, (counts.get(picked.id) ?? 0) + 1);
  }
  return counts;
}

const maxOverMean = (counts: Map<string, number>, members: number, total: number) => Math.max(...counts.values()) / (total / members);

describe('RingHash', () => {
  it('spreads 1 M keys over 10 instances with the busiest at most 1.10 × the mean', () => {
    const list = instances(10);
    const counts = loads(new RingHash(), list, (i) => `user:${i}`);
    assert.equal(counts.size, 10);
    const ratio = maxOverMean(counts, 10, KEYS);
    assert.ok(ratio <= 1.1, `max/mean ${ratio.toFixed(3)}`);
  });

  it('moves at most 1.2/11 of the keys when an 11th instance joins, all of them to the newcomer', () => {
    const list = instances(10);
    const p = new RingHash();
    const before = new Array<string>(KEYS);
    for (let i = 0; i < KEYS; i++) before[i] = p.pick(list, `user:${i}`).id;
    const grown = [...list, inst('i10')];
    let moved = 0;
    for (let i = 0; i < KEYS; i++) {
      const id = p.pick(grown, `user:${i}`).id;
      if (id !== before[i]) {
        moved++;
        assert.equal(id, 'i10');
      }
    }
    assert.ok(moved > 0 && moved <= (1.2 / 11) * KEYS, `moved ${moved}`);
  });

  it('moves only the keys of an instance that leaves', () => {
    const list = instances(8);
    const p = new RingHash({ replicas: 200 });
    const before = Array.from({ length: 20_000 }, (_, i) => p.pick(list, `k${i}`).id);
    const shrunk = list.filter((x) => x.id !== 'i3');
    for (let i = 0; i < 20_000; i++) {
      const id = p.pick(shrunk, `k${i}`).id;
      if (before[i] !== 'i3') assert.equal(id, before[i]);
      else assert.notEqual(id, 'i3');
    }
  });

  it('routes like a core HashRing of the instance ids with the same replicas (one ring for balancer and cache)', () => {
    const list = instances(5);
    const p = new RingHash({ replicas: 160, minRingSize: 1 });
    const ring = new HashRing({ replicas: 160 });
    ring.set(list.map((x) => x.id));
    for (let i = 0; i < 5_000; i++) assert.equal(p.pick(list, `k${i}`).id, ring.get(`k${i}`));
  });

  it('does not depend on the order of the instance list', () => {
    const list = instances(6);
    const a = new RingHash({ replicas: 100 });
    const b = new RingHash({ replicas: 100 });
    const reversed = [...list].reverse();
    for (let i = 0; i < 2_000; i++) assert.equal(a.pick(list, `k${i}`).id, b.pick(reversed, `k${i}`).id);
  });

  it('with bounded loads keeps the busiest at most 1.25 × the mean under a skewed key set', () => {
    const list = instances(10);
    const random = seeded(7);
    // Skewed: half the requests hit 5 hot keys, the rest are spread over 10 000 keys.
    const keys = Array.from({ length: 200_000 }, () => (random() < 0.5 ? `hot:${Math.floor(random() * 5)}` : `k:${Math.floor(random() * 10_000)}`));
    const plain = loads(new RingHash(), list, (i) => keys[i]!, keys.length);
    assert.ok(maxOverMean(plain, 10, keys.length) > 1.5, 'the key set is skewed enough to overload one instance without bounds');
    const bounded = loads(new RingHash({ boundedLoad: true }), list, (i) => keys[i]!, keys.length, true);
    const ratio = maxOverMean(bounded, 10, keys.length);
    assert.ok(ratio <= 1.25, `bounded max/mean ${ratio.toFixed(4)}`);
  });

  it('with bounded loads sends a key to its own instance while that one is under the bound', () => {
    const list = instances(4);
    const p = new RingHash({ boundedLoad: true, replicas: 100 });
    const plain = new RingHash({ replicas: 100 });
    for (let i = 0; i < 1000; i++) {
      const picked = p.pick(list, `k${i}`);
      assert.equal(picked.id, plain.pick(list, `k${i}`).id);
      p.start(picked);
      p.report(picked, { ok: true, latencyMs: 1 }); // each call ends before the next: loads stay at 0
    }
  });

  it('picks a random instance when no key is given', () => {
    const list = instances(4);
    const p = new RingHash({ random: seeded(3) });
    const seen = new Set(Array.from({ length: 200 }, () => p.pick(list).id));
    assert.equal(seen.size, 4);
  });

  it('after any sequence of joins, leaves, ejections, returns and weight changes, owns every key as a ring built from scratch (property)', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constantFrom('join' as const, 'leave' as const, 'eject' as const, 'return' as const), id: fc.integer({ min: 0, max: 11 }) }),
      fc.record({ kind: fc.constant('weight' as const), id: fc.integer({ min: 0, max: 11 }), w: fc.integer({ min: 1, max: 4 }) }),
    );
    fc.assert(
      fc.property(fc.boolean(), fc.array(op, { minLength: 1, maxLength: 40 }), (small, ops) => {
        // small: a ring bound that forces rescaling (64 → 32 → … points per unit of weight).
        const options = small ? { replicas: 64, minRingSize: 1, maxRingSize: 200 } : { replicas: 16, minRingSize: 1 };
        const p = new RingHash(options);
        const weights = new Map<string, number>();
        const ejected = new Set<string>();
        let list: ServiceInstance[] = [];
        const apply = () => {
          list = [...weights].filter(([id]) => !ejected.has(id)).map(([id, w]) => inst(id, String(w)));
          if (list.length > 0) p.pick(list, 'warm'); // the picker sees every intermediate list
        };
        for (const o of ops) {
          const id = `i${o.id}`;
          if (o.kind === 'join') weights.set(id, weights.get(id) ?? 1);
          else if (o.kind === 'leave') {
            weights.delete(id);
            ejected.delete(id);
          } else if (o.kind === 'eject' && weights.has(id)) ejected.add(id);
          else if (o.kind === 'return') ejected.delete(id);
          else if (o.kind === 'weight' && weights.has(id)) weights.set(id, o.w);
          apply();
        }
        if (list.length === 0) return;
        const scale = p.stats().pointsPerWeight;
        const fresh = new RingHash({ replicas: scale, minRingSize: 1, maxRingSize: 1 << 24 });
        for (let i = 0; i < 300; i++) assert.equal(p.pick(list, `k${i}`).id, fresh.pick(list, `k${i}`).id, `key k${i}`);
        if (small) assert.ok(p.stats().points <= 200 + p.stats().absentPoints, `ring of ${p.stats().points} points`);
      }),
      { numRuns: 300 },
    );
  });

  it('with rebuilds in slices (picks between them), owns every key as a ring built from scratch once they complete (property)', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constantFrom('join' as const, 'leave' as const, 'eject' as const, 'return' as const), id: fc.integer({ min: 0, max: 11 }) }),
      fc.record({ kind: fc.constant('weight' as const), id: fc.integer({ min: 0, max: 11 }), w: fc.integer({ min: 1, max: 4 }) }),
      fc.record({ kind: fc.constant('bulk' as const), from: fc.integer({ min: 12, max: 30 }), n: fc.integer({ min: 1, max: 20 }) }),
      fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 1, max: 4 }) }),
    );
    fc.assert(
      fc.property(fc.boolean(), fc.integer({ min: 1, max: 600 }), fc.array(op, { minLength: 1, maxLength: 40 }), (small, sliceSize, ops) => {
        const clock = new ManualClock();
        const options = small ? { replicas: 64, minRingSize: 1, maxRingSize: 400 } : { replicas: 16, minRingSize: 1 };
        const p = new RingHash({ ...options, sliceSize, clock, sliceLists: true });
        const weights = new Map<string, number>();
        const ejected = new Set<string>();
        let list: ServiceInstance[] = [];
        // A list differing in many instances is taken in in slices too: until then picks may go to the
        // instances of the lists handed to it since the last one it took in.
        let since = new Set<string>();
        const apply = () => {
          list = [...weights].filter(([id]) => !ejected.has(id)).map(([id, w]) => inst(id, String(w)));
          if (list.length === 0) return;
          const ids = new Set(list.map((x) => x.id));
          const a = p.pick(list, 'warm');
          if (!p.stats().listPending) since = ids;
          else for (const id of ids) since.add(id);
          assert.ok(since.has(a.id), 'a pick during a rebuild goes to an instance in the list (or one not yet taken in)');
          assert.equal(p.pick(list, 'warm').id, a.id, 'and the same key goes to the same instance until the list or ring changes');
          assert.ok(since.has(p.pick(list, 'other', new Set([a.id])).id));
        };
        for (const o of ops) {
          if (o.kind === 'tick') {
            clock.advance(o.ms);
            apply();
            continue;
          }
          const id = `i${o.kind === 'bulk' ? 0 : o.id}`;
          if (o.kind === 'join') weights.set(id, weights.get(id) ?? 1);
          else if (o.kind === 'leave') {
            weights.delete(id);
            ejected.delete(id);
          } else if (o.kind === 'eject' && weights.has(id)) ejected.add(id);
          else if (o.kind === 'return') ejected.delete(id);
          else if (o.kind === 'weight' && weights.has(id)) weights.set(id, o.w);
          else if (o.kind === 'bulk') for (let i = o.from; i < o.from + o.n; i++) weights.set(`i${i}`, 1 + (i % 3));
          apply();
        }
        if (list.length === 0) return;
        for (let turns = 0; p.stats().rebuilding || p.stats().listPending; turns++) {
          assert.ok(turns < 10_000, 'a rebuild completes');
          clock.advance(1);
          p.pick(list, 'k'); // hands a list taken in over
        }
        const scale = p.stats().pointsPerWeight;
        const fresh = new RingHash({ replicas: scale, minRingSize: 1, maxRingSize: 1 << 24 });
        for (let i = 0; i < 300; i++) assert.equal(p.pick(list, `k${i}`).id, fresh.pick(list, `k${i}`).id, `key k${i}`);
        assert.equal(clock.pendingTimers, 0, 'no timer is left once the ring is complete');
        if (small) assert.ok(p.stats().points <= 400 + p.stats().absentPoints, `ring of ${p.stats().points} points`);
      }),
      { numRuns: 300 },
    );
  });

  it('builds a big first ring in slices, one per timer turn, keyed picks meanwhile going by jump hashing over the list', async () => {
    const clock = new ManualClock();
    const list = instances(300);
    const p = new RingHash({ clock, sliceSize: 1 << 15 });
    const during = Array.from({ length: 2_000 }, (_, i) => p.pick(list, `k${i}`).id);
    assert.equal(p.stats().rebuilding, true);
    assert.equal(p.stats().points, 0);
    const counts = new Map<string, number>();
    for (const id of during) counts.set(id, (counts.get(id) ?? 0) + 1);
    assert.ok(counts.size > 250, `jump hashing spreads keys: ${counts.size} of 300 instances picked`);
    let turns = 0;
    while (p.stats().rebuilding) {
      clock.advance(1);
      turns++;
      if (p.stats().rebuilding) for (let i = 0; i < 50; i++) assert.equal(p.pick(list, `k${i}`).id, during[i], 'stable while the build runs');
    }
    // 300 × 1 280 points × 8 units to hash alone are 94 slices of 2^15 units.
    assert.ok(turns >= 94, `${turns} slices`);
    assert.equal(p.stats().rebuilds, 1);
    assert.equal(p.stats().points, 300 * 1280);
    const fresh = new HashRing({ replicas: 1280 });
    fresh.set(list.map((x) => x.id));
    for (let i = 0; i < 2_000; i++) assert.equal(p.pick(list, `k${i}`).id, fresh.get(`k${i}`));
    // An instance joining now is one merge, at once.
    const grown = [...list, inst('i300')];
    p.pick(grown, 'k');
    assert.equal(p.stats().rebuilding, false);
    assert.equal(p.stats().points, 301 * 1280);
    await p.close();
  });

  it('rescales in slices while picks use the old ring, an instance that leaves meanwhile excluded at once', async () => {
    const clock = new ManualClock();
    const p = new RingHash({ clock, replicas: 64, minRingSize: 1, maxRingSize: 64 * 100, sliceSize: 2_000 });
    const list = instances(100);
    p.pick(list, 'k');
    while (p.stats().rebuilding) clock.advance(1);
    assert.equal(p.stats().pointsPerWeight, 64);
    const before = Array.from({ length: 1_000 }, (_, i) => p.pick(list, `k${i}`).id);
    const grown = [...list, inst('i100')]; // 101 × 64 > 6 400: every instance halves to 32 points
    p.pick(grown, 'k');
    assert.equal(p.stats().rebuilding, true);
    assert.equal(p.stats().pointsPerWeight, 32);
    for (let i = 0; i < 1_000; i++) assert.equal(p.pick(grown, `k${i}`).id, before[i], 'the old ring answers until the new one is in');
    clock.advance(1);
    const shrunk = grown.filter((x) => x.id !== 'i7');
    for (let i = 0; i < 1_000; i++) {
      const id = p.pick(shrunk, `k${i}`).id;
      assert.notEqual(id, 'i7');
      if (before[i] !== 'i7') assert.equal(id, before[i]);
    }
    while (p.stats().rebuilding) clock.advance(1);
    const fresh = new RingHash({ replicas: 32, minRingSize: 1 });
    for (let i = 0; i < 1_000; i++) assert.equal(p.pick(shrunk, `k${i}`).id, fresh.pick(shrunk, `k${i}`).id, `key k${i}`);
    assert.equal(p.stats().points - p.stats().absentPoints, 100 * 32);
    await p.close();
  });

  it('completes a rebuild on close and clears its timer', async () => {
    const clock = new ManualClock();
    const p = new RingHash({ clock, sliceSize: 1_000 });
    const list = instances(20);
    p.pick(list, 'k');
    assert.equal(p.stats().rebuilding, true);
    assert.equal(clock.pendingTimers, 1);
    await p[Symbol.asyncDispose]();
    assert.equal(clock.pendingTimers, 0);
    assert.equal(p.stats().rebuilding, false);
    assert.equal(p.stats().points, 20 * 1280);
    p.pick([...list, inst('i20')], 'k'); // after close, updates apply at once
    assert.equal(p.stats().points, 21 * 1280);
  });

  it('routes a key of an ejected instance to its next instance clockwise, and back when it returns, without touching the ring', () => {
    const list = instances(10);
    const p = new RingHash({ replicas: 50, minRingSize: 1 });
    const before = Array.from({ length: 5_000 }, (_, i) => p.pick(list, `k${i}`).id);
    const points = p.stats().points;
    const healthy = list.filter((x) => x.id !== 'i4');
    const fresh = new RingHash({ replicas: 50, minRingSize: 1 });
    for (let i = 0; i < 5_000; i++) {
      const id = p.pick(healthy, `k${i}`).id;
      assert.equal(id, fresh.pick(healthy, `k${i}`).id);
      if (before[i] !== 'i4') assert.equal(id, before[i]);
    }
    assert.equal(p.stats().points, points, 'the ejected instance keeps its points');
    assert.equal(p.stats().absentPoints, 50);
    for (let i = 0; i < 5_000; i++) assert.equal(p.pick(list, `k${i}`).id, before[i]);
    assert.equal(p.stats().absentPoints, 0);
  });

  it('gives an instance points in proportion to its weight', () => {
    const list = [inst('a', '1'), inst('b', '3')];
    const p = new RingHash({ replicas: 100 });
    p.pick(list, 'k');
    assert.equal(p.ring.pointsOf('a') * 3, p.ring.pointsOf('b'));
    const counts = loads(p, list, (i) => `user:${i}`, 100_000);
    const share = counts.get('b')! / 100_000;
    assert.ok(share > 0.7 && share < 0.8, `b's share ${share}`);
  });

  it('keeps the ring within maxRingSize and at least minRingSize points', () => {
    const p = new RingHash({ maxRingSize: 10_000, minRingSize: 1_000 });
    p.pick(instances(100), 'k');
    assert.ok(p.stats().points <= 10_000 && p.stats().points >= 5_000, `${p.stats().points} points`);
    assert.equal(p.stats().pointsPerWeight, 80);
    const q = new RingHash({ replicas: 10, minRingSize: 1_000 });
    q.pick(instances(3), 'k');
    assert.ok(q.stats().points >= 1_000, `${q.stats().points} points`);
  });

  it('rejects bad options and bad input', () => {
    assert.throws(() => new RingHash({ replicas: 0 }), RangeError);
    assert.throws(() => new RingHash({ replicas: 1.5 }), RangeError);
    assert.throws(() => new RingHash({ loadFactor: 1 }), RangeError);
    assert.throws(() => new RingHash({ boundedLoad: 'yes' as never }), TypeError);
    assert.throws(() => new RingHash({ maxRingSize: 0 }), RangeError);
    assert.throws(() => new RingHash({ minRingSize: 2_000, maxRingSize: 1_000 }), RangeError);
    assert.throws(() => new RingHash({ sliceSize: 0 }), RangeError);
    assert.throws(() => new RingHash({ clock: { now: () => 0 } as never }), TypeError);
    const p = new RingHash();
    assert.throws(() => p.pick([], 'k'), NoInstanceError);
    assert.throws(() => p.pick(instances(2), 42 as never), TypeError);
  });
});
