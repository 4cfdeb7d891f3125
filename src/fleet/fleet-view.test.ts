import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../core/clock.js';
import { CircuitBreaker } from '../breaker/circuit-breaker.js';
import { SreBreaker } from '../breaker/sre-breaker.js';
import { BreakerGroup } from '../breaker/breaker-group.js';
import { MemoryFleetStore } from './memory-store.js';

const boom = () => Promise.reject(new Error('down'));
const fine = () => Promise.resolve('ok');

/** A fleet of `n` processes on one memory store and one ManualClock, each with a fleet-aware CircuitBreaker. */
function fleetOf(n: number, o: { halfOpenCalls?: number; quorum?: number; minimumCalls?: number } = {}) {
  const clock = new ManualClock();
  const first = new MemoryFleetStore({ clock, callerId: 'p0' });
  const stores = [first, ...Array.from({ length: n - 1 }, (_, i) => first.peer({ callerId: `p${i + 1}` }))];
  const breakers = stores.map(
    (store) =>
      new CircuitBreaker({
        name: 'payments',
        clock,
        minimumCalls: o.minimumCalls ?? 6,
        windowCalls: 50,
        openMs: 1_000,
        halfOpenCalls: o.halfOpenCalls ?? 2,
        fleet: { store, publishMs: 100, ttlMs: 3_000, ...(o.quorum === undefined ? {} : { quorum: o.quorum }) },
      }),
  );
  return { clock, stores, breakers };
}

async function run(b: CircuitBreaker, fn: () => Promise<string>, times: number): Promise<{ ok: number; failed: number; refused: number }> {
  const r = { ok: 0, failed: 0, refused: 0 };
  for (let i = 0; i < times; i++) {
    try {
      await b.execute(fn);
      r.ok++;
    } catch (err) {
      if ((err as { code?: string }).code === 'ERR_BREAKER_OPEN') r.refused++;
      else r.failed++;
    }
  }
  return r;
}

describe('fleet view on the memory store', () => {
  it('opens every process on pooled evidence: 3 of 6 failing 2 calls each opens all 6, the quiet ones with reason fleet', async () => {
    const { clock, breakers } = fleetOf(6);
    await clock.advanceAsync(100);
    for (const b of breakers.slice(0, 2)) await run(b, boom, 2);
    assert.ok(
      breakers.every((b) => b.state === 'closed'),
      'no process has minimumCalls 6 of its own, and 4 pooled calls are under it',
    );
    await run(breakers[2]!, boom, 2);
    // No tick: each window was published the moment it became a failing reporter (see the test below).
    for (const b of breakers) {
      const s = b.stats();
      assert.equal(s.state, 'open');
      assert.equal(s.reason, 'fleet');
      assert.equal(s.fleet?.holding, true);
      assert.equal(s.fleet?.reporters, 3);
      assert.equal(s.fleet?.pooledCalls, 6);
    }
    assert.match(breakers[5]!.lastRejection().message, /held open by its fleet: fleet: 3 of 3 reporters failing/);
    assert.equal(breakers[5]!.heldOpen, true);
    assert.equal(breakers[5]!.admitAnyway(), undefined, 'cap and panic never bypass a fleet hold');
    assert.equal(breakers[5]!.state, 'open');
    await clock.advanceAsync(5_000);
    assert.equal(breakers[5]!.state, 'open', 'no local half-open while the fleet holds');
  });

  it('pools by the rule the breakers run now: a reconfigured minimumCalls reaches the fleet view', async () => {
    const { clock, breakers } = fleetOf(6, { minimumCalls: 20 });
    await clock.advanceAsync(100);
    for (const b of breakers.slice(0, 3)) await run(b, boom, 2);
    await clock.advanceAsync(100);
    assert.ok(
      breakers.every((b) => b.state === 'closed'),
      '6 pooled failures are under minimumCalls 20',
    );
    for (const b of breakers) b.reconfigure({ minimumCalls: 6 });
    await clock.advanceAsync(200);
    assert.ok(
      breakers.every((b) => b.state === 'open' && b.stats().reason === 'fleet'),
      'the same 6 pooled failures open the fleet under minimumCalls 6',
    );
  });

  it('poisoning: one process whose calls all fail opens itself only; the others never refuse a call', async () => {
    const { clock, breakers } = fleetOf(5);
    await clock.advanceAsync(100);
    await run(breakers[0]!, boom, 20);
    for (let t = 0; t < 20; t++) {
      for (const b of breakers.slice(1)) assert.equal((await run(b, fine, 2)).refused, 0);
      await clock.advanceAsync(100);
    }
    assert.equal(breakers[0]!.stats().reason, 'local');
    for (const b of breakers.slice(1)) assert.equal(b.stats().state, 'closed');
    assert.equal(breakers[1]!.stats().fleet?.failingReporters, 1);
    assert.equal(breakers[1]!.stats().fleet?.quorum, 3);
  });

  it('quorum 1: one process alone opens the others', async () => {
    const { clock, breakers } = fleetOf(3, { quorum: 1 });
    await clock.advanceAsync(100);
    await run(breakers[0]!, boom, 6);
    await clock.advanceAsync(100);
    assert.deepEqual(
      breakers.map((b) => b.stats().reason),
      ['fleet', 'fleet', 'fleet'],
    );
  });

  it('probes: exactly halfOpenCalls per openMs across the fleet; a failed period stays open, a good one closes everyone', async () => {
    const { clock, breakers } = fleetOf(4, { halfOpenCalls: 2 });
    await clock.advanceAsync(100);
    for (const b of breakers) await run(b, boom, 2);
    await clock.advanceAsync(100);
    assert.ok(breakers.every((b) => b.state === 'open'));
    // Every process calls the dependency every 50 ms; note when a call got through.
    const through: number[] = [];
    const count = (fn: () => Promise<string>) => () => {
      through.push(clock.now());
      return fn();
    };
    for (let t = 0; t < 70; t++) {
      for (const b of breakers) await run(b, count(boom), 1);
      await clock.advanceAsync(50);
    }
    // The probes come in periods of openMs: 2 failing probes each, none before openMs after the hold (at
    // 100, the last process's second failure, published at once).
    assert.ok(through[0]! >= 1_100, `first probe at ${through[0]}`);
    const periods = [0, 0, 0];
    for (const t of through) periods[Math.floor((t - through[0]!) / 1_000)]!++;
    assert.deepEqual(periods, [2, 2, 2], `probes at ${through.join(', ')}`);
    assert.ok(breakers.every((b) => b.stats().reason === 'fleet'));
    through.length = 0;
    let beforeClose = -1;
    for (let t = 0; t < 40 && beforeClose < 0; t++) {
      for (const b of breakers) {
        await run(b, count(fine), 1);
        if (beforeClose < 0 && breakers.every((x) => x.state === 'closed')) beforeClose = through.length;
      }
      await clock.advanceAsync(50);
    }
    assert.equal(beforeClose, 2, 'the two probes of one period, and every process closed at once');
    assert.ok(
      breakers.every((b) => b.state === 'closed'),
      'the fleet closed when a period’s probes succeeded',
    );
    assert.ok(breakers.every((b) => b.stats().fleet?.generation === 1));
    assert.ok(
      breakers.every((b) => b.stats().fleet?.reporters === 0 || b.stats().fleet?.failingReporters === 0),
      'the old evidence no longer counts',
    );
  });

  it('publishes a window the moment it becomes a failing reporter, not at the next tick; other failures wait for the tick', async () => {
    const { clock, stores, breakers } = fleetOf(3, { minimumCalls: 4 });
    const sent: string[] = [];
    const publish = stores[0]!.publish.bind(stores[0]!);
    stores[0]!.publish = (key, r, ttl) => {
      sent.push(`${r.calls}/${r.failures}`);
      return publish(key, r, ttl);
    };
    await clock.advanceAsync(100);
    await run(breakers[0]!, boom, 1);
    assert.deepEqual(sent, [], 'one call is under minReports 2: not a reporter yet');
    await run(breakers[0]!, boom, 1);
    assert.deepEqual(sent, ['2/2'], 'the second failure makes a failing reporter: published at once, the clock still at 100');
    await run(breakers[0]!, boom, 1);
    assert.deepEqual(sent, ['2/2'], 'more failures of a failing reporter wait for the tick');
    await run(breakers[1]!, boom, 2);
    assert.ok(
      breakers.every((b) => b.state === 'open' && b.stats().reason === 'fleet'),
      'two failing reporters, 4 pooled calls: all three open with no tick in between',
    );
    await clock.advanceAsync(100);
    assert.deepEqual(sent, ['2/2', '3/3'], 'the tick publishes the rest');
  });

  it('a failing window published at once: at most one such publish per publishMs and one in flight, the next on its answer', async () => {
    const { clock, stores, breakers } = fleetOf(2, { minimumCalls: 50 });
    const sent: string[] = [];
    let answer: (() => void) | undefined;
    const publish = stores[0]!.publish.bind(stores[0]!);
    stores[0]!.publish = (key, r, ttl) => {
      sent.push(`${r.calls}/${r.failures}`);
      return new Promise<void>((resolve) => (answer = resolve)).then(() => publish(key, r, ttl));
    };
    await clock.advanceAsync(100);
    await run(breakers[0]!, fine, 2);
    await clock.advanceAsync(100);
    assert.deepEqual(sent, ['2/0'], 'a healthy window, published at the tick: its answer has not come');
    await run(breakers[0]!, boom, 2);
    assert.deepEqual(sent, ['2/0'], 'one publish in flight: the failing window waits for its answer');
    answer!();
    await clock.advanceAsync(0);
    assert.deepEqual(sent, ['2/0', '4/2'], 'sent on the answer, not at the next tick');
    answer!();
    await clock.advanceAsync(0);
    // Flapping around the threshold (50 %): one success, one failure, … — within one publishMs, nothing more.
    for (let i = 0; i < 10; i++) {
      await run(breakers[0]!, fine, 1);
      await clock.advanceAsync(5);
      answer?.();
      await run(breakers[0]!, boom, 1);
      await clock.advanceAsync(5);
      answer?.();
    }
    assert.ok(sent.length <= 2 + 2, `at most one publish out of the tick per publishMs, beside the tick's: ${sent.join(' ')}`);
  });

  it('publishes no window that counts in no rule (fewer than minReports calls), but one that replaces a report that counted', async () => {
    const { clock, stores, breakers } = fleetOf(2, { minimumCalls: 4 });
    const sent: string[] = [];
    const publish = stores[0]!.publish.bind(stores[0]!);
    stores[0]!.publish = (key, r, ttl) => {
      sent.push(`${r.calls}/${r.failures}`);
      return publish(key, r, ttl);
    };
    await clock.advanceAsync(5_000); // past a heartbeat or two
    await run(breakers[0]!, fine, 1);
    await clock.advanceAsync(200);
    assert.deepEqual(sent, [], 'an empty window, and one of a single call, are not written');
    await run(breakers[0]!, fine, 1);
    await clock.advanceAsync(200);
    assert.deepEqual(sent, ['2/0'], 'the first report that counts is the first write');
    assert.equal(breakers[1]!.stats().fleet?.reporters, 1);
    breakers[0]!.reset(); // a fresh window: 0 calls, which replaces the report that counted
    await clock.advanceAsync(200);
    assert.deepEqual(sent, ['2/0', '0/0']);
    assert.equal(breakers[1]!.stats().fleet?.reporters, 0);
  });

  it('a failed publish backs off (publishMs doubled per failure, up to 1 s) instead of writing at every tick', async () => {
    const { clock, stores, breakers } = fleetOf(2, { minimumCalls: 4 });
    await clock.advanceAsync(100);
    let attempts = 0;
    const publish = stores[0]!.publish.bind(stores[0]!);
    stores[0]!.publish = (key, r, ttl) => {
      attempts++;
      return publish(key, r, ttl);
    };
    stores[0]!.setDown(true);
    for (let i = 0; i < 50; i++) {
      await run(breakers[0]!, fine, 1); // the window changes all the time: a publish is due at every tick
      await clock.advanceAsync(100);
    }
    // 5 s at publishMs 100: after failures at 0, then waits of 100, 200, 400, 800, 1 000, 1 000 … ms: about 8 attempts, not 50.
    assert.ok(attempts >= 5 && attempts <= 10, `publish attempts in 5 s while the store is down: ${attempts}`);
    stores[0]!.setDown(false);
    await clock.advanceAsync(1_200);
    assert.equal(breakers[1]!.stats().fleet?.reporters, 1, 'published again within 1 s of the store answering');
  });

  it('TTL: a process that stops publishing drops out of the quorum after ttlMs', async () => {
    const { clock, stores, breakers } = fleetOf(3, { minimumCalls: 4 });
    await clock.advanceAsync(100);
    await run(breakers[0]!, fine, 5);
    await run(breakers[1]!, fine, 5);
    await clock.advanceAsync(200);
    assert.equal(breakers[2]!.stats().fleet?.reporters, 2);
    stores[1]!.setDown(true); // it can no longer publish, as if killed
    // Its last heartbeat was at most ttlMs / 3 (1 000 ms) ago: it counts for at least 2 000 ms more, at most 3 000.
    await clock.advanceAsync(1_900);
    assert.equal(breakers[2]!.stats().fleet?.reporters, 2, 'still within its TTL');
    await clock.advanceAsync(1_200);
    assert.equal(breakers[2]!.stats().fleet?.reporters, 1);
  });

  it('the store failing fails no call: a held process goes back to its own open period, and the view returns with the store', async () => {
    const { clock, stores, breakers } = fleetOf(3);
    await clock.advanceAsync(100);
    for (const b of breakers) await run(b, boom, 2);
    await clock.advanceAsync(100);
    assert.equal(breakers[0]!.stats().reason, 'fleet');
    stores[0]!.setDown(true);
    await clock.advanceAsync(100);
    const s = breakers[0]!.stats();
    assert.equal(s.fleet?.available, false);
    assert.equal(s.reason, 'local');
    await clock.advanceAsync(1_000);
    assert.equal(breakers[0]!.state, 'half-open', 'its own probes, as without a fleet');
    assert.equal((await run(breakers[0]!, fine, 2)).failed, 0);
    stores[0]!.setDown(false);
    await clock.advanceAsync(200);
    assert.equal(breakers[0]!.stats().fleet?.available, true);
  });

  it("an operator's isolate outranks the fleet, and reset clears local state only", async () => {
    const { clock, breakers } = fleetOf(3, { halfOpenCalls: 1 });
    await clock.advanceAsync(100);
    for (const b of breakers) await run(b, boom, 2);
    breakers[0]!.isolate();
    await clock.advanceAsync(100);
    assert.equal(breakers[0]!.stats().reason, 'isolated');
    assert.equal(breakers[1]!.stats().reason, 'fleet');
    breakers[1]!.reset();
    assert.equal(breakers[1]!.state, 'closed');
    await clock.advanceAsync(100);
    assert.equal(breakers[1]!.stats().reason, 'fleet', 'the fleet still holds the dependency down');
    await clock.advanceAsync(1_000);
    for (let t = 0; t < 10; t++) {
      for (const b of breakers) await run(b, fine, 1);
      await clock.advanceAsync(100);
    }
    assert.equal(breakers[2]!.state, 'closed', JSON.stringify(breakers.map((b) => b.stats())));
    assert.equal(breakers[0]!.stats().reason, 'isolated', 'the fleet closing does not end an isolation');
  });

  it('SreBreaker: a process without failures of its own drops calls once a quorum of the fleet fails', async () => {
    const clock = new ManualClock();
    const s0 = new MemoryFleetStore({ clock, callerId: 'a' });
    const stores = [s0, s0.peer({ callerId: 'b' }), s0.peer({ callerId: 'c' })];
    const bs = stores.map((store) => new SreBreaker({ name: 'inventory', clock, random: () => 0.99, fleet: { store } }));
    await clock.advanceAsync(100);
    for (const b of bs.slice(0, 2)) for (let i = 0; i < 30; i++) await b.execute(boom).catch(() => undefined);
    await bs[2]!.execute(fine);
    assert.equal(bs[2]!.stats().dropRatio, 0);
    await clock.advanceAsync(200);
    const s = bs[2]!.stats();
    assert.equal(s.fleet?.failingReporters, 2);
    assert.ok(s.dropRatio > 0.5, `dropRatio ${s.dropRatio}`);
  });

  it('BreakerGroup: fleet makes each breaker fleet-aware under its own key', async () => {
    const clock = new ManualClock();
    const store = new MemoryFleetStore({ clock });
    const group = new BreakerGroup({ clock, factory: (name) => new CircuitBreaker({ name, clock }), fleet: { store, key: 'svc' } });
    const b = group.get('GET /a') as CircuitBreaker;
    await clock.advanceAsync(100);
    assert.equal(b.stats().fleet?.available, true);
    assert.throws(() => new BreakerGroup({ clock, fleet: { store: {} as never } }), /BreakerGroup: fleet.store must be a fleet store/);
    // An evicted breaker leaves its fleet: its report goes, and it is a plain breaker from then on.
    const small = new BreakerGroup({ clock, factory: (name) => new CircuitBreaker({ name, clock }), fleet: { store }, idleMs: 1_000, maxBreakers: 16 });
    const idle = small.get('idle') as CircuitBreaker;
    await run(idle, fine, 2); // a report counts (and is published) from minReports calls on
    await clock.advanceAsync(200);
    assert.equal((await store.snapshot('idle')).reports.length, 1);
    await clock.advanceAsync(2_000);
    small.get('other');
    await clock.advanceAsync(0);
    assert.equal(small.has('idle'), false, 'evicted');
    assert.equal(idle.stats().fleet, undefined);
    assert.equal((await store.snapshot('idle')).reports.length, 0);
    await small.close();
    assert.throws(() => new CircuitBreaker({ fleet: { store: undefined as never } }), /CircuitBreaker: fleet.store must be a fleet store/);
    assert.throws(() => new CircuitBreaker({ fleet: { store, minReports: 0 } }), /fleet: minReports/);
    await group.close();
  });
});

describe('probe permits on the memory store', () => {
  it('name their period by its start: every answer of one period says the same start, and the next period starts periodMs or more later', async () => {
    const clock = new ManualClock(5_000);
    const a = new MemoryFleetStore({ clock, callerId: 'a' });
    const b = a.peer({ callerId: 'b' });
    const first = [await a.takePermit('k', 0, 2, 1_000), await b.takePermit('k', 0, 2, 1_000), await a.takePermit('k', 0, 2, 1_000)];
    assert.deepEqual(
      first.map((x) => [x.granted, x.periodStart, x.periodLeftMs]),
      [
        [true, 5_000, 1_000],
        [true, 5_000, 1_000],
        [false, 5_000, 1_000],
      ],
    );
    await clock.advanceAsync(999);
    assert.deepEqual(await b.takePermit('k', 0, 2, 1_000), { granted: false, periodLeftMs: 1, periodStart: 5_000 });
    await clock.advanceAsync(1);
    assert.deepEqual(await b.takePermit('k', 0, 2, 1_000), { granted: true, periodLeftMs: 1_000, periodStart: 6_000 });
  });
});

describe('a fleet hold in metrics and status', () => {
  it('exports state fleet_open (prom-client and text paths) and reason fleet in the status snapshot', async () => {
    const { BulwarkMetrics } = await import('../metrics/index.js');
    const { Registry } = await import('prom-client');
    const { clock, breakers } = fleetOf(3);
    const viaProm = new BulwarkMetrics({ registry: new Registry() });
    const viaText = new BulwarkMetrics();
    for (const m of [viaProm, viaText]) m.track(breakers[2]!);
    const states = async (m: InstanceType<typeof BulwarkMetrics>) =>
      (await m.metrics())
        .split('\n')
        .filter((l) => l.startsWith('bulwark_breaker_state{') && l.endsWith(' 1'))
        .map((l) => /state="([a-z_]+)"/.exec(l)![1]);
    await clock.advanceAsync(100);
    assert.deepEqual(await states(viaProm), ['closed']);
    assert.deepEqual(await states(viaText), ['closed']);
    for (const b of breakers.slice(0, 2)) await run(b, boom, 3);
    await clock.advanceAsync(100);
    assert.deepEqual(await states(viaProm), ['fleet_open']);
    assert.deepEqual(await states(viaText), ['fleet_open']);
    const snap = JSON.stringify(viaText.snapshot());
    assert.match(snap, /"reason":"fleet"/);
    assert.match(snap, /"holding":true/);
  });
});

describe('a fleet hold in ResilientClient', () => {
  it('is a forced hold: with pay-1 dead and pay-2 held open by its fleet, the cap and panic never call pay-2', async () => {
    const { MemoryRegistry } = await import('../registry/memory-registry.js');
    const { ResilientClient } = await import('../client/resilient-client.js');
    const { Balancer } = await import('../balancer/balancer.js');
    const clock = new ManualClock();
    const store = new MemoryFleetStore({ clock, callerId: 'client' });
    const registry = new MemoryRegistry();
    for (const [i, id] of ['pay-1', 'pay-2'].entries()) await registry.register({ id, name: 'payments', address: `127.0.0.1:${9000 + i}` });
    const breakers = new BreakerGroup({ clock, factory: (name) => new CircuitBreaker({ name, clock }), fleet: { store } });
    const client = new ResilientClient({ registry, clock, breakers });
    const sim = { pay1Down: false, pay2Calls: 0 };
    const call = async () => {
      const p = client.call(
        'payments',
        async (inst) => {
          if (inst.id === 'pay-2') sim.pay2Calls++;
          else if (sim.pay1Down) throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
          return inst.id;
        },
        { fallback: () => 'fallback' },
      );
      await clock.advanceAsync(50);
      return p;
    };
    for (let i = 0; i < 20; i++) await call();
    const s = await client.service('payments');
    const pay2 = s.instanceBreaker(s.instances().find((i) => i.id === 'pay-2')!) as CircuitBreaker; // made now if no call went there yet
    // Two other processes of the fleet see pay-2 fail: 2 reporters, 10 pooled failures.
    const others = ['a', 'b'].map((id) => new CircuitBreaker({ name: 'payments/pay-2', clock, fleet: { store: store.peer({ callerId: id }) } }));
    for (const b of others) await run(b, boom, 5);
    await clock.advanceAsync(200);
    assert.equal(pay2.stats().reason, 'fleet', JSON.stringify(pay2.stats()));
    sim.pay1Down = true;
    const before = sim.pay2Calls;
    for (let i = 0; i < 50; i++) await call();
    assert.equal(sim.pay2Calls, before, 'the fleet-held instance was never called');
    assert.equal(pay2.stats().bypassedCalls, 0);
    assert.ok(s.balancer instanceof Balancer);
    assert.equal(s.balancer.stats().forced, 1);
    await client.close();
    await Promise.all(others.map((b) => b.close()));
  });
  it("the store failing ends a fleet hold visibly: the breaker emits open → open and the client's balancer no longer holds the instance as forced", async () => {
    const { MemoryRegistry } = await import('../registry/memory-registry.js');
    const { ResilientClient } = await import('../client/resilient-client.js');
    const { Balancer } = await import('../balancer/balancer.js');
    const clock = new ManualClock();
    const store = new MemoryFleetStore({ clock, callerId: 'client' });
    const registry = new MemoryRegistry();
    for (const [i, id] of ['pay-1', 'pay-2'].entries()) await registry.register({ id, name: 'payments', address: `127.0.0.1:${9000 + i}` });
    const breakers = new BreakerGroup({ clock, factory: (name) => new CircuitBreaker({ name, clock, openMs: 5_000 }), fleet: { store } });
    const client = new ResilientClient({ registry, clock, breakers });
    for (let i = 0; i < 4; i++) {
      const p = client.call('payments', async (inst) => inst.id);
      await clock.advanceAsync(50);
      await p;
    }
    const s = await client.service('payments');
    const pay2 = s.instanceBreaker(s.instances().find((i) => i.id === 'pay-2')!) as CircuitBreaker;
    const changes: string[] = [];
    pay2.onStateChange((c) => changes.push(`${c.from}→${c.to}: ${c.reason}`));
    const others = ['a', 'b'].map((id) => new CircuitBreaker({ name: 'payments/pay-2', clock, fleet: { store: store.peer({ callerId: id }) } }));
    for (const b of others) await run(b, boom, 5);
    await clock.advanceAsync(200);
    assert.equal(pay2.stats().reason, 'fleet');
    assert.ok(s.balancer instanceof Balancer);
    assert.equal(s.balancer.stats().forced, 1, 'held as forced while the fleet holds it');
    store.setDown(true);
    await clock.advanceAsync(100);
    assert.equal(pay2.stats().fleet?.available, false);
    assert.equal(pay2.heldOpen, false);
    assert.equal(pay2.state, 'open', 'open on its own terms for openMs');
    assert.deepEqual(changes.slice(1), ['open→open: fleet store unavailable: open on its own terms'], 'the end of the hold is a state change');
    assert.equal(s.balancer.stats().forced, 0, 'no longer forced out: an evidence hold, which the cap and panic may override, as without a fleet');
    await client.close();
    await Promise.all(others.map((b) => b.close()));
  });
});
