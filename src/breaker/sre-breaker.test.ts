import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from '../core/clock.js';
import { BreakerOpenError } from '../core/errors.js';
import { SreBreaker } from './sre-breaker.js';
import { seeded } from '../../test/support/random.js';

/** tryCall admits one call at the current time and reports `ok`; answers whether it was admitted. */
function tryCall(b: SreBreaker, ok: boolean, err: unknown = new Error('down')): boolean {
  let token;
  try {
    token = b.admit();
  } catch (e) {
    assert.ok(e instanceof BreakerOpenError);
    return false;
  }
  if (ok) token.success();
  else token.failure(err);
  return true;
}

describe('SreBreaker', () => {
  it('counts successful, failed and not-permitted calls since it was made, as the window ages out (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ ok: fc.boolean(), advance: fc.integer({ min: 0, max: 4_000 }) }), { minLength: 20, maxLength: 60 }),
        async (steps) => {
          const clock = new ManualClock();
          const b = new SreBreaker({ clock, windowMs: 1_000, buckets: 4, random: () => 0.999 });
          let ok = 0;
          let failed = 0;
          let refused = 0;
          for (const step of steps) {
            clock.advance(step.advance);
            const t = b.tryAdmit();
            if (t === undefined) refused++;
            else if (step.ok) {
              t.success();
              ok++;
            } else {
              t.failure(new Error('x'));
              failed++;
            }
          }
          const s = b.stats();
          assert.deepEqual([s.successfulCalls, s.failedCalls, s.notPermittedCalls], [ok, failed, refused]);
        },
      ),
      { numRuns: 100 },
    );
  });

  it('a released call counts as neither success nor failure, and a report after the release is ignored', () => {
    const clock = new ManualClock();
    const b = new SreBreaker({ clock, random: () => 0, forcePassMs: 1e9 });
    for (let i = 0; i < 3; i++) b.admit().failure(new Error('down'));
    for (let i = 0; i < 100; i++) b.admit().release();
    const t = b.admit();
    t.release();
    t.success(); // ignored: a released token reports nothing
    t.failure(new Error('late'));
    const s = b.stats();
    assert.deepEqual([s.successes, s.failures, s.drops], [0, 3, 0]);
    assert.equal(b.lastFailures().length, 3);
  });

  it('releasing admissions while dropping does not make the breaker trust the dependency again', () => {
    const clock = new ManualClock();
    const b = new SreBreaker({ clock, random: seeded(7), forcePassMs: 1e9 });
    for (let i = 0; i < 20; i++) tryCall(b, false);
    const before = b.stats();
    assert.ok(before.dropRatio > 0, `dropping (${before.dropRatio})`);
    // Had release counted as a success, these would pull the drop ratio down.
    const admitted = [];
    for (let i = 0; i < 50; i++) {
      const t = b.tryAdmit();
      if (t !== undefined) admitted.push(t);
    }
    assert.ok(admitted.length > 0 && admitted.length < 50, `some admitted, some dropped (${admitted.length})`);
    for (const t of admitted) t.release();
    const after = b.stats();
    assert.deepEqual([after.successes, after.failures, after.dropRatio], [0, before.failures, before.dropRatio]);
  });

  it('admits every call while nothing fails', () => {
    const clock = new ManualClock();
    const b = new SreBreaker({ clock, random: seeded(1) });
    for (let i = 0; i < 10_000; i++) {
      clock.advance(1);
      assert.equal(tryCall(b, true), true);
    }
    assert.equal(b.stats().dropRatio, 0);
  });

  it('tolerates `protection` failures in a quiet window before dropping', () => {
    const clock = new ManualClock();
    const b = new SreBreaker({ clock, random: () => 0 });
    for (let i = 0; i < 5; i++) assert.equal(tryCall(b, false), true);
    // total 5, accepts 0: (5 − 5 − 0) / 6 = 0 → still admitted
    assert.equal(b.stats().dropRatio, 0);
    assert.equal(tryCall(b, false), true); // 6th call: ratio was 0 before it
    assert.ok(b.stats().dropRatio > 0);
  });

  it('computes the go-zero drop ratio (total − protection − w·accepts) / (total + 1)', () => {
    const clock = new ManualClock();
    const b = new SreBreaker({ clock, random: () => 0.999 }); // never drops by chance
    for (let i = 0; i < 10; i++) tryCall(b, true);
    for (let i = 0; i < 30; i++) tryCall(b, false);
    // One bucket holds both successes and failures, so no bucket is failing: w = k = 1.5.
    const s = b.stats();
    assert.equal(s.failingBuckets, 0);
    assert.ok(Math.abs(s.dropRatio - (40 - 5 - 1.5 * 10) / 41) < 1e-12);
  });

  it('lowers k towards 1.1 as consecutive buckets fail', () => {
    const clock = new ManualClock();
    const b = new SreBreaker({ clock, random: () => 0.999, windowMs: 10_000, buckets: 40 });
    for (let i = 0; i < 20; i++) tryCall(b, true);
    for (let bucket = 0; bucket < 8; bucket++) {
      clock.advance(250);
      for (let i = 0; i < 5; i++) tryCall(b, false);
    }
    const s = b.stats();
    assert.equal(s.failingBuckets, 8);
    const w = 1.5 - (0.4 * 8) / 40;
    const total = s.successes + s.failures;
    assert.ok(Math.abs(s.dropRatio - (total - 5 - w * s.successes) / (total + 1)) < 1e-12);
    clock.advance(250);
    tryCall(b, true); // a success ends the run of failing buckets
    assert.equal(b.stats().failingBuckets, 0);
  });

  it('lets one call through every forcePassMs while every call fails', () => {
    const clock = new ManualClock();
    const b = new SreBreaker({ clock, random: () => 0 }); // drops whenever the ratio is > 0
    for (let i = 0; i < 100; i++) tryCall(b, false);
    const passes: number[] = [];
    for (let t = 0; t < 5_000; t += 10) {
      clock.advance(10);
      if (tryCall(b, false)) passes.push(clock.now());
    }
    assert.ok(passes.length >= 4, `passes at ${passes.join(', ')}`);
    for (let i = 1; i < passes.length; i++) assert.ok(passes[i]! - passes[i - 1]! <= 1_000);
  });

  it('keeps the last 5 failure reasons in the BreakerOpenError message', () => {
    const clock = new ManualClock();
    const b = new SreBreaker({ clock, random: () => 0, name: 'payments' });
    for (let i = 1; i <= 7; i++) {
      const t = b.admit();
      t.failure(Object.assign(new Error(`reason ${i}`), { code: 'ECONNRESET' }));
    }
    let err: unknown;
    for (let i = 0; i < 100 && err === undefined; i++) {
      try {
        b.admit().failure(new Error(`reason ${8 + i}`));
      } catch (e) {
        err = e;
      }
    }
    assert.ok(err instanceof BreakerOpenError);
    assert.equal(err.code, 'ERR_BREAKER_OPEN');
    assert.equal(err.breaker, 'payments');
    assert.match(err.message, /breaker "payments"/);
    const reasons = b.lastFailures();
    assert.equal(reasons.length, 5);
    for (const r of reasons) assert.ok(err.message.includes(r), `${err.message} lacks ${r}`);
    assert.match(reasons[0]!, /Error \[ECONNRESET\]: reason/);
    assert.equal(err.stack?.split('\n').length, 1, 'no stack frames captured');
  });

  it('trusts a recovered dependency again within one window (countRejections: false, the default)', () => {
    const { trustedAfterMs } = outage({ countRejections: false });
    assert.ok(trustedAfterMs <= 10_000, `took ${trustedAfterMs} ms`);
  });

  it('would stay distrustful much longer if rejected calls counted (countRejections: true, go-zero)', () => {
    const { trustedAfterMs } = outage({ countRejections: true });
    assert.ok(trustedAfterMs > 10_000, `took ${trustedAfterMs} ms`);
  });

  it('counts each token once: a second report is ignored', () => {
    const b = new SreBreaker({ clock: new ManualClock() });
    const t = b.admit();
    t.success();
    t.failure(new Error('late'));
    t.success();
    assert.deepEqual([b.stats().successes, b.stats().failures], [1, 0]);
  });

  it('property: never drops a call while no call has failed', () => {
    fc.assert(
      fc.property(
        fc.record({
          k: fc.double({ min: 1, max: 3, noNaN: true }),
          protection: fc.integer({ min: 0, max: 10 }),
          buckets: fc.integer({ min: 1, max: 50 }),
          windowMs: fc.integer({ min: 10, max: 20_000 }),
          countRejections: fc.boolean(),
        }),
        fc.array(fc.integer({ min: 0, max: 500 }), { minLength: 1, maxLength: 300, size: 'max' }),
        fc.integer(),
        (opts, gaps, seed) => {
          const clock = new ManualClock();
          const b = new SreBreaker({ ...opts, clock, random: seeded(seed) });
          for (const gap of gaps) {
            clock.advance(gap);
            if (!tryCall(b, true)) return false;
          }
          return true;
        },
      ),
    );
  });

  it('property: with every call failing, the gap between admitted calls never exceeds forcePassMs (+ one arrival gap)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 100, max: 2_000 }),
        fc.array(fc.integer({ min: 1, max: 100 }), { minLength: 100, maxLength: 800, size: 'max' }),
        fc.integer(),
        fc.boolean(),
        (forcePassMs, gaps, seed, countRejections) => {
          const clock = new ManualClock();
          const b = new SreBreaker({ clock, forcePassMs, countRejections, random: seeded(seed) });
          let last = 0;
          const maxGap = Math.max(...gaps);
          for (const gap of gaps) {
            clock.advance(gap);
            if (tryCall(b, false)) last = clock.now();
            else if (clock.now() - last > forcePassMs + maxGap) return false;
          }
          return true;
        },
      ),
    );
  });
});

/**
 * outage runs 100 calls/s at a dependency that fails for 60 s and then recovers, and answers how long
 * after the recovery the breaker last dropped a call.
 */
function outage(options: { countRejections: boolean }): { trustedAfterMs: number } {
  const clock = new ManualClock();
  const b = new SreBreaker({ clock, random: seeded(42), ...options });
  const recoverAt = 60_000;
  let lastDrop = 0;
  for (let t = 0; t < 180_000; t += 10) {
    clock.set(t);
    const admitted = tryCall(b, t >= recoverAt);
    if (!admitted) lastDrop = t;
  }
  assert.ok(lastDrop > 0, 'the breaker never dropped: the outage did not trip it');
  return { trustedAfterMs: Math.max(0, lastDrop - recoverAt) };
}
