import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from '../core/clock.js';
import { KeyedLimiter } from './keyed-limiter.js';
import { TokenLimiter } from './token-limiter.js';

describe('KeyedLimiter', () => {
  const badOptions: Array<[label: string, options: object, error: typeof TypeError | typeof RangeError, message: RegExp]> = [
    ['rate NaN', { rate: NaN }, RangeError, /^KeyedLimiter: rate must be a finite number > 0, got NaN$/],
    ['rate 0', { rate: 0 }, RangeError, /^KeyedLimiter: rate must be a finite number > 0, got 0$/],
    ['rate a string', { rate: '5' }, TypeError, /^KeyedLimiter: rate must be a number, got "5"$/],
    ['burst 0.5', { rate: 5, burst: 0.5 }, RangeError, /^KeyedLimiter: burst must be a finite number ≥ 1, got 0\.5$/],
    ['maxKeys 0', { rate: 5, maxKeys: 0 }, RangeError, /^KeyedLimiter: maxKeys must be an integer .*got 0$/],
    ['neither rate nor create', {}, TypeError, /^KeyedLimiter: give rate .* or create, got neither$/],
  ];
  for (const [label, options, error, message] of badOptions) {
    it(`refuses ${label} at construction, naming KeyedLimiter (not the TokenLimiters it makes)`, () => {
      assert.throws(
        () => new KeyedLimiter(options as never),
        (err: Error) => err.constructor === error && message.test(err.message),
      );
    });
  }

  it('gives each key its own bucket', () => {
    const k = new KeyedLimiter({ rate: 1, burst: 2, clock: new ManualClock() });
    assert.deepEqual([k.allow('a'), k.allow('a'), k.allow('a'), k.allow('b')], [true, true, false, true]);
    assert.equal(k.decide('a').remaining, 0);
    assert.equal(k.size, 2);
    const s = k.stats();
    assert.deepEqual(s, { keys: 2, maxKeys: 10_000, allowed: 3, limited: 2 });
    k.allow('c');
    assert.equal(s.keys, 2, 'stats() answers a fresh snapshot, not a live object');
    assert.deepEqual((k.get('b') as TokenLimiter).stats(), { tokens: 1, rate: 1, burst: 2, allowed: 1, limited: 0 });
  });

  it('keeps at most maxKeys keys under a flood of distinct keys', () => {
    const k = new KeyedLimiter({ rate: 10, maxKeys: 1_000, clock: new ManualClock() });
    for (let i = 0; i < 50_000; i++) k.allow(`ip-${i}`);
    assert.equal(k.size, 1_000);
  });

  it('evicts an idle key before a busy one; a busy key gets a second chance', () => {
    const clock = new ManualClock();
    const k = new KeyedLimiter({ rate: 1, burst: 1, maxKeys: 2, clock });
    assert.equal(k.allow('a'), true);
    assert.equal(k.allow('b'), true);
    clock.advance(1_000); // both buckets full again: idle
    assert.equal(k.allow('a'), true); // a is busy (empty bucket), b is idle
    assert.equal(k.allow('c'), true); // evicts b, not the older a
    assert.equal(k.allow('a'), false, 'a was kept, with its empty bucket');
    assert.equal(k.size, 2);
  });

  it('evicts the oldest when every key is busy: memory first, the debt of that key is forgiven', () => {
    const clock = new ManualClock();
    const k = new KeyedLimiter({ rate: 1, burst: 1, maxKeys: 2, clock });
    k.allow('a');
    k.allow('b');
    assert.equal(k.allow('c'), true);
    assert.equal(k.size, 2);
    assert.equal(k.allow('b'), false, 'b kept');
    assert.equal(k.allow('c'), false, 'c kept');
  });

  it('purgeIdle drops the keys whose bucket is full again', () => {
    const clock = new ManualClock();
    const k = new KeyedLimiter({ rate: 10, burst: 20, clock });
    k.allow('a');
    clock.advance(1_000);
    k.allow('b');
    clock.advance(1_000); // a refilled (100 ms needed), b too; c is busy
    k.allow('c', 20);
    assert.equal(k.purgeIdle(), 2);
    assert.equal(k.size, 1);
  });

  it('eviction of an idle key loses nothing: it answers as if it had been kept', () => {
    const clock = new ManualClock();
    const k = new KeyedLimiter({ rate: 10, burst: 5, clock });
    const kept = new TokenLimiter({ rate: 10, burst: 5, clock });
    for (let i = 0; i < 5; i++) assert.equal(k.allow('a'), kept.allow());
    clock.advance(600);
    k.purgeIdle();
    assert.equal(k.size, 0);
    for (let i = 0; i < 7; i++) assert.equal(k.allow('a'), kept.allow());
  });

  it('wraps any limiter through create', () => {
    const made: string[] = [];
    const k = new KeyedLimiter({
      create: (key) => {
        made.push(key);
        return new TokenLimiter({ rate: 1, burst: 1, clock: new ManualClock() });
      },
    });
    k.allow('x');
    k.allow('x');
    assert.deepEqual(made, ['x']);
  });

  it('rejects keys over 1 KiB and non-strings with TypeError', () => {
    const k = new KeyedLimiter({ rate: 1, clock: new ManualClock() });
    assert.throws(() => k.allow('x'.repeat(1_025)), TypeError);
    assert.throws(() => k.allow('é'.repeat(513)), TypeError, '1 026 UTF-8 bytes');
    assert.throws(() => k.allow(undefined as never), TypeError);
    assert.equal(k.allow('x'.repeat(1_024)), true);
  });

  for (const [opts, err] of [
    [{}, TypeError],
    [{ rate: 0 }, RangeError],
    [{ rate: 1, burst: 0 }, RangeError],
    [{ rate: 1, maxKeys: 0 }, RangeError],
    [{ rate: 1, maxKeys: 1.5 }, RangeError],
    [{ create: 'nope' }, TypeError],
  ] as const) {
    it(`rejects options ${JSON.stringify(opts)} with ${err.name}`, () => {
      assert.throws(() => new KeyedLimiter(opts as never), err);
    });
  }

  it('property: with deletes, purges and floods, size stays ≤ maxKeys and the age queue stays bounded', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 16 }),
        fc.array(
          fc.oneof(
            fc.record({ op: fc.constant('allow' as const), key: fc.integer({ min: 0, max: 40 }) }),
            fc.record({ op: fc.constant('delete' as const), key: fc.integer({ min: 0, max: 40 }) }),
            fc.record({ op: fc.constant('purge' as const) }),
            fc.record({ op: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 500 }) }),
          ),
          { maxLength: 400 },
        ),
        (maxKeys, ops) => {
          const clock = new ManualClock();
          const k = new KeyedLimiter({ rate: 10, burst: 2, maxKeys, clock });
          for (const o of ops) {
            if (o.op === 'allow') k.allow(`k${o.key}`);
            else if (o.op === 'delete') k.delete(`k${o.key}`);
            else if (o.op === 'purge') k.purgeIdle();
            else clock.advance(o.ms);
            assert.ok(k.size <= maxKeys);
            const internal = k as unknown as { queue: unknown[]; head: number };
            assert.ok(internal.queue.length - internal.head <= 2 * maxKeys + 1);
          }
        },
      ),
    );
  });

  it('property: size never exceeds maxKeys, and each key admits at most burst + rate × t', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 40 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 30 })), { maxLength: 300 }),
        (maxKeys, calls) => {
          const clock = new ManualClock();
          const k = new KeyedLimiter({ rate: 10, burst: 3, maxKeys, clock });
          const admitted = new Map<number, number>();
          for (const [dt, key] of calls) {
            clock.advance(dt);
            if (k.allow(`k${key}`)) admitted.set(key, (admitted.get(key) ?? 0) + 1);
            assert.ok(k.size <= maxKeys);
          }
          // With room for every key, a key's admissions are bounded like one bucket's.
          if (maxKeys >= 31) for (const n of admitted.values()) assert.ok(n <= 3 + (10 * clock.now()) / 1000 + 1e-9);
        },
      ),
    );
  });
});
