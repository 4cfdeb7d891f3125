import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { NoInstanceError } from '../core/errors.js';
import { HashRing } from '../core/hash-ring.js';
import type { ServiceInstance } from '../registry/types.js';
import { RingHash } from './ring-hash.js';
import { inst, instances, seeded } from './fixtures.test.js';

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
    const p = new RingHash({ replicas: 160 });
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

  it('rejects bad options and bad input', () => {
    assert.throws(() => new RingHash({ replicas: 0 }), RangeError);
    assert.throws(() => new RingHash({ replicas: 1.5 }), RangeError);
    assert.throws(() => new RingHash({ loadFactor: 1 }), RangeError);
    assert.throws(() => new RingHash({ boundedLoad: 'yes' as never }), TypeError);
    const p = new RingHash();
    assert.throws(() => p.pick([], 'k'), NoInstanceError);
    assert.throws(() => p.pick(instances(2), 42 as never), TypeError);
  });
});
