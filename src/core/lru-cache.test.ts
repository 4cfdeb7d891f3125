import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from './clock.js';
import { LruCache, keyHash } from './lru-cache.js';

/** Model is the obviously-correct LRU the property test compares against: an array, most recent first. */
class Model {
  entries: { key: string; value: string }[] = [];
  evicted: string[] = [];
  constructor(readonly maxBytes: number) {}
  size(e: { key: string; value: string }) {
    return e.key.length + e.value.length;
  }
  get bytes() {
    return this.entries.reduce((s, e) => s + this.size(e), 0);
  }
  get(key: string) {
    const i = this.entries.findIndex((e) => e.key === key);
    if (i < 0) return undefined;
    const [e] = this.entries.splice(i, 1);
    this.entries.unshift(e!);
    return e!.value;
  }
  add(key: string, value: string) {
    this.remove(key);
    if (key.length + value.length > this.maxBytes) return;
    this.entries.unshift({ key, value });
    while (this.bytes > this.maxBytes) this.evicted.push(this.entries.pop()!.key);
  }
  remove(key: string) {
    const i = this.entries.findIndex((e) => e.key === key);
    if (i >= 0) this.entries.splice(i, 1);
  }
  removeOldest() {
    const e = this.entries.pop();
    if (e) this.evicted.push(e.key);
    return e?.key;
  }
}

const op = fc.oneof(
  fc.record({ t: fc.constant('get' as const), k: fc.integer({ min: 0, max: 20 }) }),
  fc.record({ t: fc.constant('add' as const), k: fc.integer({ min: 0, max: 20 }), n: fc.integer({ min: 0, max: 40 }) }),
  fc.record({ t: fc.constant('remove' as const), k: fc.integer({ min: 0, max: 20 }) }),
  fc.record({ t: fc.constant('removeOldest' as const) }),
);

describe('LruCache', () => {
  it('never holds more bytes than its capacity and evicts in least-recently-used order, for any sequence of operations', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 120 }), fc.array(op, { maxLength: 300 }), (maxBytes, ops) => {
        const evicted: string[] = [];
        const lru = new LruCache<string>({ maxBytes, onEvict: (k) => evicted.push(k) });
        const model = new Model(maxBytes);
        for (const o of ops) {
          if (o.t === 'get') assert.equal(lru.get(`k${o.k}`), model.get(`k${o.k}`));
          else if (o.t === 'add') {
            lru.add(`k${o.k}`, 'x'.repeat(o.n));
            model.add(`k${o.k}`, 'x'.repeat(o.n));
          } else if (o.t === 'remove') {
            lru.remove(`k${o.k}`);
            model.remove(`k${o.k}`);
          } else assert.equal(lru.removeOldest(), model.removeOldest());
          assert.ok(lru.bytes <= maxBytes, `bytes ${lru.bytes} > ${maxBytes}`);
          assert.equal(lru.bytes, model.bytes);
          assert.equal(lru.length, model.entries.length);
          assert.deepEqual(
            lru.keysByRecency(),
            model.entries.map((e) => e.key),
          );
          assert.deepEqual(evicted, model.evicted);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('hashes keys that fold to the same words apart, and spreads short keys evenly over the index', () => {
    // Two units a step: a key and the same key with a NUL unit appended fold to one word; the length
    // tells them apart. Swapped units land in different halves of a word.
    for (const k of ['', 'a', 'ab', 'abc', 'key-12']) assert.notEqual(keyHash(k), keyHash(`${k}\u0000`), JSON.stringify(k));
    assert.notEqual(keyHash('ab'), keyHash('ba'));
    // 65 536 keys over 1 024 positions: 64 a position on average; no position far from it.
    const counts = new Int32Array(1024);
    for (let i = 0; i < 65_536; i++) counts[keyHash(`key-${i}`) & 1023]!++;
    assert.ok(Math.max(...counts) < 128 && Math.min(...counts) > 16, `positions hold ${Math.min(...counts)}…${Math.max(...counts)} keys`);
  });

  it('finds every live key and no removed one under heavy add/remove churn of keys that collide in the index', () => {
    // 48 keys whose hashes share their low 10 bits: they all start probing at the same table position at
    // every table size up to 1 024, so removals exercise the backward shift inside one long probe run;
    // 16 ordinary keys interleave with them. The model is a Map.
    const home = keyHash('c0') & 1023;
    const colliding: string[] = [];
    for (let i = 0; colliding.length < 48; i++) if ((keyHash(`c${i}`) & 1023) === home) colliding.push(`c${i}`);
    const pool = [...colliding, ...Array.from({ length: 16 }, (_, i) => `o${i}`)];
    const churn = fc.oneof(
      fc.record({ t: fc.constant('add' as const), k: fc.nat({ max: pool.length - 1 }), n: fc.nat({ max: 3 }) }),
      fc.record({ t: fc.constant('remove' as const), k: fc.nat({ max: pool.length - 1 }) }),
      fc.record({ t: fc.constant('removeOldest' as const) }),
    );
    fc.assert(
      fc.property(fc.array(churn, { maxLength: 600 }), (ops) => {
        const lru = new LruCache<string>({ maxBytes: 1 << 20 });
        const model = new Map<string, string>();
        for (const o of ops) {
          if (o.t === 'add') {
            const key = pool[o.k]!;
            const value = 'v'.repeat(o.n);
            lru.add(key, value);
            model.set(key, value);
          } else if (o.t === 'remove') assert.equal(lru.remove(pool[o.k]!), model.delete(pool[o.k]!));
          else {
            const oldest = lru.removeOldest();
            if (oldest !== undefined) assert.ok(model.delete(oldest));
            else assert.equal(model.size, 0);
          }
          assert.equal(lru.length, model.size);
        }
        for (const key of pool) {
          assert.equal(lru.has(key), model.has(key), key);
          assert.equal(lru.get(key), model.get(key), key);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('evicts the least recently used entry first: a get refreshes an entry', () => {
    const lru = new LruCache<string>({ maxBytes: 6 });
    lru.add('a', '1');
    lru.add('b', '2');
    lru.add('c', '3');
    assert.equal(lru.get('a'), '1');
    lru.add('d', '4');
    assert.deepEqual(lru.keysByRecency(), ['d', 'a', 'c']);
  });

  it('refuses an entry larger than its capacity and keeps the others', () => {
    const lru = new LruCache<string>({ maxBytes: 5 });
    lru.add('a', '1');
    assert.equal(lru.add('big', 'xxxxx'), false);
    assert.equal(lru.get('a'), '1');
    assert.equal(lru.get('big'), undefined);
  });

  it('replacing a value updates its size', () => {
    const lru = new LruCache<string>({ maxBytes: 100 });
    lru.add('a', 'xxxx');
    lru.add('a', 'x');
    assert.equal(lru.bytes, 2);
    assert.equal(lru.length, 1);
  });

  it('forgets an entry at its expiry time and reports it as evicted', () => {
    const clock = new ManualClock(1000);
    const evicted: string[] = [];
    const lru = new LruCache<string>({ maxBytes: 100, clock, onEvict: (k) => evicted.push(k) });
    lru.add('a', '1', 1500);
    lru.add('b', '2');
    clock.advance(499);
    assert.equal(lru.get('a'), '1');
    assert.equal(lru.expiresAt('a'), 1500);
    clock.advance(1);
    assert.equal(lru.has('a'), false);
    assert.equal(lru.get('a'), undefined);
    assert.equal(lru.get('b'), '2');
    assert.deepEqual(evicted, ['a']);
    assert.equal(lru.bytes, 2);
  });

  it('with trackAddedAt, answers when each entry was added or last replaced, through growth and slot reuse; without it, nothing', () => {
    const clock = new ManualClock(1000);
    const lru = new LruCache<string>({ maxBytes: 10_000, clock, trackAddedAt: true });
    lru.add('a', '1');
    clock.advance(10);
    lru.add('b', '2', 5000);
    for (let i = 0; i < 100; i++) lru.add(`k${i}`, 'v'); // past the initial slots: the times move with the arrays
    clock.advance(10);
    lru.add('a', '3'); // replaced: a new time
    lru.remove('b');
    lru.add('c', '4'); // b's freed slot
    assert.deepEqual(
      ['a', 'b', 'c', 'k0', 'k99'].map((k) => lru.addedAt(k)),
      [1020, undefined, 1020, 1010, 1010],
    );
    assert.deepEqual(lru.keysByRecency().slice(0, 2), ['c', 'a']); // reading the time does not touch recency
    lru.clear();
    assert.equal(lru.addedAt('a'), undefined);
    const plain = new LruCache<string>({ maxBytes: 100, clock });
    plain.add('a', '1');
    assert.equal(plain.addedAt('a'), undefined);
  });

  it('grows past its initial slots and reuses freed ones', () => {
    const lru = new LruCache<string>({ maxBytes: 10_000 });
    for (let i = 0; i < 1000; i++) lru.add(`k${i}`, 'v');
    assert.equal(lru.length, 1000);
    for (let i = 0; i < 500; i++) lru.remove(`k${i}`);
    for (let i = 0; i < 500; i++) lru.add(`n${i}`, 'v');
    assert.equal(lru.get('k999'), 'v');
    assert.equal(lru.get('n499'), 'v');
    assert.equal(lru.length, 1000);
  });

  it('rejects bad options with errors naming the option', () => {
    assert.throws(() => new LruCache({ maxBytes: -1 }), /maxBytes/);
    assert.throws(() => new LruCache({ maxBytes: 1.5 }), /maxBytes/);
    assert.throws(() => new LruCache({ maxBytes: 10, onEvict: 3 as never }), /onEvict/);
    assert.throws(() => new LruCache({ maxBytes: 10, clock: {} as never }), /clock/);
    assert.throws(() => new LruCache({ maxBytes: 10, trackAddedAt: 1 as never }), /trackAddedAt must be a boolean, got 1/);
  });
});
