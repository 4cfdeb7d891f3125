import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from '../core/clock.js';
import { KeyedLimiter } from './keyed-limiter.js';
import { TokenLimiter } from './token-limiter.js';

describe('KeyedLimiter', () => {
  it('gives each key its own bucket', () => {
    const k = new KeyedLimiter({ rate: 1, burst: 2, clock: new ManualClock() });
    assert.deepEqual([k.allow('a'), k.allow('a'), k.allow('a'), k.allow('b')], [true, true, false, true]);
    assert.equal(k.decide('a').remaining, 0);
    assert.equal(k.size, 2);
  });

  it('keeps at most maxKeys keys under a flood of distinct keys', () => {
    const k = new KeyedLimiter({ rate: 10, maxKeys: 1_000, clock: new ManualClock() });
    for (let i = 0; i < 50_000; i++) k.allow(`ip-${i}`);
    assert.equal(k.size, 1_000);
  });

  it('evicts the least recently used key first; an evicted key comes back full', () => {
    const k = new KeyedLimiter({ rate: 1, burst: 1, maxKeys: 2, clock: new ManualClock() });
    assert.equal(k.allow('a'), true);
    assert.equal(k.allow('b'), true);
    assert.equal(k.allow('a'), false); // a is now the most recently used
    assert.equal(k.allow('c'), true); // evicts b
    assert.equal(k.allow('a'), false, 'a was kept');
    assert.equal(k.allow('b'), true, 'b was evicted and starts full');
  });

  it('drops keys idle for burst / rate seconds, when their bucket is full anyway', () => {
    const clock = new ManualClock();
    const k = new KeyedLimiter({ rate: 10, burst: 20, clock });
    assert.equal(k.idleMs, 2_000);
    k.allow('a');
    clock.advance(1_000);
    k.allow('b');
    clock.advance(1_001);
    assert.equal(k.purgeIdle(), 1);
    assert.equal(k.size, 1);
  });

  it('idle eviction loses nothing: a key idle past idleMs answers as if it had been kept', () => {
    const clock = new ManualClock();
    const k = new KeyedLimiter({ rate: 10, burst: 5, clock });
    const kept = new TokenLimiter({ rate: 10, burst: 5, clock });
    for (let i = 0; i < 5; i++) assert.equal(k.allow('a'), kept.allow());
    clock.advance(600);
    k.purgeIdle();
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
    assert.equal(k.idleMs, 0);
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
    [{ rate: 1, idleMs: -1 }, RangeError],
    [{ create: 'nope' }, TypeError],
  ] as const) {
    it(`rejects options ${JSON.stringify(opts)} with ${err.name}`, () => {
      assert.throws(() => new KeyedLimiter(opts as never), err);
    });
  }

  it('property: size never exceeds maxKeys, and each key admits at most burst + rate × t', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 30 })), { maxLength: 300 }),
        (maxKeys, calls) => {
          const clock = new ManualClock();
          const k = new KeyedLimiter({ rate: 10, burst: 3, maxKeys, idleMs: 0, clock });
          const admitted = new Map<number, number>();
          for (const [dt, key] of calls) {
            clock.advance(dt);
            if (k.allow(`k${key}`)) admitted.set(key, (admitted.get(key) ?? 0) + 1);
            assert.ok(k.size <= maxKeys);
          }
          // Without eviction (enough room) a key's admissions are bounded like one bucket's.
          if (maxKeys >= 31) for (const n of admitted.values()) assert.ok(n <= 3 + (10 * clock.now()) / 1000 + 1e-9);
        },
      ),
    );
  });
});
