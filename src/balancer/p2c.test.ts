import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from '../core/clock.js';
import { NoInstanceError } from '../core/errors.js';
import type { ServiceInstance } from '../registry/types.js';
import { P2C } from './p2c.js';
import { inst, instances, seeded } from './test-fixtures.js';

/** drive makes `calls` calls, one per `stepMs`, each finishing at once with the instance's latency. */
function drive(
  p: P2C,
  clock: ManualClock,
  list: readonly ServiceInstance[],
  latency: (id: string) => number,
  calls: number,
  stepMs = 1,
  ok: (id: string) => boolean = () => true,
) {
  const counts = new Map<string, number>();
  for (let i = 0; i < calls; i++) {
    clock.advance(stepMs);
    const x = p.pick(list);
    p.start(x);
    counts.set(x.id, (counts.get(x.id) ?? 0) + 1);
    p.report(x, { ok: ok(x.id), latencyMs: latency(x.id) });
  }
  return counts;
}

describe('P2C', () => {
  it('sends most traffic to the fast instance and little to the slow one', () => {
    const clock = new ManualClock();
    const p = new P2C({ clock, random: seeded(1) });
    const list = [inst('fast'), inst('medium'), inst('slow')];
    const lat: Record<string, number> = { fast: 5, medium: 50, slow: 200 };
    const counts = drive(p, clock, list, (id) => lat[id]!, 20_000, 2);
    const share = (id: string) => (counts.get(id) ?? 0) / 20_000;
    assert.ok(share('fast') > 0.6, `fast ${share('fast')}`);
    assert.ok(share('slow') < 0.05, `slow ${share('slow')}`);
    assert.ok(share('slow') > 0, 'the slow instance is still measured (forced picks)');
  });

  it('avoids an instance with many calls in flight when latencies are equal', () => {
    const clock = new ManualClock();
    const p = new P2C({ clock, random: seeded(2) });
    const list = instances(2);
    p.pick(list);
    for (let i = 0; i < 10; i++) p.report(list[i % 2]!, { ok: true, latencyMs: 10 });
    for (let i = 0; i < 5; i++) p.start(list[0]!);
    for (let i = 0; i < 100; i++) assert.equal(p.pick(list).id, 'i1');
    assert.equal(p.inFlightOf('i0'), 5);
  });

  it('decays latency with time: 10 s later an old sample weighs e^-1', () => {
    const clock = new ManualClock();
    const p = new P2C({ clock, initialLatencyMs: 0 });
    const list = instances(1);
    p.pick(list);
    p.report(list[0]!, { ok: true, latencyMs: 100 });
    const after = p.ewmaOf('i0')!; // a same-instant sample moves the average by 1/16
    clock.advance(10_000);
    p.report(list[0]!, { ok: true, latencyMs: 0 });
    assert.ok(Math.abs(p.ewmaOf('i0')! - after * Math.exp(-1)) < 1e-9);
  });

  it("dates a sample at the outcome's `at` (a reading of its clock) instead of reading the clock", () => {
    const clock = new ManualClock();
    const p = new P2C({ clock, initialLatencyMs: 0 });
    const list = instances(1);
    p.pick(list);
    p.report(list[0]!, { ok: true, latencyMs: 100 });
    const after = p.ewmaOf('i0')!;
    clock.advance(10_000);
    const ended = clock.now();
    clock.advance(10_000); // read now, the sample would weigh the old one e^-2
    p.report(list[0]!, { ok: true, latencyMs: 0, at: ended });
    assert.ok(Math.abs(p.ewmaOf('i0')! - after * Math.exp(-1)) < 1e-9, `ewma ${p.ewmaOf('i0')}`);
    p.report(list[0]!, { ok: true, latencyMs: 0, at: Number.NaN }); // not a reading: the clock's is taken
    assert.ok(Math.abs(p.ewmaOf('i0')! - after * Math.exp(-2)) < 1e-9, `ewma ${p.ewmaOf('i0')}`);
  });

  it('counts a failure as at least failurePenalty × its EWMA, so failing fast does not look fast', () => {
    const clock = new ManualClock();
    const p = new P2C({ clock, random: seeded(4) });
    const list = [inst('good'), inst('broken')];
    const counts = drive(
      p,
      clock,
      list,
      (id) => (id === 'good' ? 20 : 1),
      5_000,
      5,
      (id) => id === 'good',
    );
    assert.ok((counts.get('good') ?? 0) > 4_000, `good ${counts.get('good')}`);
  });

  it('picks an instance that lost for longer than forcePickMs anyway', () => {
    const clock = new ManualClock();
    const p = new P2C({ clock, random: seeded(5), forcePickMs: 1_000 });
    const list = [inst('fast'), inst('slow')];
    // 10 s of calls, one per ms: the slow one is only picked when forced, about once a second.
    const counts = drive(p, clock, list, (id) => (id === 'fast' ? 1 : 500), 10_000, 1);
    const slow = counts.get('slow') ?? 0;
    assert.ok(slow >= 5 && slow <= 40, `slow picked ${slow} times`);
  });

  it('warms a late joiner up: less than its share at first, about its share after slowStartMs', () => {
    const clock = new ManualClock();
    const p = new P2C({ clock, random: seeded(6), slowStartMs: 10_000 });
    const old = instances(4);
    drive(p, clock, old, () => 10, 4_000, 5); // 20 s of history
    const grown = [...old, inst('new')];
    const early = drive(p, clock, grown, () => 10, 1_000, 1); // the first second of its window
    const earlyShare = (early.get('new') ?? 0) / 1_000;
    assert.ok(earlyShare > 0, 'not starved');
    assert.ok(earlyShare < 0.12, `early share ${earlyShare}`);
    clock.advance(10_000);
    const late = drive(p, clock, grown, () => 10, 5_000, 2);
    const lateShare = (late.get('new') ?? 0) / 5_000;
    assert.ok(lateShare > 0.14 && lateShare < 0.26, `late share ${lateShare}`);
  });

  it('starts a late joiner from the mean latency of the others, not from zero', () => {
    const clock = new ManualClock();
    const p = new P2C({ clock, random: seeded(8) });
    const old = instances(2);
    drive(p, clock, old, (id) => (id === 'i0' ? 10 : 30), 2_000, 5);
    const e0 = p.ewmaOf('i0')!;
    const e1 = p.ewmaOf('i1')!;
    p.pick([...old, inst('new')]);
    assert.ok(Math.abs(p.ewmaOf('new')! - (e0 + e1) / 2) < 1e-9);
  });

  it('keeps state for instances that stay and drops it for those that leave', () => {
    const clock = new ManualClock();
    const p = new P2C({ clock });
    const list = instances(3);
    p.pick(list);
    p.start(list[0]!);
    p.pick(list.slice(0, 2));
    assert.equal(p.inFlightOf('i0'), 1);
    assert.equal(p.inFlightOf('i2'), undefined);
    p.report(list[2]!, { ok: true, latencyMs: 1 }); // a report for a departed instance is ignored
  });

  it('with exclude, draws both choices from the others: the cheaper of them wins, and no state is rebuilt', () => {
    const clock = new ManualClock();
    const p = new P2C({ clock, random: seeded(11) });
    const list = [inst('open'), inst('fast'), inst('slow')];
    const lat: Record<string, number> = { open: 1, fast: 5, slow: 200 };
    drive(p, clock, list, (id) => lat[id]!, 3_000, 5);
    p.start(list[0]!); // a call in flight to `open`: its state must survive the excluding picks
    const ewma = list.map((i) => p.ewmaOf(i.id));
    const exclude = new Set(['open']);
    const counts = new Map<string, number>();
    for (let i = 0; i < 4_000; i++) {
      const x = p.pick(list, undefined, exclude);
      counts.set(x.id, (counts.get(x.id) ?? 0) + 1);
    }
    assert.equal(counts.get('open'), undefined, 'never the excluded instance');
    assert.ok((counts.get('slow') ?? 0) < 40, `slow ${counts.get('slow')}: only the cheaper of two allowed choices wins`);
    p.pick(list);
    assert.deepEqual(
      list.map((i) => p.ewmaOf(i.id)),
      ewma,
      'no entry was made anew',
    );
    assert.equal(p.inFlightOf('open'), 1);
    // Everything but one excluded: that one; everything excluded: an ordinary pick.
    assert.equal(p.pick(list, undefined, new Set(['open', 'fast'])).id, 'slow');
    assert.ok(list.includes(p.pick(list, undefined, new Set(list.map((i) => i.id)))));
  });

  it('never answers an excluded instance while another exists, whatever the state (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.array(fc.nat(7), { maxLength: 8 }),
        fc.array(fc.nat(300), { maxLength: 30 }),
        fc.integer(),
        (n, ex, lats, seed) => {
          const clock = new ManualClock();
          const p = new P2C({ clock, random: seeded(seed) });
          const list = instances(n);
          lats.forEach((l) => {
            clock.advance(l);
            const x = p.pick(list);
            p.start(x);
            p.report(x, { ok: l % 3 !== 0, latencyMs: l });
          });
          const exclude = new Set(ex.filter((i) => i < n).map((i) => `i${i}`));
          for (let k = 0; k < 20; k++) {
            const x = p.pick(list, undefined, exclude);
            if (exclude.size < n) assert.ok(!exclude.has(x.id), `picked excluded ${x.id}`);
            else assert.ok(list.includes(x));
          }
        },
      ),
    );
  });

  it('never answers an excluded instance while another exists, at any size and share excluded (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 300 }), fc.double({ min: 0, max: 1, noNaN: true }), fc.integer(), (n, share, seed) => {
        const p = new P2C({ random: seeded(seed) });
        const list = instances(n);
        const rnd = seeded(seed ^ 0x5bd1e995);
        const exclude = new Set(list.filter(() => rnd() < share).map((i) => i.id));
        for (let k = 0; k < 50; k++) {
          const x = p.pick(list, undefined, exclude);
          if (exclude.size < n) assert.ok(!exclude.has(x.id), `picked excluded ${x.id} (${exclude.size} of ${n} out)`);
          else assert.ok(list.includes(x));
        }
      }),
      { numRuns: 200 },
    );
  });

  /** costRanked makes n instances with distinct costs (EWMA rising with the index) and no force picks. */
  function costRanked(n: number, seed: number) {
    const clock = new ManualClock();
    const p = new P2C({ clock, random: seeded(seed), forcePickMs: 1e12, slowStartMs: 0 });
    const list = instances(n);
    p.pick(list);
    list.forEach((x, i) => {
      clock.advance(1);
      p.report(x, { ok: true, latencyMs: 1 + 7 * i });
    });
    return { p, list };
  }

  for (const [n, out] of [
    [20, 5],
    [20, 17],
    [1_000, 100],
  ] as const) {
    it(`with ${out} of ${n} excluded, the cheaper of two allowed choices wins as often as P2C says (rank r of m: 2(m−1−r)/(m(m−1)))`, () => {
      const { p, list } = costRanked(n, 97 + out);
      const rnd = seeded(out);
      const shuffled = [...list].sort(() => rnd() - 0.5); // the excluded ones spread over the cost ranks
      const exclude = new Set(shuffled.slice(0, out).map((x) => x.id));
      assert.equal(exclude.size, out);
      const allowed = list.filter((x) => !exclude.has(x.id)).sort((a, b) => p.ewmaOf(a.id)! - p.ewmaOf(b.id)!);
      const m = allowed.length;
      const picks = 40_000;
      const counts = new Map<string, number>();
      for (let k = 0; k < picks; k++) {
        const x = p.pick(list, undefined, exclude);
        counts.set(x.id, (counts.get(x.id) ?? 0) + 1);
      }
      assert.ok(![...counts.keys()].some((id) => exclude.has(id)), 'never an excluded instance');
      if (m <= 20) {
        allowed.forEach((x, r) => {
          const want = (2 * (m - 1 - r)) / (m * (m - 1));
          const got = (counts.get(x.id) ?? 0) / picks;
          assert.ok(Math.abs(got - want) < 0.012, `rank ${r} of ${m}: ${got.toFixed(4)} of picks, P2C gives ${want.toFixed(4)}`);
        });
      } else {
        // Too many ranks to check one by one: the cheaper half of the allowed ones gets 3/4 of the picks.
        const cheap = allowed.slice(0, m >> 1).reduce((s, x) => s + (counts.get(x.id) ?? 0), 0) / picks;
        assert.ok(Math.abs(cheap - 0.75) < 0.02, `the cheaper half got ${cheap.toFixed(3)} of picks, P2C gives 0.75`);
      }
    });
  }

  it('a pick with a few instances excluded costs a few look-ups, not a scan of the list', () => {
    const p = new P2C({ random: seeded(5) });
    const list = instances(1_000);
    let lookups = 0;
    const out = new Set(list.filter((_, i) => i % 10 === 0).map((x) => x.id)); // 10 % out of rotation
    const exclude = { has: (id: string) => (lookups++, out.has(id)) };
    for (let k = 0; k < 10_000; k++) assert.ok(!out.has(p.pick(list, undefined, exclude).id));
    assert.ok(lookups / 10_000 < 3, `${(lookups / 10_000).toFixed(2)} look-ups per pick`);
  });

  it('rejects bad options and an empty list', () => {
    assert.throws(() => new P2C({ decayMs: 0 }), RangeError);
    assert.throws(() => new P2C({ slowStartMinWeight: 0 }), RangeError);
    assert.throws(() => new P2C({ clock: {} as never }), TypeError);
    assert.throws(() => new P2C({ random: 3 as never }), TypeError);
    assert.throws(() => new P2C().pick([]), NoInstanceError);
  });

  it('still picks a real instance when random() misbehaves', () => {
    const list = instances(3);
    for (const r of [1, -0.5, NaN, 7]) {
      const p = new P2C({ random: () => r });
      assert.ok(list.includes(p.pick(list)));
    }
  });

  it('learns nothing from a call that was never made or a latency that is not a number', () => {
    const clock = new ManualClock();
    const p = new P2C({ clock, initialLatencyMs: 50 });
    const list = instances(1);
    const x = p.pick(list);
    p.start(x);
    clock.advance(1_000);
    p.report(x); // released: the breaker refused it
    assert.equal(p.inFlightOf('i0'), 0);
    p.report(x, { ok: true, latencyMs: NaN });
    p.report(x, { ok: true, latencyMs: -3 });
    assert.equal(p.ewmaOf('i0'), 50);
    p.report(x, { ok: false, latencyMs: NaN }); // a failure still counts, at the penalty
    assert.ok(p.ewmaOf('i0')! > 50);
  });
});
