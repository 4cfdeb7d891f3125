import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from '../core/clock.js';
import { Balancer } from './balancer.js';
import { instances } from './test-fixtures.js';

/** outOfRotation counts the instances a caller would not call now: left out of the list, or held out. */
function outOfRotation(b: Balancer): number {
  const listed = new Set(b.healthy().map((i) => i.id));
  let n = 0;
  for (const i of b.instances()) if (!listed.has(i.id) || b.isHeldOut(i.id)) n++;
  return n;
}

describe('Balancer: one cap and one panic rule for every reason an instance is out', () => {
  it('never has more than maxEjectionPercent of the instances out, ejected or breaker-held, unless forced by an operator (property)', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('fail' as const), i: fc.nat(9) }),
      fc.record({ kind: fc.constant('breaker' as const), i: fc.nat(9) }),
      fc.record({ kind: fc.constant('forced' as const), i: fc.nat(9) }),
      fc.record({ kind: fc.constant('unhold' as const), i: fc.nat(9) }),
      fc.record({ kind: fc.constant('time' as const), i: fc.nat(60_000) }),
    );
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 0, max: 100 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.array(op, { maxLength: 60 }),
        (n, pct, threshold, ops) => {
          const clock = new ManualClock();
          const list = instances(n);
          const b = new Balancer({ instances: list, clock, panicThreshold: threshold, outlier: { consecutiveFailures: 1, maxEjectionPercent: pct } });
          const forced = new Set<string>();
          for (const o of ops) {
            const id = list[o.i % n]!.id;
            if (o.kind === 'fail') b.report(list[o.i % n]!, { ok: false, latencyMs: 1 });
            else if (o.kind === 'breaker' || o.kind === 'forced') {
              b.hold(id, o.kind);
              if (o.kind === 'forced') forced.add(id);
              else forced.delete(id);
            } else if (o.kind === 'unhold') {
              b.unhold(id);
              forced.delete(id);
            } else clock.advance(o.i);
            const out = outOfRotation(b);
            const cap = Math.floor((n * pct) / 100);
            assert.ok(out <= Math.max(cap, forced.size), `${out} of ${n} out with a cap of ${cap} and ${forced.size} forced`);
            for (const f of forced) assert.equal(b.isHeldOut(f), true, `forced ${f} is never put back`);
            const s = b.stats();
            assert.equal(s.instances - s.available, out, 'stats count what is out of rotation');
            assert.equal(s.forced, forced.size);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('keeps the breaker-held instance that went out last in rotation past the cap, and takes it out when room frees', () => {
    const list = instances(4);
    const b = new Balancer({ instances: list, outlier: false });
    b.hold('i0', 'breaker');
    b.hold('i1', 'breaker');
    b.hold('i2', 'breaker');
    assert.deepEqual(
      [0, 1, 2, 3].map((k) => b.isHeldOut(`i${k}`)),
      [true, true, false, false],
      'two of four may be out: the third stays in',
    );
    assert.deepEqual({ ...b.stats() }, { instances: 4, available: 2, ejected: 0, down: 0, drained: 0, breakerOpen: 2, forced: 0, capped: 1, panic: false });
    b.unhold('i0');
    assert.equal(b.isHeldOut('i2'), true, 'room freed: the capped one goes out');
    assert.throws(() => b.hold('nobody', 'open' as never), /Balancer\.hold: reason must be 'breaker' or 'forced', got open/);
  });

  it('counts a forced hold first, and panics past the cap only for the forced: everything else is picked from', () => {
    const list = instances(4);
    const b = new Balancer({ instances: list, outlier: false, panicThreshold: 0.75 });
    b.hold('i0', 'forced');
    b.hold('i1', 'breaker');
    assert.equal(b.panic, true, '2 of 4 left < 75 %');
    assert.equal(b.isHeldOut('i0'), true, 'panic never puts a forced instance back');
    assert.equal(b.isHeldOut('i1'), false, 'panic puts the breaker-held instance back');
    assert.equal(b.stats().available, 3);
  });
});
