import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from '../core/clock.js';
import { BreakerOpenError } from '../core/errors.js';
import type { AdmissionToken } from '../core/admission.js';
import { CircuitBreaker } from './circuit-breaker.js';
import type { BreakerState, CircuitBreakerOptions, StateChange } from './types.js';

function make(options: CircuitBreakerOptions = {}) {
  const clock = new ManualClock(1_000);
  const b = new CircuitBreaker({ clock, minimumCalls: 4, openMs: 1_000, halfOpenCalls: 2, ...options });
  const changes: StateChange[] = [];
  b.onStateChange((c) => changes.push(c));
  return { clock, b, changes };
}

/** stateOf reads the state afresh (a plain `b.state` read gets narrowed by TypeScript). */
function stateOf(b: CircuitBreaker): BreakerState {
  return b.state;
}
function fail(b: CircuitBreaker, n = 1): void {
  for (let i = 0; i < n; i++) b.admit().failure(new Error(`fail ${i}`));
}
function succeed(b: CircuitBreaker, n = 1): void {
  for (let i = 0; i < n; i++) b.admit().success();
}
function rejects(b: CircuitBreaker): boolean {
  try {
    b.admit();
    return false;
  } catch (e) {
    assert.ok(e instanceof BreakerOpenError);
    return true;
  }
}

describe('CircuitBreaker', () => {
  it('stays closed below minimumCalls, however many of them fail', () => {
    const { b } = make({ minimumCalls: 10 });
    fail(b, 9);
    assert.equal(b.state, 'closed');
    fail(b);
    assert.equal(b.state, 'open');
  });

  it('opens when the failure rate reaches failureRate, not before', () => {
    const { b, changes } = make({ failureRate: 0.5, minimumCalls: 4 });
    succeed(b, 3);
    fail(b, 2); // 2 / 5 = 40 %
    assert.equal(b.state, 'closed');
    fail(b); // 3 / 6 = 50 %
    assert.equal(b.state, 'open');
    assert.equal(changes.length, 1);
    assert.deepEqual([changes[0]!.from, changes[0]!.to], ['closed', 'open']);
    assert.match(changes[0]!.reason, /failure rate 50% ≥ 50% over 6 calls/);
  });

  it('opens on the slow-call rate, counting calls slower than slowCallMs', () => {
    const { b, clock } = make({ slowCallMs: 100, slowCallRate: 0.5, minimumCalls: 4 });
    for (let i = 0; i < 2; i++) {
      const t = b.admit();
      clock.advance(10);
      t.success();
    }
    for (let i = 0; i < 2; i++) {
      const t = b.admit();
      clock.advance(100);
      t.success(); // slow, though it succeeded
    }
    assert.equal(b.state, 'open');
    assert.match(b.stats().state, /open/);
  });

  it('forgets outcomes older than the time window', () => {
    const { b, clock } = make({ windowMs: 1_000, buckets: 10 });
    fail(b, 3);
    clock.advance(1_000);
    fail(b); // the three earlier failures have left the window: 1 call
    assert.equal(b.state, 'closed');
    assert.equal(b.stats().calls, 1);
  });

  it('with a count window, judges the last `size` calls', () => {
    const { b } = make({ windowCalls: 4, minimumCalls: 4 });
    fail(b, 1);
    succeed(b, 4); // the failure has been pushed out
    assert.deepEqual([b.stats().calls, b.stats().failures], [4, 0]);
    fail(b, 1);
    assert.equal(b.state, 'closed'); // 1 / 4
    fail(b, 1);
    assert.equal(b.state, 'open'); // 2 / 4
  });

  it('rejects at once while open, then half-opens after openMs', () => {
    const { b, clock, changes } = make();
    fail(b, 4);
    assert.ok(rejects(b));
    clock.advance(999);
    assert.ok(rejects(b));
    clock.advance(1);
    assert.equal(b.state, 'half-open');
    assert.deepEqual(
      changes.map((c) => c.to),
      ['open', 'half-open'],
    );
  });

  it('half-open admits exactly halfOpenCalls probes and closes when all succeed', () => {
    const { b, clock } = make({ halfOpenCalls: 3 });
    fail(b, 4);
    clock.advance(1_000);
    const probes = [b.admit(), b.admit(), b.admit()];
    assert.ok(rejects(b), 'a fourth concurrent call is rejected');
    probes[0]!.success();
    assert.ok(rejects(b), 'a finished probe does not make room: 3 probes in all');
    probes[1]!.success();
    assert.equal(b.state, 'half-open');
    probes[2]!.success();
    assert.equal(b.state, 'closed');
    assert.equal(b.stats().calls, 0, 'closing starts a fresh window');
  });

  it('reopens on the first failed probe, and grows the open period with openBackoff', () => {
    const { b, clock, changes } = make({ openBackoff: { multiplier: 2, maxMs: 3_000 } });
    fail(b, 4);
    clock.advance(1_000); // first trip: openMs
    assert.equal(changes.at(-1)!.to, 'open');
    b.admit().failure(new Error('still down'));
    assert.equal(b.state, 'open');
    clock.advance(1_999);
    assert.ok(rejects(b), 'second trip lasts 2 000 ms');
    clock.advance(1);
    b.admit().failure(new Error('still down'));
    clock.advance(2_999);
    assert.ok(rejects(b), 'third trip is capped at 3 000 ms');
    clock.advance(1);
    assert.equal(b.state, 'half-open');
    b.admit().success();
    b.admit().success();
    assert.equal(b.state, 'closed');
    fail(b, 4);
    clock.advance(1_000);
    assert.equal(b.state, 'half-open', 'closing forgets the consecutive trips');
  });

  it('a slow probe reopens like a failed one', () => {
    const { b, clock } = make({ slowCallMs: 50 });
    fail(b, 4);
    clock.advance(1_000);
    const t = b.admit();
    clock.advance(60);
    t.success();
    assert.equal(b.state, 'open');
  });

  it('a released probe frees its permit at once and counts nothing; a report after the release is ignored', () => {
    const { b, clock, changes } = make({ halfOpenCalls: 2, probeTimeoutMs: Infinity });
    fail(b, 4);
    clock.advance(1_000);
    const [p1, p2] = [b.admit(), b.admit()];
    assert.ok(rejects(b), 'both permits taken');
    p1.release();
    assert.deepEqual([b.stats().probesInFlight, b.stats().probeSuccesses], [1, 0], 'freed, not counted');
    const p3 = b.admit(); // the freed permit probes again, with no clock advance
    p1.failure(new Error('late')); // already released: must not reopen
    assert.equal(stateOf(b), 'half-open');
    p2.success();
    assert.equal(stateOf(b), 'half-open', 'the released probe was not a success: 2 successes are still needed');
    p3.success();
    assert.equal(stateOf(b), 'closed');
    assert.deepEqual(
      changes.map((c) => c.to),
      ['open', 'half-open', 'closed'],
    );
  });

  it('a released call in the closed state counts neither as a call nor as a failure', () => {
    const { b } = make({ minimumCalls: 4 });
    fail(b, 3);
    for (let i = 0; i < 10; i++) b.admit().release();
    const t = b.admit();
    t.release();
    t.failure(new Error('after release')); // ignored
    assert.deepEqual([b.stats().calls, b.stats().failures, stateOf(b)], [3, 3, 'closed']);
    assert.equal(b.lastFailures().length, 3, 'no reason recorded for a released call');
    fail(b); // the 4th counted call trips it: released calls never diluted the failure rate
    assert.equal(stateOf(b), 'open');
  });

  it('frees the permit of a probe never reported after probeTimeoutMs; its late report is ignored', () => {
    const { b, clock } = make({ halfOpenCalls: 1, probeTimeoutMs: 500 });
    fail(b, 4);
    clock.advance(1_000);
    const lost = b.admit();
    clock.advance(499);
    assert.ok(rejects(b));
    clock.advance(1);
    const second = b.admit();
    lost.failure(new Error('late')); // its permit was given away: ignored
    assert.equal(b.state, 'half-open');
    second.success();
    assert.equal(b.state, 'closed');
  });

  it('ignores reports from tokens of an earlier state', () => {
    const { b, clock } = make();
    const old = b.admit();
    fail(b, 4);
    clock.advance(1_000);
    assert.equal(b.state, 'half-open');
    old.failure(new Error('from the closed period'));
    assert.equal(b.state, 'half-open');
  });

  it('isolate() holds it open until reset(), whatever the time', () => {
    const { b, clock, changes } = make();
    b.isolate();
    assert.equal(b.state, 'open');
    assert.equal(b.isolated, true);
    clock.advance(1e9);
    assert.ok(rejects(b));
    try {
      b.admit();
    } catch (e) {
      assert.match((e as Error).message, /isolated/);
    }
    b.reset();
    assert.equal(b.state, 'closed');
    assert.equal(b.isolated, false);
    assert.deepEqual(
      changes.map((c) => `${c.from}>${c.to}:${c.reason}`),
      ['closed>open:isolated by an operator', 'open>closed:reset'],
    );
  });

  it('names the breaker, the trip reason and the last failures in its error, without a stack', () => {
    const { b } = make({ name: 'inventory' });
    for (let i = 1; i <= 4; i++) b.admit().failure(new Error(`timeout #${i}`));
    let err: unknown;
    try {
      b.admit();
    } catch (e) {
      err = e;
    }
    assert.ok(err instanceof BreakerOpenError);
    assert.equal(err.breaker, 'inventory');
    assert.match(err.message, /breaker "inventory" is open for 1000 ms: failure rate 100% ≥ 50% over 4 calls/);
    assert.match(err.message, /timeout #1 \| .* \| Error: timeout #4/);
    assert.equal(err.stack?.split('\n').length, 1);
    assert.throws(() => {
      (err as { code: string }).code = 'X';
    }, TypeError);
  });

  it('a listener that throws does not break the breaker', () => {
    const { b } = make();
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.message);
    process.on('warning', onWarning);
    b.onStateChange(() => {
      throw new Error('bad listener');
    });
    fail(b, 4);
    assert.equal(b.state, 'open');
    process.off('warning', onWarning);
  });

  it('property: closed never rejects; never more than halfOpenCalls probes in flight; any failure in half-open reopens', () => {
    type Cmd = { kind: 'advance'; ms: number } | { kind: 'allow' } | { kind: 'report'; pick: number; ok: boolean };
    const cmd: fc.Arbitrary<Cmd> = fc.oneof(
      fc.record({ kind: fc.constant('advance' as const), ms: fc.oneof(fc.integer({ min: 0, max: 100 }), fc.integer({ min: 400, max: 800 })) }),
      fc.record({ kind: fc.constant('allow' as const) }),
      fc.record({ kind: fc.constant('report' as const), pick: fc.nat(), ok: fc.boolean() }),
    );
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 6 }),
        fc.constantFrom(300, 1_000, Infinity),
        fc.array(cmd, { minLength: 20, maxLength: 300, size: 'max' }),
        (halfOpenCalls, minimumCalls, probeTimeoutMs, cmds) => {
          const clock = new ManualClock();
          const b = new CircuitBreaker({ clock, halfOpenCalls, minimumCalls, probeTimeoutMs, openMs: 500, windowCalls: 10 });
          let transitions = 0;
          b.onStateChange(() => transitions++);
          // Outstanding tokens, with the half-open period they are probes of (or -1) and when admitted.
          const open: { token: AdmissionToken; period: number; at: number }[] = [];
          for (const c of cmds) {
            if (c.kind === 'advance') clock.advance(c.ms);
            else if (c.kind === 'allow') {
              const before = b.state;
              const period = before === 'half-open' ? transitions : -1;
              try {
                open.push({ token: b.admit(), period, at: clock.now() });
              } catch {
                if (before === 'closed') return false; // closed never rejects
              }
            } else if (open.length > 0) {
              // Mostly one of the newest tokens, so that probes get reported while they are live.
              const [t] = open.splice(open.length - 1 - (c.pick % Math.min(open.length, 3)), 1);
              const liveProbe = t!.period === transitions && b.state === 'half-open' && clock.now() - t!.at < probeTimeoutMs;
              if (c.ok) t!.token.success();
              else {
                t!.token.failure(new Error('x'));
                if (liveProbe && stateOf(b) !== 'open') return false; // any failure in half-open reopens
              }
            }
            if (b.stats().probesInFlight > halfOpenCalls) return false;
            const live = open.filter((t) => t.period === transitions && clock.now() - t.at < probeTimeoutMs).length;
            if (b.state === 'half-open' && live > halfOpenCalls) return false;
          }
          return true;
        },
      ),
      { numRuns: 300 },
    );
  });

  describe('admitAnyway', () => {
    it('lets a call past an open breaker, counting its outcome without moving the state machine, and never past an isolate', () => {
      const clock = new ManualClock();
      const b = new CircuitBreaker({ minimumCalls: 2, failureRate: 0.5, openMs: 1_000, clock });
      b.admit().failure(new Error('x'));
      b.admit().failure(new Error('y'));
      assert.equal(b.state, 'open');
      assert.equal(b.heldOpen, false, 'open on evidence');
      b.admitAnyway()!.success();
      b.admitAnyway()!.failure(new Error('z'));
      assert.equal(b.state, 'open', 'outcomes of calls let past do not close or extend it');
      const s = b.stats();
      assert.equal(s.bypassedCalls, 2);
      assert.equal(s.successfulCalls, 1);
      assert.equal(s.failedCalls, 3);
      assert.equal(s.notPermittedCalls, 0);
      clock.advance(1_000);
      assert.equal(b.state, 'half-open');
      b.admitAnyway()!.success(); // a free probe permit: a probe, as admit() would
      assert.equal(b.stats().probesInFlight + b.stats().probeSuccesses, 1);
      b.isolate();
      assert.equal(b.heldOpen, true);
      assert.equal(b.admitAnyway(), undefined, 'force is never overridden');
    });
  });
});
