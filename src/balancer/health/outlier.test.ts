import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from '../../core/clock.js';
import { OutlierDetector, type OutlierEvent } from './outlier.js';

function fail(d: OutlierDetector, id: string, times: number): boolean {
  let changed = false;
  for (let i = 0; i < times; i++) changed = d.record(id, false) || changed;
  return changed;
}

describe('OutlierDetector', () => {
  it('ejects after 5 consecutive failures for 30 s, then returns the instance', () => {
    const clock = new ManualClock();
    const d = new OutlierDetector({ clock });
    d.retain(['a', 'b', 'c']);
    assert.equal(fail(d, 'a', 4), false);
    assert.equal(d.isEjected('a'), false);
    assert.equal(d.record('a', false), true);
    assert.equal(d.isEjected('a'), true);
    assert.equal(d.nextExpiry(), 30_000);
    clock.advance(29_999);
    assert.equal(d.isEjected('a'), true);
    clock.advance(1);
    assert.equal(d.isEjected('a'), false);
    assert.equal(d.stats().ejected, 0);
  });

  it('resets the count on a success: failures must be consecutive', () => {
    const d = new OutlierDetector({ clock: new ManualClock() });
    d.retain(['a', 'b']);
    fail(d, 'a', 4);
    d.record('a', true);
    fail(d, 'a', 4);
    assert.equal(d.isEjected('a'), false);
  });

  it('ejects for 30 s × the times ejected, capped at 300 s', () => {
    const clock = new ManualClock();
    const d = new OutlierDetector({ clock, intervalMs: 1e9 }); // no forgiveness in this test
    d.retain(['a', 'b']);
    const lengths: number[] = [];
    for (let k = 0; k < 12; k++) {
      fail(d, 'a', 5);
      const until = d.nextExpiry();
      lengths.push(until - clock.now());
      clock.set(until);
      assert.equal(d.isEjected('a'), false);
    }
    assert.deepEqual(
      lengths,
      [30, 60, 90, 120, 150, 180, 210, 240, 270, 300, 300, 300].map((s) => s * 1000),
    );
  });

  it('forgives one past ejection per interval spent in service', () => {
    const clock = new ManualClock();
    const d = new OutlierDetector({ clock });
    d.retain(['a', 'b']);
    fail(d, 'a', 5);
    clock.advance(30_000);
    d.expire();
    fail(d, 'a', 5);
    assert.equal(d.timesEjected('a'), 2); // came back and failed at once: 60 s
    clock.advance(60_000);
    d.expire();
    clock.advance(25_000); // 2 intervals of good service forgive both
    fail(d, 'a', 5);
    assert.equal(d.timesEjected('a'), 1);
    assert.equal(d.nextExpiry() - clock.now(), 30_000);
  });

  it('never ejects more than 50 % of the instances at once', () => {
    const clock = new ManualClock();
    const d = new OutlierDetector({ clock });
    d.retain(['a', 'b', 'c', 'd', 'e']);
    for (const id of ['a', 'b', 'c', 'd', 'e']) fail(d, id, 5);
    assert.equal(d.stats().ejected, 2);
    assert.deepEqual(
      ['a', 'b', 'c', 'd', 'e'].map((id) => d.isEjected(id)),
      [true, true, false, false, false],
    );
    clock.advance(30_000);
    assert.equal(d.stats().ejected, 0);
    fail(d, 'c', 5);
    assert.equal(d.isEjected('c'), true);
  });

  it('returns ejected instances early when the list shrinks under the 50 % cap', () => {
    const clock = new ManualClock();
    const d = new OutlierDetector({ clock });
    d.retain(['a', 'b', 'c', 'd']);
    fail(d, 'a', 5);
    clock.advance(1_000);
    fail(d, 'b', 5);
    d.retain(['a', 'b', 'c']); // 2 of 3 ejected is over the cap: a (ending first) returns
    assert.deepEqual([d.isEjected('a'), d.isEjected('b')], [false, true]);
    d.retain(['b']);
    assert.equal(d.stats().ejected, 0);
  });

  it('never ejects the only instance', () => {
    const d = new OutlierDetector({ clock: new ManualClock() });
    d.retain(['solo']);
    fail(d, 'solo', 50);
    assert.equal(d.isEjected('solo'), false);
  });

  it('drops the state of instances that leave and ignores their results', () => {
    const clock = new ManualClock();
    const d = new OutlierDetector({ clock });
    d.retain(['a', 'b']);
    fail(d, 'a', 5);
    assert.equal(d.stats().ejected, 1);
    d.retain(['b', 'c']);
    assert.equal(d.stats().ejected, 0);
    assert.equal(d.record('a', false), false);
    d.retain(['a', 'b', 'c']);
    assert.equal(d.isEjected('a'), false);
    assert.equal(d.timesEjected('a'), 0);
  });

  it('emits one event per ejection and return', () => {
    const clock = new ManualClock();
    const d = new OutlierDetector({ clock });
    const events: OutlierEvent[] = [];
    d.onChange((e) => events.push(e));
    d.retain(['a', 'b']);
    fail(d, 'a', 5);
    clock.advance(30_000);
    d.expire();
    assert.deepEqual(events, [
      { id: 'a', ejected: true, untilMs: 30_000, times: 1 },
      { id: 'a', ejected: false, times: 1 },
    ]);
  });

  it('keeps its ejected count equal to the instances ejected, under any sequence (property)', () => {
    const ids = ['a', 'b', 'c', 'd'];
    const op = fc.oneof(
      fc.record({ kind: fc.constant('record' as const), id: fc.constantFrom(...ids, 'zz'), ok: fc.boolean() }),
      fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 100_000 }) }),
      fc.record({ kind: fc.constant('retain' as const), keep: fc.subarray(ids) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
        const clock = new ManualClock();
        const d = new OutlierDetector({ clock });
        let members = ids;
        d.retain(members);
        for (const o of ops) {
          if (o.kind === 'record') d.record(o.id, o.ok);
          else if (o.kind === 'advance') clock.advance(o.ms);
          else d.retain((members = o.keep));
          const ejected = members.filter((id) => d.isEjected(id)).length;
          assert.equal(d.stats().ejected, ejected);
          assert.ok(ejected <= members.length * 0.5);
          const next = d.nextExpiry();
          assert.ok(ejected === 0 ? next === Infinity || next <= clock.now() : next > clock.now() && next <= clock.now() + 300_000);
        }
      }),
    );
  });

  it('rejects bad options', () => {
    assert.throws(() => new OutlierDetector({ consecutiveFailures: 0 }), RangeError);
    assert.throws(() => new OutlierDetector({ baseEjectionMs: -1 }), RangeError);
    assert.throws(() => new OutlierDetector({ baseEjectionMs: 1000, maxEjectionMs: 10 }), RangeError);
    assert.throws(() => new OutlierDetector({ maxEjectionPercent: 101 }), RangeError);
    assert.throws(() => new OutlierDetector({ clock: Date as never }), TypeError);
  });
});
