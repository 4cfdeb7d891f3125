/**
 * An operator's isolation (core's Isolatable) on both breakers: the reason reported wherever the state
 * is (stats, metrics on both paths, the status snapshot, the rejection, the diagnostics events), reset,
 * and precedence over the fleet's pool and a client's cap and panic rule.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import fc from 'fast-check';
import { Registry } from 'prom-client';
import { ManualClock } from '../core/clock.js';
import { BreakerOpenError } from '../core/errors.js';
import { diagnosticsChannels, type BreakerRejectMessage, type BreakerStateMessage } from '../core/diagnostics.js';
import { BulwarkMetrics } from '../metrics/index.js';
import { MemoryRegistry } from '../registry/memory-registry.js';
import type { ServiceInstance } from '../registry/types.js';
import { ResilientClient } from '../client/resilient-client.js';
import { CircuitBreaker } from './circuit-breaker.js';
import { SreBreaker } from './sre-breaker.js';
import { BreakerGroup } from './breaker-group.js';
import type { Breaker } from './types.js';
import { sampleValue } from '../../test/support/scrape.js';

const boom = () => new Error('boom');

/** heard collects the diagnostics messages published while `fn` runs. */
function heard(fn: () => void): { state: BreakerStateMessage[]; reject: BreakerRejectMessage[] } {
  const state: BreakerStateMessage[] = [];
  const reject: BreakerRejectMessage[] = [];
  const onState = (m: unknown) => state.push(m as BreakerStateMessage);
  const onReject = (m: unknown) => reject.push(m as BreakerRejectMessage);
  subscribe(diagnosticsChannels.breakerState, onState);
  subscribe(diagnosticsChannels.breakerReject, onReject);
  try {
    fn();
  } finally {
    unsubscribe(diagnosticsChannels.breakerState, onState);
    unsubscribe(diagnosticsChannels.breakerReject, onReject);
  }
  return { state, reject };
}

/** rejection answers the error admit() throws now. */
function rejection(b: { admit(): unknown }): BreakerOpenError {
  try {
    b.admit();
  } catch (err) {
    assert.ok(err instanceof BreakerOpenError);
    return err;
  }
  assert.fail('admitted');
}

for (const kind of ['CircuitBreaker', 'SreBreaker'] as const) {
  const make = (clock: ManualClock) =>
    kind === 'CircuitBreaker' ? new CircuitBreaker({ name: 'pay', clock, minimumCalls: 5 }) : new SreBreaker({ name: 'pay', clock });

  describe(`${kind}.isolate(reason)`, () => {
    it('refuses every call and shows the reason in stats, the rejection and the diagnostics events; reset closes it', () => {
      const clock = new ManualClock();
      const b = make(clock);
      b.admit().success();
      const h = heard(() => {
        b.isolate('payments DB failover, ticket OPS-42');
        assert.equal(b.tryAdmit(), undefined);
      });
      assert.deepEqual(
        h.state.map((m) => [m.from, m.to, m.reason]),
        [['closed', 'open', 'isolated by an operator: payments DB failover, ticket OPS-42']],
      );
      assert.deepEqual(
        h.reject.map((m) => m.isolatedReason),
        ['payments DB failover, ticket OPS-42'],
      );
      const s = b.stats();
      assert.equal(s.isolated, true);
      assert.equal(s.isolatedReason, 'payments DB failover, ticket OPS-42');
      assert.equal(b.heldOpen, true, 'held open: no cap or panic rule lets a call past');
      assert.match(rejection(b).message, /breaker "pay" is isolated .*: payments DB failover, ticket OPS-42/);
      b.isolate('drill');
      assert.equal(b.stats().isolatedReason, 'drill', 'isolating again replaces the reason');
      assert.match(rejection(b).message, /: drill/);
      assert.equal(b.stats().notPermittedCalls, 3);
      const r = heard(() => b.reset());
      assert.deepEqual(
        r.state.map((m) => [m.from, m.to, m.reason]),
        [['open', 'closed', 'reset']],
      );
      assert.deepEqual([b.stats().isolated, b.stats().isolatedReason, b.heldOpen], [false, undefined, false]);
      assert.notEqual(b.tryAdmit(), undefined);
      assert.throws(() => b.isolate(42 as never), /^TypeError: \w+: isolate's reason must be a string, got 42$/);
    });

    it('exports breaker_isolated with the reason (prom-client and text paths, alone and in a group) and the reason in the status snapshot', async () => {
      const clock = new ManualClock();
      const b = make(clock);
      const group = new BreakerGroup<Breaker>({
        clock,
        factory: (name) => (kind === 'CircuitBreaker' ? new CircuitBreaker({ name, clock }) : new SreBreaker({ name, clock })),
      });
      const member = group.get('pay/1') as CircuitBreaker | SreBreaker;
      const viaProm = new BulwarkMetrics({ registry: new Registry() });
      const viaText = new BulwarkMetrics();
      for (const m of [viaProm, viaText]) {
        m.track(b);
        m.track(group, { name: 'client' });
      }
      for (const m of [viaProm, viaText]) assert.doesNotMatch(await m.metrics(), /^bulwark_breaker_isolated\{/m, 'no series while not isolated');
      b.isolate('say "no" \\ now');
      member.isolate('drain');
      for (const m of [viaProm, viaText]) {
        const text = await m.metrics();
        assert.equal(sampleValue(text, 'bulwark_breaker_isolated{name="pay",reason="say \\"no\\" \\\\ now"}'), 1, text);
        assert.equal(sampleValue(text, 'bulwark_breaker_isolated{name="pay/1",group="client",reason="drain"}'), 1, text);
        const open = kind === 'CircuitBreaker' ? 'forced_open' : 'open';
        assert.equal(sampleValue(text, `bulwark_breaker_state{name="pay",state="${open}"}`), 1);
      }
      const snap = JSON.stringify(viaText.snapshot());
      assert.match(snap, /"isolatedReason":"drain"/);
      b.reset();
      assert.doesNotMatch(await viaText.metrics(), /bulwark_breaker_isolated\{name="pay",reason/);
      await viaProm.close();
      await viaText.close();
      await group.close();
    });
  });
}

describe('SreBreaker isolate and reset (state machine, property)', () => {
  it('drops every call while isolated, whatever the window; reset empties the window and ends the isolation', () => {
    type Step = { op: 'isolate' | 'reset' | 'ok' | 'fail' | 'wait'; ms: number };
    const step = fc.record({ op: fc.constantFrom<Step['op']>('isolate', 'reset', 'ok', 'ok', 'fail', 'wait'), ms: fc.integer({ min: 0, max: 3_000 }) });
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 60 }), (steps) => {
        const clock = new ManualClock();
        const b = new SreBreaker({ clock, windowMs: 1_000, buckets: 4, random: () => 0.999 });
        let isolated = false;
        let failuresSinceReset = 0;
        for (const s of steps) {
          if (s.op === 'isolate') {
            b.isolate(`r${s.ms}`);
            isolated = true;
          } else if (s.op === 'reset') {
            b.reset();
            isolated = false;
            failuresSinceReset = 0;
          } else if (s.op === 'wait') clock.advance(s.ms);
          else {
            const t = b.tryAdmit();
            if (isolated) assert.equal(t, undefined, 'an isolated breaker admits nothing, the force pass included');
            else if (failuresSinceReset === 0) assert.notEqual(t, undefined, 'nothing failed since the reset: nothing is dropped');
            if (t !== undefined) {
              if (s.op === 'ok') t.success();
              else {
                t.failure(boom());
                failuresSinceReset++;
              }
            }
          }
          assert.equal(b.isolated, isolated);
          assert.equal(b.stats().isolated, isolated);
          assert.equal(b.stats().dropRatio === 1 || !isolated, true);
        }
      }),
      { numRuns: 200 },
    );
  });

  it("an isolate beats the fleet's pool, and reset clears local state only: the pool still counts", () => {
    const clock = new ManualClock();
    const b = new SreBreaker({ clock, random: () => 0.5, forcePassMs: 1e9 });
    b.isolate('fleet drill');
    b.fleetPool({ requests: 10, accepts: 10 }); // a healthy fleet does not end an isolation
    assert.equal(b.tryAdmit(), undefined);
    b.fleetPool({ requests: 1_000, accepts: 0 }); // a failing fleet
    b.reset();
    assert.equal(b.isolated, false);
    b.tryAdmit()?.release(); // the first decision under pressure passes (force pass)
    assert.equal(b.tryAdmit(), undefined, 'the fleet pool still makes it drop after a reset');
    b.fleetPool(undefined);
    assert.notEqual(b.tryAdmit(), undefined);
  });
});

describe("an isolated SreBreaker against a client's cap and panic rule", () => {
  it('never lets a call reach an instance whose SreBreaker an operator isolated, though the other instance is dead (panic)', async () => {
    const clock = new ManualClock();
    const registry = new MemoryRegistry();
    for (const [i, id] of ['pay-1', 'pay-2'].entries()) await registry.register({ id, name: 'payments', address: `127.0.0.1:${9000 + i}` });
    const breakers = new BreakerGroup({ clock, factory: (name) => new SreBreaker({ name, clock }) });
    const client = new ResilientClient({ registry, clock, breakers });
    const calls = { 'pay-1': 0, 'pay-2': 0 } as Record<string, number>;
    const task = async (inst: ServiceInstance): Promise<string> => {
      calls[inst.id]!++;
      if (inst.id === 'pay-1') throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
      return inst.id;
    };
    const call = async () => {
      const p = client.call('payments', task, { fallback: () => 'fallback' });
      await clock.advanceAsync(50);
      return p;
    };
    for (let i = 0; i < 10; i++) await call();
    const pay2 = breakers.get('payments/pay-2') as SreBreaker;
    pay2.isolate('drain pay-2');
    const before = calls['pay-2'];
    let answered = 0;
    for (let i = 0; i < 100; i++) if ((await call()) !== 'fallback') answered++;
    assert.equal(calls['pay-2'], before, 'the isolated instance was never called');
    assert.equal(answered, 0);
    pay2.reset();
    for (let i = 0; i < 20; i++) if ((await call()) !== 'fallback') answered++;
    assert.ok(answered > 0, 'after reset it serves again');
    await client.close();
    await registry.close();
    await breakers.close();
  });

  it('keeps an isolated SreBreaker instance out of picks while it stays isolated, instead of picking it and being refused on each call', async () => {
    const clock = new ManualClock();
    const registry = new MemoryRegistry();
    for (const [i, id] of ['pay-1', 'pay-2', 'pay-3'].entries()) await registry.register({ id, name: 'payments', address: `127.0.0.1:${9000 + i}` });
    const breakers = new BreakerGroup({ clock, factory: (name) => new SreBreaker({ name, clock }) });
    const client = new ResilientClient({ registry, clock, breakers, balancer: { strategy: 'round-robin' } });
    const call = async () => {
      const p = client.call('payments', async (inst: ServiceInstance) => inst.id, { fallback: () => 'fallback' });
      await clock.advanceAsync(10);
      return p;
    };
    for (let i = 0; i < 6; i++) await call();
    const pay2 = breakers.get('payments/pay-2') as SreBreaker;
    pay2.isolate('drain pay-2');
    const refusedBefore = pay2.stats().notPermittedCalls;
    const answers: string[] = [];
    for (let i = 0; i < 60; i++) answers.push(await call());
    assert.ok(!answers.includes('pay-2') && !answers.includes('fallback'));
    const refused = pay2.stats().notPermittedCalls - refusedBefore;
    assert.ok(refused <= 1, `the isolated breaker was picked and refused ${refused} times in 60 calls`);
    pay2.reset();
    for (let i = 0; i < 60; i++) answers.push(await call());
    assert.ok(answers.slice(60).includes('pay-2'), 'back in rotation after reset');
    await client.close();
    await registry.close();
    await breakers.close();
  });
});
