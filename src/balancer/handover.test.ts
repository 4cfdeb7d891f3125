import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../core/clock.js';
import type { ServiceInstance } from '../registry/types.js';
import { Balancer } from './balancer.js';
import type { StrategyName } from './types.js';
import { FakeRegistry, inst, instances, settle } from './test-fixtures.js';

/**
 * Lists of thousands are taken in over timer turns (ManualClock here: no test sleeps). These tests
 * check what happens around that: registry events arriving meanwhile, and a first list.
 */
const strategies: StrategyName[] = ['round-robin', 'random', 'weighted-round-robin', 'ring-hash', 'p2c', 'least-request'];
const N = 10_000;

/** turnUntil advances `clock` one turn at a time (letting promise callbacks run) until `done()`. */
async function turnUntil(clock: ManualClock, done: () => boolean, each?: () => void): Promise<number> {
  let turns = 0;
  for (; !done(); turns++) {
    assert.ok(turns < 5_000, 'it completes');
    await clock.advanceAsync(1);
    await settle();
    each?.();
  }
  return turns;
}

describe('Balancer taking a list of 10 000 in over timer turns', () => {
  for (const strategy of strategies) {
    it(`${strategy}: registry events that arrive meanwhile (one added, one removed, one ejected) are all applied, picks valid at every turn`, async () => {
      const reg = new FakeRegistry();
      const clock = new ManualClock();
      const a = instances(N, 'a');
      for (const x of a) reg.byId.set(x.id, x);
      const b = new Balancer({ registry: reg, service: 'svc', strategy, clock, random: () => 0, outlier: { consecutiveFailures: 1, maxEjectionPercent: 100 } });
      let ready = false;
      void b.ready().then(() => (ready = true));
      await turnUntil(clock, () => ready);
      assert.equal(b.instances().length, N);
      // The registry's list changes in 5 000 instances without events; the watch breaks, so the balancer lists again.
      const next = [...a.slice(0, N / 2), ...instances(N / 2, 'b')];
      reg.byId.clear();
      for (const x of next) reg.byId.set(x.id, x);
      reg.emit(new Error('watch broken'));
      const lists = reg.lists;
      await turnUntil(clock, () => reg.lists > lists);
      assert.equal(b.instances().at(-1)!.id, `a${N - 1}`, 'the new list is being taken in: the previous one answers');
      // Meanwhile: one instance registers, one deregisters, one (in both lists) is ejected.
      const x = inst('x');
      await reg.register(x);
      await reg.deregister(next[N - 1]!);
      await settle();
      const victim = a[0]!;
      b.report(b.pick(), { ok: true, latencyMs: 1 });
      b.report(victim, { ok: false, latencyMs: 1 });
      assert.equal(b.stats().ejected, 1);
      // Every turn until it is all in: a pick is an instance of the previous or the new list, never
      // the ejected one, nor the one deregistered unless the previous list still has it.
      const before = new Set(a.map((i) => i.id));
      const after = new Set([...next.slice(0, -1), x].map((i) => i.id));
      const check = () => {
        for (let k = 0; k < 5; k++) {
          const p = b.pick(`user:${k}`);
          assert.ok(before.has(p.id) || after.has(p.id), `${p.id} is listed`);
          assert.notEqual(p.id, victim.id, 'the ejected instance is not picked');
          b.report(p, { ok: true, latencyMs: 1 });
        }
      };
      check();
      const expected = [...next.slice(0, -1), x].map((i) => i.id).sort();
      const listed = () =>
        b
          .instances()
          .map((i: ServiceInstance) => i.id)
          .sort();
      await turnUntil(clock, () => clock.pendingTimers === 0 || listed().join() === expected.join(), check);
      await turnUntil(clock, () => clock.pendingTimers === 0, check);
      assert.deepEqual(listed(), expected, 'the list after the events');
      assert.equal(b.stats().ejected, 1, 'the ejection stands');
      assert.ok(!b.healthy().some((i) => i.id === victim.id));
      for (let k = 0; k < 50; k++) {
        const p = b.pick(`key:${k}`);
        assert.ok(after.has(p.id) && p.id !== victim.id, `${p.id} is in the new list and healthy`);
        b.report(p, { ok: true, latencyMs: 1 });
      }
      await b.close();
    });
  }

  it('resolves ready() once a first list of 10 000 is in, over timer turns; a pick before then takes it in at once', async () => {
    for (const early of [false, true]) {
      const clock = new ManualClock();
      const list = instances(N, 'a');
      const b = new Balancer({ instances: list, strategy: 'ring-hash', clock });
      let ready = false;
      void b.ready().then(() => (ready = true));
      await settle();
      assert.equal(ready, false, 'not yet: the list is being taken in');
      if (early) {
        assert.ok(list.includes(b.pick('k')), 'an early pick is over the whole list');
        await settle();
        assert.equal(ready, true);
        assert.equal(b.instances().length, N);
      } else {
        const turns = await turnUntil(clock, () => ready);
        assert.ok(turns > 5, `${turns} turns`);
        assert.equal(b.instances().length, N);
        assert.ok(list.includes(b.pick('k')));
      }
      await b.close();
    }
  });
});
