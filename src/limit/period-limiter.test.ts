import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from '../core/clock.js';
import { PeriodLimiter } from './period-limiter.js';

describe('PeriodLimiter (fixed window)', () => {
  it("answers go-zero's three answers: allowed, hit-quota for the last one, then over-quota", () => {
    const p = new PeriodLimiter({ periodMs: 1_000, quota: 3, clock: new ManualClock() });
    assert.deepEqual(
      ['a', 'a', 'a', 'a', 'a'].map((k) => p.answer(k)),
      ['allowed', 'allowed', 'hit-quota', 'over-quota', 'over-quota'],
    );
    assert.equal(p.answer('b'), 'allowed', 'keys are counted apart');
  });

  it('is exact at aligned window edges: full until the last ms, fresh at the edge', () => {
    const clock = new ManualClock(5_000);
    const p = new PeriodLimiter({ periodMs: 1_000, quota: 2, align: true, clock });
    clock.set(5_999);
    assert.equal(p.answer('k'), 'allowed');
    assert.equal(p.answer('k'), 'hit-quota');
    assert.equal(p.answer('k'), 'over-quota');
    clock.set(6_000);
    assert.equal(p.answer('k'), 'allowed', 'a new window at 6 000');
    assert.equal(p.answer('k'), 'hit-quota');
    clock.set(6_999);
    assert.equal(p.answer('k'), 'over-quota');
    assert.equal(p.decide('k').retryAfterMs, 1);
  });

  it('shifts aligned windows by alignOffsetMs (a day in UTC+8)', () => {
    const day = 86_400_000;
    const offset = 8 * 3_600_000;
    const clock = new ManualClock(10 * day - offset - 1); // 23:59:59.999 local
    const p = new PeriodLimiter({ periodMs: day, quota: 1, align: true, alignOffsetMs: offset, clock });
    assert.equal(p.answer('sms'), 'hit-quota');
    assert.equal(p.answer('sms'), 'over-quota');
    clock.advance(1); // midnight local
    assert.equal(p.answer('sms'), 'hit-quota');
  });

  it('without align, opens a key’s window at its first call', () => {
    const clock = new ManualClock(0);
    const p = new PeriodLimiter({ periodMs: 1_000, quota: 1, clock });
    clock.set(700);
    assert.equal(p.answer('k'), 'hit-quota');
    clock.set(1_699);
    assert.equal(p.answer('k'), 'over-quota');
    clock.set(1_700);
    assert.equal(p.answer('k'), 'hit-quota');
  });

  it('admits 2 × quota across a boundary (the reason for the sliding mode)', () => {
    const clock = new ManualClock(0);
    const p = new PeriodLimiter({ periodMs: 1_000, quota: 10, align: true, clock });
    clock.set(999);
    let n = 0;
    for (let i = 0; i < 20; i++) if (p.allow('k')) n++;
    clock.set(1_000);
    for (let i = 0; i < 20; i++) if (p.allow('k')) n++;
    assert.equal(n, 20);
  });

  it('decide answers limit, remaining, retryAfterMs and resetMs', () => {
    const clock = new ManualClock(0);
    const p = new PeriodLimiter({ periodMs: 1_000, quota: 3, align: true, clock });
    clock.set(200);
    assert.deepEqual(p.decide('k', 2), { allowed: true, limit: 3, remaining: 1, retryAfterMs: 0, resetMs: 800 });
    assert.deepEqual(p.decide('k', 2), { allowed: false, limit: 3, remaining: 1, retryAfterMs: 800, resetMs: 800 });
    assert.equal(p.decide('k', 4).retryAfterMs, Infinity);
  });
});

describe('PeriodLimiter (sliding window)', () => {
  it('refuses the second burst at a boundary: about quota per period, not 2 ×', () => {
    const clock = new ManualClock(0);
    const p = new PeriodLimiter({ periodMs: 1_000, quota: 10, algorithm: 'sliding', clock });
    clock.set(999);
    let n = 0;
    for (let i = 0; i < 20; i++) if (p.allow('k')) n++;
    assert.equal(n, 10);
    clock.set(1_000);
    for (let i = 0; i < 20; i++) if (p.allow('k')) n++;
    assert.equal(n, 10, 'the previous window still weighs 100 %');
    clock.set(1_500);
    let later = 0;
    for (let i = 0; i < 20; i++) if (p.allow('k')) later++;
    assert.equal(later, 5, 'half the previous window has slid out');
  });

  it('forgets a window older than the previous one', () => {
    const clock = new ManualClock(0);
    const p = new PeriodLimiter({ periodMs: 100, quota: 2, algorithm: 'sliding', clock });
    assert.equal(p.answer('k'), 'allowed');
    assert.equal(p.answer('k'), 'hit-quota');
    clock.set(250);
    assert.equal(p.answer('k'), 'allowed');
  });

  it('decide says how long until the previous window has slid out enough', () => {
    const clock = new ManualClock(0);
    const p = new PeriodLimiter({ periodMs: 1_000, quota: 4, algorithm: 'sliding', clock });
    for (let i = 0; i < 4; i++) p.allow('k');
    clock.set(1_000);
    const d = p.decide('k');
    assert.equal(d.allowed, false);
    assert.equal(d.retryAfterMs, 250, 'at 1 250 the previous window weighs 3');
    clock.set(1_250);
    assert.equal(p.allow('k'), true);
  });

  it('property: no aligned window admits more than quota, and no span of periodMs more than 2 × quota', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 120 }), fc.integer({ min: 1, max: 5 })), { maxLength: 200 }),
        (quota, calls) => {
          const period = 100;
          const clock = new ManualClock(0);
          const p = new PeriodLimiter({ periodMs: period, quota, algorithm: 'sliding', clock });
          const times: number[] = [];
          for (const [dt, k] of calls) {
            clock.advance(dt);
            for (let i = 0; i < k; i++) if (p.allow('k')) times.push(clock.now());
          }
          const perWindow = new Map<number, number>();
          for (const t of times) perWindow.set(Math.floor(t / period), (perWindow.get(Math.floor(t / period)) ?? 0) + 1);
          for (const c of perWindow.values()) assert.ok(c <= quota);
          for (let i = 0, j = 0; j < times.length; j++) {
            while (times[j]! - times[i]! >= period) i++;
            assert.ok(j - i + 1 <= 2 * quota);
          }
        },
      ),
    );
  });
});

describe('PeriodLimiter keys and options', () => {
  it('keeps at most maxKeys keys', () => {
    const p = new PeriodLimiter({ periodMs: 1_000, quota: 1, maxKeys: 100, clock: new ManualClock() });
    for (let i = 0; i < 1_000; i++) p.answer(`k${i}`);
    assert.equal(p.size, 100);
  });

  it('rejects keys over 1 KiB with TypeError', () => {
    const p = new PeriodLimiter({ periodMs: 1_000, quota: 1, clock: new ManualClock() });
    assert.throws(() => p.answer('x'.repeat(1_025)), TypeError);
    assert.throws(() => p.answer('€'.repeat(400)), TypeError, '1 200 UTF-8 bytes');
    assert.equal(p.answer('x'.repeat(1_024)), 'hit-quota');
    assert.throws(() => p.answer(42 as never), TypeError);
  });

  for (const [opts, err] of [
    [{ periodMs: 0, quota: 1 }, RangeError],
    [{ periodMs: NaN, quota: 1 }, RangeError],
    [{ periodMs: 1_000, quota: 0 }, RangeError],
    [{ periodMs: 1_000, quota: 1.5 }, RangeError],
    [{ periodMs: 1_000, quota: Infinity }, RangeError],
    [{ periodMs: 1_000, quota: 1, window: 'rolling' }, TypeError],
    [{ periodMs: 1_000, quota: 1, align: 'yes' }, TypeError],
    [{ periodMs: 1_000, quota: 1, maxKeys: 0 }, RangeError],
  ] as const) {
    it(`rejects options ${JSON.stringify(opts)} with ${err.name}`, () => {
      assert.throws(() => new PeriodLimiter(opts as never), err);
    });
  }
});
