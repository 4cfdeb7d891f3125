import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from '../core/clock.js';
import { NoInstanceError } from '../core/errors.js';
import type { ServiceInstance } from '../registry/types.js';
import { Balancer } from './balancer.js';
import { P2C } from './p2c.js';
import type { StrategyName } from './types.js';
import { inst, instances, seeded } from './test-fixtures.js';

const STRATEGIES: readonly StrategyName[] = ['round-robin', 'random', 'weighted-round-robin', 'ring-hash', 'p2c', 'least-request'];

/** calls makes `n` calls through `b`, each picked (with key k for ring hash), then reported with `latency`; answers the count per id. */
function calls(b: Balancer, clock: ManualClock, n: number, latency: (id: string, i: number) => number = () => 5): Map<string, number> {
  const counts = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    clock.advance(1);
    const x = b.pick(`k${i}`);
    counts.set(x.id, (counts.get(x.id) ?? 0) + 1);
    b.report(x, { ok: true, latencyMs: latency(x.id, i) });
  }
  return counts;
}

describe('Balancer weight overrides', () => {
  for (const strategy of ['p2c', 'weighted-round-robin'] as const) {
    it(`splits 95/5 within ±2 percentage points over 10 000 picks with ${strategy}`, () => {
      const clock = new ManualClock();
      const b = new Balancer({ instances: [inst('stable'), inst('canary')], strategy, clock, random: seeded(7) });
      b.setWeights({ stable: 95, canary: 5 });
      const noise = seeded(11);
      // Alike instances: latencies from one distribution, so P2C's cost comparison is a coin toss.
      const counts = calls(b, clock, 10_000, () => 2 + noise() * 10);
      const canary = (counts.get('canary') ?? 0) / 10_000;
      assert.ok(Math.abs(canary - 0.05) <= 0.02, `canary share ${canary}`);
    });
  }

  it('splits 95/5 with P2C among five instances too (the canary at 5 %, the rest evenly)', () => {
    const clock = new ManualClock();
    const list = [...instances(4), inst('canary')];
    const b = new Balancer({ instances: list, strategy: 'p2c', clock, random: seeded(3) });
    b.setWeights({ i0: 23.75, i1: 23.75, i2: 23.75, i3: 23.75, canary: 5 });
    const noise = seeded(5);
    const counts = calls(b, clock, 10_000, () => 2 + noise() * 10);
    assert.ok(Math.abs((counts.get('canary') ?? 0) / 10_000 - 0.05) <= 0.02, `canary ${counts.get('canary')}`);
    for (const id of ['i0', 'i1', 'i2', 'i3']) assert.ok(Math.abs((counts.get(id) ?? 0) / 10_000 - 0.2375) <= 0.02, `${id} ${counts.get(id)}`);
  });

  it('lets an override beat metadata.weight, and falls back to it when removed', () => {
    const clock = new ManualClock();
    const b = new Balancer({ instances: [inst('a', '1'), inst('b', '9')], strategy: 'weighted-round-robin', clock });
    assert.equal(calls(b, clock, 1_000).get('b'), 900);
    b.setWeights({ a: 9, b: 1 });
    assert.equal(calls(b, clock, 1_000).get('b'), 100);
    assert.equal(b.pick().metadata?.weight !== undefined, true);
    b.setWeights(undefined);
    assert.equal(calls(b, clock, 1_000).get('b'), 900);
    assert.equal(b.weights(), undefined);
  });

  for (const strategy of STRATEGIES) {
    it(`drains an instance of weight 0 with ${strategy}: no new picks, its call in flight finishes`, () => {
      const clock = new ManualClock();
      const b = new Balancer({ instances: instances(3), strategy, clock, random: seeded(9) });
      // A call in flight to i1 when it is drained.
      let inFlight: ServiceInstance | undefined;
      const others: ServiceInstance[] = []; // left in flight too meanwhile, so that load-aware strategies move on
      for (let k = 0; inFlight === undefined && k < 1_000; k++) {
        const x = b.pick(`k${k}`);
        if (x.id === 'i1') inFlight = x;
        else others.push(x);
      }
      for (const x of others) b.report(x, { ok: true, latencyMs: 5 });
      assert.ok(inFlight !== undefined);
      b.setWeights({ i1: 0 });
      assert.equal(b.stats().drained, 1);
      assert.equal(b.stats().available, 2);
      const counts = calls(b, clock, 2_000);
      assert.equal(counts.get('i1'), undefined, `drained i1 was picked ${counts.get('i1')} times`);
      assert.equal((counts.get('i0') ?? 0) + (counts.get('i2') ?? 0), 2_000);
      b.report(inFlight, { ok: true, latencyMs: 5 }); // the call in flight ends as usual
      b.setWeights({});
      assert.deepEqual(
        b.healthy().map((x) => x.id),
        ['i0', 'i1', 'i2'],
        'back in rotation once the override is gone',
      );
      assert.equal(b.stats().drained, 0);
    });
  }

  it('answers NoInstanceError saying so when every instance is drained', () => {
    const b = new Balancer({ instances: instances(2), service: 'svc' });
    b.setWeights({ i0: 0, i1: 0 });
    assert.throws(
      () => b.pick(),
      (err: unknown) => err instanceof NoInstanceError && /every instance is drained/.test(err.message),
    );
    assert.equal(b.stats().panic, false);
  });

  it('keeps drained instances out of the cap and panic: ejecting one of two others is within the cap', () => {
    const clock = new ManualClock();
    const b = new Balancer({ instances: instances(4), clock, outlier: { consecutiveFailures: 1, maxEjectionPercent: 50 } });
    b.setWeights({ i0: 0, i1: 0 });
    const i2 = b.healthy().find((x) => x.id === 'i2')!;
    b.report(i2, { ok: false, latencyMs: 1 });
    assert.deepEqual(
      b.healthy().map((x) => x.id),
      ['i3'],
    );
    assert.equal(b.stats().panic, false);
  });

  it('applies overrides set before the instance is listed', () => {
    const b = new Balancer({ instances: [inst('a')] });
    b.setWeights({ b: 0 });
    b.update([inst('a'), inst('b')]);
    for (let i = 0; i < 100; i++) assert.equal(b.pick().id, 'a');
  });

  it('refuses bad overrides with a TypeError or RangeError naming the option and value, and changes nothing', () => {
    const b = new Balancer({ instances: instances(2) });
    b.setWeights({ i1: 0 });
    const table: [unknown, ErrorConstructor, string][] = [
      [{ i0: -1 }, RangeError, 'Balancer: weights.i0 must be a finite number in [0, 1000000], got -1'],
      [{ i0: Infinity }, RangeError, 'Balancer: weights.i0 must be a finite number in [0, 1000000], got Infinity'],
      [{ i0: NaN }, RangeError, 'Balancer: weights.i0 must be a finite number in [0, 1000000], got NaN'],
      [{ i0: 2_000_000 }, RangeError, 'Balancer: weights.i0 must be a finite number in [0, 1000000], got 2000000'],
      [{ i0: '5' }, TypeError, 'Balancer: weights.i0 must be a number, got "5"'],
      [[1], TypeError, 'Balancer: weights must be an object of instance id → weight, or undefined, got [object Array]'],
      [null, TypeError, 'Balancer: weights must be an object of instance id → weight, or undefined, got null'],
      [{ i0: 1, i1: -2 }, RangeError, 'Balancer: weights.i1 must be a finite number in [0, 1000000], got -2'],
    ];
    for (const [value, type, message] of table) {
      assert.throws(
        () => b.setWeights(value as Record<string, number>),
        (err: unknown) => err instanceof type && (err as Error).message === message,
        message,
      );
    }
    assert.deepEqual(b.weights(), { i1: 0 });
    assert.equal(b.stats().drained, 1);
  });

  it('property: drained instances are never picked, and shares converge to the weights', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<StrategyName>('p2c', 'weighted-round-robin', 'ring-hash', 'round-robin', 'random', 'least-request'),
        fc.array(fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 20 })), { minLength: 2, maxLength: 6 }),
        fc.integer({ min: 1, max: 1_000_000 }),
        (strategy, weights, seed) => {
          const clock = new ManualClock();
          const list = instances(weights.length);
          const b = new Balancer({ instances: list, strategy, clock, random: seeded(seed), outlier: false });
          b.setWeights(Object.fromEntries(weights.map((w, i) => [`i${i}`, w])));
          const total = weights.reduce((s, w) => s + w, 0);
          if (total === 0) {
            assert.throws(() => b.pick(), NoInstanceError);
            return;
          }
          const n = 4_000;
          const noise = seeded(seed + 1);
          const counts = calls(b, clock, n, () => 2 + noise() * 10);
          weights.forEach((w, i) => {
            const got = counts.get(`i${i}`) ?? 0;
            if (w === 0) assert.equal(got, 0, `${strategy}: drained i${i} picked ${got} times`);
            // Shares: exact for smooth WRR, within sampling error for P2C (weights only steer the weighted strategies).
            if (strategy === 'weighted-round-robin')
              assert.ok(Math.abs(got / n - w / total) <= 0.001 + 1 / n, `${strategy} i${i}: ${got}/${n} for ${w}/${total}`);
            if (strategy === 'p2c') assert.ok(Math.abs(got / n - w / total) <= 0.04, `${strategy} i${i}: ${got}/${n} for ${w}/${total}`);
          });
        },
      ),
      { numRuns: 60, seed: 27 },
    );
  });
});

describe('P2C weights', () => {
  it('draws its choices by metadata.weight: 95/5 within ±2 points over 10 000 picks', () => {
    const clock = new ManualClock();
    const p = new P2C({ clock, random: seeded(4) });
    const list = [inst('a', '95'), inst('b', '5')];
    const noise = seeded(8);
    let b = 0;
    for (let i = 0; i < 10_000; i++) {
      clock.advance(1);
      const x = p.pick(list);
      p.start(x);
      if (x.id === 'b') b++;
      p.report(x, { ok: true, latencyMs: 2 + noise() * 10 });
    }
    assert.ok(Math.abs(b / 10_000 - 0.05) <= 0.02, `b share ${b / 10_000}`);
  });

  it('still steers away from a slow instance while weighted', () => {
    const clock = new ManualClock();
    const p = new P2C({ clock, random: seeded(6) });
    const list = [inst('a', '1'), inst('b', '1.0001'), inst('slow', '1')];
    let slow = 0;
    for (let i = 0; i < 10_000; i++) {
      clock.advance(1);
      const x = p.pick(list);
      p.start(x);
      if (x.id === 'slow') slow++;
      p.report(x, { ok: true, latencyMs: x.id === 'slow' ? 200 : 5 });
    }
    assert.ok(slow / 10_000 < 0.15, `slow share ${slow / 10_000}`);
  });
});
