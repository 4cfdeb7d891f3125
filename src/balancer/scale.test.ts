import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../core/clock.js';
import type { ServiceInstance } from '../registry/types.js';
import { Balancer } from './balancer.js';
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
      const victim = list[N >> 1]!;
      const costs = {
        join: fastest(() => (b.update(grown), b.pick(key), b.update(list), b.pick(key))) / 2,
        eject: fastest(() => {
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
