import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { AdmissionToken } from '../core/admission.js';
import { ManualClock } from '../core/clock.js';
import { OverloadedError } from '../core/errors.js';
import { AdaptiveShedder } from './adaptive-shedder.js';
import { KeyedLimiter } from './keyed-limiter.js';
import { PeriodLimiter } from './period-limiter.js';
import { TokenLimiter } from './token-limiter.js';

/** drain takes single tokens until refused and answers how many it took. */
function drain(allow: () => boolean, max = 10_000): number {
  let n = 0;
  while (n < max && allow()) n++;
  return n;
}

describe('TokenLimiter.reconfigure', () => {
  it('keeps the tokens the bucket holds and refills at the new rate', () => {
    const clock = new ManualClock();
    const l = new TokenLimiter({ rate: 10, burst: 10, clock });
    assert.equal(
      drain(() => l.allow(), 4),
      4,
    ); // 6 left
    l.reconfigure({ rate: 100, burst: 20 });
    assert.deepEqual(l.options(), { rate: 100, burst: 20 });
    assert.ok(Math.abs(l.tokens() - 6) < 1e-9, `kept 6 tokens, has ${l.tokens()}`);
    clock.advance(50); // 5 tokens at 100/s
    assert.equal(
      drain(() => l.allow()),
      11,
    );
    clock.advance(1_000);
    assert.equal(
      drain(() => l.allow()),
      20,
    ); // the new burst
  });

  it('caps the tokens kept at a smaller burst', () => {
    const clock = new ManualClock();
    const l = new TokenLimiter({ rate: 10, burst: 10, clock });
    l.reconfigure({ burst: 3 });
    assert.equal(l.rate, 10);
    assert.equal(
      drain(() => l.allow()),
      3,
    );
  });

  it("refuses a bad value with the constructor's message and changes nothing", () => {
    const clock = new ManualClock();
    const l = new TokenLimiter({ rate: 10, burst: 10, clock });
    l.allow();
    assert.throws(() => new TokenLimiter({ rate: 50, burst: 0.5 }), {
      name: 'RangeError',
      message: 'TokenLimiter: burst must be a finite number ≥ 1, got 0.5',
    });
    assert.throws(() => l.reconfigure({ rate: 50, burst: 0.5 }), { name: 'RangeError', message: 'TokenLimiter: burst must be a finite number ≥ 1, got 0.5' });
    assert.throws(() => l.reconfigure({ rate: -1 }), { name: 'RangeError', message: 'TokenLimiter: rate must be a finite number > 0, got -1' });
    assert.throws(() => l.reconfigure({ rat: 5 } as never), {
      name: 'TypeError',
      message: 'TokenLimiter: rat is not an option; the options are rate, burst, clock',
    });
    assert.throws(() => l.reconfigure({ rate: 5, clock } as never), {
      name: 'TypeError',
      message: 'TokenLimiter: clock cannot change on a running TokenLimiter; it is set at construction only',
    });
    assert.deepEqual(l.options(), { rate: 10, burst: 10 });
    assert.ok(Math.abs(l.tokens() - 9) < 1e-9);
  });
});

describe('KeyedLimiter.reconfigure', () => {
  it("reconfigures every key's bucket in place, keeping its tokens, and new keys get the new bucket", () => {
    const clock = new ManualClock();
    const k = new KeyedLimiter({ rate: 10, burst: 10, clock });
    assert.equal(
      drain(() => k.allow('a'), 7),
      7,
    ); // 'a' holds 3
    k.reconfigure({ rate: 1, burst: 5 });
    assert.deepEqual(k.options(), { rate: 1, burst: 5, maxKeys: 10_000 });
    assert.equal(
      drain(() => k.allow('a')),
      3,
    );
    assert.equal(
      drain(() => k.allow('b')),
      5,
    );
    clock.advance(1_000);
    assert.equal(
      drain(() => k.allow('a')),
      1,
    ); // refilled at 1/s
  });

  it('evicts down to a smaller maxKeys at once', () => {
    const k = new KeyedLimiter({ rate: 10, clock: new ManualClock() });
    for (let i = 0; i < 50; i++) k.allow(`k${i}`);
    k.reconfigure({ maxKeys: 8 });
    assert.equal(k.size, 8);
    assert.equal(k.maxKeys, 8);
    for (let i = 50; i < 60; i++) k.allow(`k${i}`);
    assert.equal(k.size, 8);
  });

  it('refuses bad values, create and clock, and rate with a create-built limiter; nothing changes', () => {
    const k = new KeyedLimiter({ rate: 10, maxKeys: 100, clock: new ManualClock() });
    assert.throws(() => k.reconfigure({ maxKeys: 5, rate: 0 }), { name: 'RangeError', message: 'KeyedLimiter: rate must be a finite number > 0, got 0' });
    assert.throws(() => k.reconfigure({ maxKeys: 0 }), { name: 'RangeError', message: 'KeyedLimiter: maxKeys must be an integer in [1, 16777216], got 0' });
    assert.throws(
      () => k.reconfigure({ create: () => new TokenLimiter({ rate: 1 }) } as never),
      /KeyedLimiter: create cannot change on a running KeyedLimiter/,
    );
    assert.deepEqual(k.options(), { rate: 10, burst: 10, maxKeys: 100 });
    const c = new KeyedLimiter({ create: () => new TokenLimiter({ rate: 1 }) });
    assert.throws(() => c.reconfigure({ rate: 5 }), {
      name: 'TypeError',
      message: 'KeyedLimiter: rate cannot change on a running KeyedLimiter; it is set at construction only',
    });
    c.reconfigure({ maxKeys: 3 });
    assert.deepEqual(c.options(), { maxKeys: 3 });
  });
});

describe('PeriodLimiter.reconfigure', () => {
  it("keeps each key's count in its window: a new quota counts against it at once", () => {
    const clock = new ManualClock();
    const p = new PeriodLimiter({ periodMs: 1_000, quota: 10, clock });
    assert.equal(
      drain(() => p.allow('a'), 6),
      6,
    );
    p.reconfigure({ quota: 8 });
    assert.equal(
      drain(() => p.allow('a')),
      2,
    );
    p.reconfigure({ quota: 4 });
    assert.equal(p.allow('a'), false);
    clock.advance(1_000);
    assert.equal(
      drain(() => p.allow('a')),
      4,
    );
  });

  it("applies a new period and algorithm from each key's next window", () => {
    const clock = new ManualClock();
    const p = new PeriodLimiter({ periodMs: 1_000, quota: 4, clock });
    assert.equal(
      drain(() => p.allow('a')),
      4,
    );
    p.reconfigure({ periodMs: 100, algorithm: 'sliding' });
    assert.deepEqual(p.options(), { periodMs: 100, quota: 4, algorithm: 'sliding', align: false, alignOffsetMs: 0 });
    assert.equal(p.allow('a'), false); // its window (opened at 0) still counts 4
    clock.advance(100); // the next window is sliding: the previous one (4 calls) still weighs in full
    assert.equal(p.allow('a'), false);
    clock.advance(50); // half of it
    assert.equal(
      drain(() => p.allow('a')),
      2,
    );
    clock.advance(50); // the next 100 ms window: the previous one's 2 calls weigh in full
    assert.equal(
      drain(() => p.allow('a')),
      2,
    );
  });

  it('refuses bad values, maxKeys and clock, and the old window key, changing nothing', () => {
    const p = new PeriodLimiter({ periodMs: 1_000, quota: 10, clock: new ManualClock() });
    assert.throws(() => p.reconfigure({ quota: 1.5 }), { name: 'RangeError', message: 'PeriodLimiter: quota must be an integer ≥ 1, got 1.5' });
    assert.throws(() => p.reconfigure({ quota: 5, algorithm: 'leaky' as never }), {
      name: 'TypeError',
      message: "PeriodLimiter: algorithm must be 'fixed' or 'sliding', got leaky",
    });
    assert.throws(() => p.reconfigure({ maxKeys: 5 } as never), {
      name: 'TypeError',
      message: 'PeriodLimiter: maxKeys cannot change on a running PeriodLimiter; it is set at construction only',
    });
    assert.throws(() => p.reconfigure({ window: 'sliding' } as never), { name: 'TypeError', message: 'PeriodLimiter: window was renamed to algorithm' });
    assert.deepEqual(p.options(), { periodMs: 1_000, quota: 10, algorithm: 'fixed', align: false, alignOffsetMs: 0 });
  });

  it('refuses the old window key at construction: renamed to algorithm', () => {
    assert.throws(() => new PeriodLimiter({ periodMs: 1_000, quota: 10, window: 'sliding' } as never), {
      name: 'TypeError',
      message: 'PeriodLimiter: window was renamed to algorithm',
    });
    assert.equal(new PeriodLimiter({ periodMs: 1_000, quota: 10, algorithm: 'sliding' }).algorithm, 'sliding');
  });
});

describe('AdaptiveShedder.reconfigure', () => {
  /** A shedder whose window holds 10 passes per 100 ms bucket of 10 ms each (max in flight 1), overloaded. */
  function hot() {
    const clock = new ManualClock(1_000);
    let utilization = 0.1;
    const shedder = new AdaptiveShedder({ clock, load: () => ({ utilization, delayP99Ms: 1 }), windowMs: 2_000, buckets: 20 });
    for (let b = 0; b < 20; b++) {
      const tokens: AdmissionToken[] = [];
      for (let i = 0; i < 10; i++) tokens.push(shedder.admit());
      clock.advance(10);
      for (const t of tokens) t.success();
      clock.advance(90);
    }
    utilization = 0.95;
    return { clock, shedder };
  }

  function fill(shedder: AdaptiveShedder, n: number): { tokens: AdmissionToken[]; dropped: number } {
    const tokens: AdmissionToken[] = [];
    let dropped = 0;
    for (let i = 0; i < n; i++) {
      try {
        tokens.push(shedder.admit());
      } catch (err) {
        assert.ok(err instanceof OverloadedError);
        dropped++;
      }
    }
    return { tokens, dropped };
  }

  it('enabled: false admits every call and keeps counting; on again, it drops as before', () => {
    const { shedder } = hot();
    const before = fill(shedder, 50);
    assert.ok(before.dropped > 0);
    shedder.reconfigure({ enabled: false });
    assert.equal(shedder.options().enabled, false);
    const off = fill(shedder, 50);
    assert.equal(off.dropped, 0);
    assert.equal(shedder.stats().inFlight, before.tokens.length + 50);
    shedder.reconfigure({ enabled: true });
    assert.equal(fill(shedder, 10).dropped, 10);
  });

  it('a higher threshold applies at once; the calls in flight are kept', () => {
    const { shedder } = hot();
    const { tokens } = fill(shedder, 20);
    shedder.reconfigure({ utilizationThreshold: 0.99, coolOffMs: 0 });
    assert.equal(fill(shedder, 20).dropped, 0);
    assert.equal(shedder.stats().inFlight, tokens.length + 20);
    assert.deepEqual(shedder.options(), { enabled: true, utilizationThreshold: 0.99, delayP99Ms: 100, coolOffMs: 0, windowMs: 2_000, buckets: 20 });
  });

  it('refuses a bad value, load and clock, changing nothing', () => {
    const { shedder } = hot();
    const before = shedder.options();
    assert.throws(() => shedder.reconfigure({ enabled: false, utilizationThreshold: 1.5 }), {
      name: 'RangeError',
      message: 'AdaptiveShedder: utilizationThreshold must be a number in (0, 1], got 1.5',
    });
    assert.throws(() => shedder.reconfigure({ enabled: 'no' as never }), {
      name: 'TypeError',
      message: 'AdaptiveShedder: enabled must be a boolean, got string',
    });
    assert.throws(
      () => shedder.reconfigure({ load: () => ({ utilization: 0, delayP99Ms: 0 }) } as never),
      /AdaptiveShedder: load cannot change on a running AdaptiveShedder/,
    );
    assert.deepEqual(shedder.options(), before);
    assert.ok(fill(shedder, 50).dropped > 0);
  });
});
