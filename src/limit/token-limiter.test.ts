import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from '../core/clock.js';
import { AbortedError } from '../core/errors.js';
import { TokenLimiter } from './token-limiter.js';

describe('TokenLimiter', () => {
  it('admits exactly burst + rate × t: 100 + 1 000 over 10 s at rate 100/s, burst 100', () => {
    const clock = new ManualClock();
    const l = new TokenLimiter({ rate: 100, burst: 100, clock });
    let admitted = 0;
    for (let ms = 0; ms <= 10_000; ms++) {
      for (let i = 0; i < 3; i++) if (l.allow()) admitted++;
      if (ms < 10_000) clock.advance(1);
    }
    assert.equal(admitted, 1_100);
  });

  it('refills fractions of a token: rate 0.5/s gives one token every 2 s', () => {
    const clock = new ManualClock();
    const l = new TokenLimiter({ rate: 0.5, burst: 1, clock });
    assert.equal(l.allow(), true);
    assert.equal(l.allow(), false);
    clock.advance(1_999);
    assert.equal(l.allow(), false);
    assert.ok(Math.abs(l.tokens() - 0.9995) < 1e-9);
    clock.advance(1);
    assert.equal(l.allow(), true);
  });

  it('keeps refill exact when the interval is not a whole number of ms (rate 3/s over 1 000 s)', () => {
    const clock = new ManualClock();
    const l = new TokenLimiter({ rate: 3, burst: 3, clock });
    let admitted = 0;
    for (let ms = 0; ms <= 1_000_000; ms += 7) {
      clock.set(ms);
      while (l.allow()) admitted++;
    }
    // At t = 999 999 ms: 3 + floor(3 × 999.999) = 3 002 tokens.
    assert.equal(admitted, 3 + Math.floor(3 * 999.999));
  });

  it('never admits n > burst, however long it was idle, and a rejection takes nothing', () => {
    const clock = new ManualClock();
    const l = new TokenLimiter({ rate: 10, burst: 5, clock });
    assert.equal(l.allow(6), false);
    clock.advance(1e9);
    assert.equal(l.allow(6), false);
    assert.equal(l.tokens(), 5);
    assert.equal(l.allow(5), true);
    assert.equal(l.allow(1), false);
  });

  it('takes n tokens at once and allows n = 0 always', () => {
    const clock = new ManualClock();
    const l = new TokenLimiter({ rate: 10, burst: 10, clock });
    assert.equal(l.allow(7), true);
    assert.equal(l.allow(4), false);
    assert.equal(l.allow(3), true);
    assert.equal(l.allow(0), true);
  });

  it('throws RangeError for a negative or NaN n', () => {
    const l = new TokenLimiter({ rate: 1, clock: new ManualClock() });
    assert.throws(() => l.allow(-1), RangeError);
    assert.throws(() => l.allow(NaN), RangeError);
    assert.throws(() => l.decide(-1), RangeError);
  });

  it('decide answers remaining, retryAfterMs and resetMs', () => {
    const clock = new ManualClock();
    const l = new TokenLimiter({ rate: 10, burst: 5, clock });
    assert.deepEqual(l.decide(2), { allowed: true, limit: 5, remaining: 3, retryAfterMs: 0, resetMs: 200 });
    assert.deepEqual(l.decide(3), { allowed: true, limit: 5, remaining: 0, retryAfterMs: 0, resetMs: 500 });
    assert.deepEqual(l.decide(1), { allowed: false, limit: 5, remaining: 0, retryAfterMs: 100, resetMs: 500 });
    clock.advance(250);
    assert.deepEqual(l.decide(3), { allowed: false, limit: 5, remaining: 2, retryAfterMs: 50, resetMs: 250 });
    assert.equal(l.decide(6).retryAfterMs, Infinity);
  });

  it('starts full and defaults burst to the rate (at least 1)', () => {
    const clock = new ManualClock();
    assert.equal(new TokenLimiter({ rate: 20, clock }).burst, 20);
    assert.equal(new TokenLimiter({ rate: 0.1, clock }).burst, 1);
    assert.equal(new TokenLimiter({ rate: 20, clock }).tokens(), 20);
  });

  for (const [opts, err] of [
    [{ rate: 0 }, RangeError],
    [{ rate: -1 }, RangeError],
    [{ rate: NaN }, RangeError],
    [{ rate: Infinity }, RangeError],
    [{ rate: '5' }, TypeError],
    [{ rate: 5, burst: 0.5 }, RangeError],
    [{ rate: 5, burst: Infinity }, RangeError],
    [{ rate: 5, clock: {} }, TypeError],
    [undefined, TypeError],
  ] as const) {
    it(`rejects options ${JSON.stringify(opts)} with ${err.name} naming the option`, () => {
      assert.throws(
        () => new TokenLimiter(opts as never),
        (e: Error) => e instanceof err && (opts === undefined || /rate|burst|clock/.test(e.message)),
      );
    });
  }

  it('property: admitted tokens ≤ burst + rate × t for any call pattern', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1_000 }),
        fc.integer({ min: 1, max: 200 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 500 }), fc.integer({ min: 0, max: 20 })), { maxLength: 300 }),
        (rate, burst, calls) => {
          const clock = new ManualClock();
          const l = new TokenLimiter({ rate, burst, clock });
          let taken = 0;
          for (const [dt, n] of calls) {
            clock.advance(dt);
            if (l.allow(n)) taken += n;
            assert.ok(taken <= burst + (rate * clock.now()) / 1000 + 1e-6, `${taken} > ${burst} + ${rate} × ${clock.now()} ms`);
          }
        },
      ),
    );
  });

  it('property: agrees with a naive refilling bucket when the interval is whole milliseconds', () => {
    const rates = [1, 2, 4, 5, 8, 10, 20, 25, 40, 50, 100, 125, 200, 250, 500, 1000];
    fc.assert(
      fc.property(
        fc.constantFrom(...rates),
        fc.integer({ min: 1, max: 50 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 10 })), { maxLength: 200 }),
        (rate, burst, calls) => {
          const clock = new ManualClock();
          const l = new TokenLimiter({ rate, burst, clock });
          // The model counts in units of 1/1000 token per ms × rate: tokens × 1000 / rate = ms of refill.
          const perToken = 1000 / rate;
          let budgetMs = burst * perToken;
          for (const [dt, n] of calls) {
            clock.advance(dt);
            budgetMs = Math.min(burst * perToken, budgetMs + dt);
            const want = n * perToken <= budgetMs;
            if (want) budgetMs -= n * perToken;
            assert.equal(l.allow(n), want);
          }
        },
      ),
    );
  });

  describe('wait', () => {
    it('resolves at once when the tokens are there', async () => {
      const l = new TokenLimiter({ rate: 1, burst: 2, clock: new ManualClock() });
      await l.wait(2);
      assert.equal(l.allow(), false);
    });

    it('rejects n > burst with RangeError (it could never be served)', async () => {
      const l = new TokenLimiter({ rate: 1, burst: 2, clock: new ManualClock() });
      await assert.rejects(l.wait(3), RangeError);
      await assert.rejects(l.wait(-1), RangeError);
    });

    it('reserves in call order, so waiters are served before later allow() calls', async () => {
      // One token per ms on a manual clock, so a stall of this machine cannot refill the bucket between the
      // calls (the waits' timers are real: 1, 2, 3 ms).
      const clock = new ManualClock();
      const l = new TokenLimiter({ rate: 1_000, burst: 1, clock });
      assert.equal(l.allow(), true);
      const order: number[] = [];
      const waits = [1, 2, 3].map((i) => l.wait(1).then(() => order.push(i)));
      clock.advance(3); // without the reservations the bucket would hold a token again
      assert.equal(l.allow(), false, 'the tokens of the next 3 ms are reserved');
      await Promise.all(waits);
      assert.deepEqual(order, [1, 2, 3]);
    });

    it('rejects with AbortedError on abort and gives the reserved tokens back', async () => {
      const clock = new ManualClock();
      const l = new TokenLimiter({ rate: 1, burst: 1, clock });
      assert.equal(l.allow(), true);
      const ac = new AbortController();
      const w = l.wait(1, { signal: ac.signal });
      ac.abort(new Error('bye'));
      await assert.rejects(w, AbortedError);
      clock.advance(1_000);
      assert.equal(l.allow(), true, 'the aborted wait gave its token back');
      await assert.rejects(l.wait(1, { signal: ac.signal }), AbortedError);
    });
  });
});
