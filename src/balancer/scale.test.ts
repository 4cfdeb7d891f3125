import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../core/clock.js';
import type { ServiceInstance } from '../registry/types.js';
import { Balancer } from './balancer.js';
import { RingHash } from './ring-hash.js';
import type { StrategyName } from './types.js';

/**
 * A guard against updates going linear-with-a-big-constant or quadratic again, not a benchmark
 * (bench/scale.bench.ts measures): at 10 000 instances every kind of update, with the pick that
 * applies it, must take under 50 ms (they take about 0.5 ms; a full ring rebuild took 2.2 s). Each
 * is run once to warm up, then timed five times in CPU time and the fastest counts, so neither cold
 * code nor a busy machine's scheduler fails it.
 */
const N = 10_000;
const LIMIT_MS = 50;

const instance = (i: number, weight = 1): ServiceInstance => {
  const address = `10.0.${(i >> 8) & 255}.${i & 255}:${8000 + (i >> 16)}`;
  return Object.freeze({ id: address, name: 'svc', address, metadata: Object.freeze({ weight: String(weight) }) });
};

/** fastest answers the least CPU time (ms) `op` took in five runs after one to warm up. */
function fastest(op: () => void): number {
  op();
  let best = Infinity;
  for (let r = 0; r < 5; r++) {
    const t = process.cpuUsage();
    op();
    const u = process.cpuUsage(t);
    best = Math.min(best, (u.user + u.system) / 1000);
  }
  return best;
}

const strategies: StrategyName[] = ['round-robin', 'random', 'weighted-round-robin', 'ring-hash', 'p2c', 'least-request'];

describe(`Balancer at ${N} instances`, () => {
  for (const strategy of strategies) {
    it(`${strategy}: an instance joining, leaving, ejected, returning or re-weighted costs under ${LIMIT_MS} ms`, () => {
      const clock = new ManualClock();
      const list = Object.freeze(Array.from({ length: N }, (_, i) => instance(i)));
      const grown = Object.freeze([...list, instance(N)]);
      const heavier = Object.freeze(list.map((x, i) => (i === 7 ? instance(7, 4) : x)));
      const b = new Balancer({ instances: list, strategy, clock, outlier: { consecutiveFailures: 1, baseEjectionMs: 1_000, maxEjectionMs: 1_000 } });
      const key = 'user:42';
      b.pick(key); // the strategy builds its state for the first list (not an update)
      if (b.picker instanceof RingHash) while (b.picker.stats().rebuilding) clock.advance(1); // a first ring is built in slices
      const victim = list[N >> 1]!;
      const costs = {
        join: fastest(() => (b.update(grown), b.pick(key), b.update(list), b.pick(key))) / 2,
        eject:
          fastest(() => {
            b.report(victim, { ok: false, latencyMs: 1 });
            b.pick(key);
            assert.equal(b.stats().ejected, 1);
            clock.advance(1_000);
            b.pick(key);
          }) / 2,
        weight: fastest(() => (b.update(heavier), b.pick(key), b.update(list), b.pick(key))) / 2,
      };
      assert.equal(b.stats().available, N);
      for (const [what, ms] of Object.entries(costs)) assert.ok(ms < LIMIT_MS, `${strategy} ${what}: ${ms.toFixed(2)} ms`);
      void b.close();
    });
  }
});

describe(`Balancer at ${N} instances, handed a whole new list`, () => {
  for (const strategy of strategies) {
    it(`${strategy}: takes it in with no turn of the loop over ${LIMIT_MS} ms, picks going on between turns`, () => {
      const clock = new ManualClock();
      const list = Object.freeze(Array.from({ length: N }, (_, i) => instance(i)));
      const next = Object.freeze(Array.from({ length: N }, (_, i) => instance(N + i))); // 10 000 new ids
      const b = new Balancer({ instances: list, strategy, clock });
      const key = 'user:42';
      const settle = () => {
        for (let turns = 0; clock.pendingTimers > 0; turns++) {
          assert.ok(turns < 10_000, 'the list is taken in');
          clock.advance(1);
          b.pick(key);
        }
      };
      b.pick(key);
      settle();
      const cpu = (op: () => void) => {
        const t = process.cpuUsage();
        op();
        const u = process.cpuUsage(t);
        return (u.user + u.system) / 1000;
      };
      // The slowest turn of a handover, the least of three (there and back, and there again): a
      // collection of the old lists' garbage may land in any one turn.
      const handover = (to: readonly ServiceInstance[]) => {
        let slowest = cpu(() => (b.update(to), b.pick(key)));
        let turns = 0;
        while (clock.pendingTimers > 0) {
          assert.ok(++turns < 10_000, 'the list is taken in');
          slowest = Math.max(
            slowest,
            cpu(() => clock.advance(1)),
            cpu(() => b.pick(key)),
          );
        }
        assert.ok(turns > 1, `taken in over ${turns} turns`);
        return slowest;
      };
      const slowest = Math.min(handover(next), handover(list), handover(next));
      assert.equal(b.instances()[0], next[0]);
      const ids = new Set(next.map((x) => x.id));
      for (let k = 0; k < 20; k++) assert.ok(ids.has(b.pick(`${key}:${k}`).id), 'picks go to the new list');
      assert.ok(slowest < LIMIT_MS, `${strategy}: slowest turn ${slowest.toFixed(2)} ms`);
      void b.close();
    });
  }
});

describe(`Balancer at ${N} instances, handed a first list`, () => {
  for (const strategy of strategies) {
    it(`${strategy}: takes it in with no turn of the loop over ${LIMIT_MS} ms, ready() once it is in`, async () => {
      const list = Object.freeze(Array.from({ length: N }, (_, i) => instance(i)));
      const cpu = (op: () => void) => {
        const t = process.cpuUsage();
        op();
        const u = process.cpuUsage(t);
        return (u.user + u.system) / 1000;
      };
      // The slowest turn, the least of three balancers (a collection may land in any one turn).
      let slowest = Infinity;
      for (let r = 0; r < 3; r++) {
        const clock = new ManualClock();
        let b!: Balancer;
        let turn = cpu(() => (b = new Balancer({ instances: list, strategy, clock })));
        let ready = false;
        void b.ready().then(() => (ready = true));
        let turns = 0;
        for (; clock.pendingTimers > 0; turns++) {
          assert.ok(turns < 10_000, 'the list is taken in');
          turn = Math.max(
            turn,
            cpu(() => clock.advance(1)),
          );
          await Promise.resolve(); // lets ready() settle
          await Promise.resolve();
          await Promise.resolve();
          if (ready)
            turn = Math.max(
              turn,
              cpu(() => b.pick('user:42')),
            );
        }
        await new Promise((r) => setImmediate(r));
        assert.ok(ready, 'ready() resolved');
        assert.ok(turns > 1, `taken in over ${turns} turns`);
        assert.equal(b.instances().length, N);
        slowest = Math.min(slowest, turn);
        void b.close();
      }
      assert.ok(slowest < LIMIT_MS, `${strategy}: slowest turn ${slowest.toFixed(2)} ms`);
    });
  }
});

describe(`RingHash at ${N} instances`, () => {
  it(`builds a first ring and changes scale (every point re-placed) in slices of under ${LIMIT_MS} ms, picks going on between them`, () => {
    const clock = new ManualClock();
    const p = new RingHash({ clock });
    const big = Object.freeze(Array.from({ length: 13_107 }, (_, i) => instance(i))); // 80 points each: 2^20
    const over = Object.freeze([...big, instance(13_107)]); // past 2^20: every instance halves to 40
    const small = Object.freeze(big.slice(0, 6_553)); // fits twice over at 80: every instance doubles
    let slowest = 0;
    let slices = 0;
    const drain = (list: readonly ServiceInstance[]) => {
      p.pick(list, 'k');
      while (p.stats().rebuilding) {
        const t = process.cpuUsage();
        clock.advance(1);
        const u = process.cpuUsage(t);
        slowest = Math.max(slowest, (u.user + u.system) / 1000);
        slices++;
        p.pick(list, 'k');
      }
    };
    drain(big);
    assert.equal(p.stats().pointsPerWeight, 80);
    drain(over);
    assert.equal(p.stats().pointsPerWeight, 40);
    drain(small);
    assert.equal(p.stats().pointsPerWeight, 80);
    assert.equal(p.stats().rebuilds, 3);
    assert.ok(slices > 30, `${slices} slices`);
    assert.ok(slowest < LIMIT_MS, `slowest slice ${slowest.toFixed(1)} ms`);
    void p.close();
  });
});
