/**
 * The bulwark load-balancing policy on real grpc-js servers over loopback (a MemoryRegistry behind a
 * RegistryCache): P2C against grpc-js's round_robin with one slow server, an instance breaker that
 * opens on UNAVAILABLE and recovers, outlier ejection and return, retries on another instance within
 * the retry budget, NOT_SERVING leaving rotation, ring hash by a metadata header, and an unknown
 * service failing fast.
 */
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { credentials, Metadata, status, type Server } from '@grpc/grpc-js';
import { GrpcDiscovery, GrpcHealth } from '../src/grpc/index.js';
import { MemoryRegistry } from '../src/registry/memory-registry.js';
import { RegistryCache } from '../src/registry/registry-cache.js';
import { waitFor } from './support/servers.js';
import { GreeterClientCtor, sayHello, startGreeter } from './support/grpc-greeter.js';
import { percentile, startLoad } from './support/grpc-load.js';

const insecure = credentials.createInsecure();

async function fleet(behaviours: Record<string, () => { delayMs?: number; fail?: number }>, withHealth = false) {
  const registry = new MemoryRegistry();
  const cache = new RegistryCache(registry);
  const servers: Server[] = [];
  const health = new Map<string, GrpcHealth>();
  for (const [id, b] of Object.entries(behaviours)) {
    const h = new GrpcHealth();
    const s = await startGreeter(id, {}, b, withHealth ? (srv) => h.addTo(srv) : undefined);
    servers.push(s.server);
    health.set(id, h);
    await registry.register({ id, name: 'greeter', address: s.address });
  }
  after(async () => {
    for (const s of servers) s.forceShutdown();
    await cache.close();
    await registry.close();
  });
  return { registry, cache, health };
}

describe('bulwark policy', () => {
  it('P2C sends < 5 % of calls to a 200 ms server where round_robin sends a third', async () => {
    const { cache } = await fleet({ fast1: () => ({ delayMs: 2 }), fast2: () => ({ delayMs: 2 }), slow: () => ({ delayMs: 200 }) });
    const d = new GrpcDiscovery({ registry: cache, health: false });
    after(() => d.close());
    const results: Record<string, { share: number; p50: number; p99: number; calls: number }> = {};
    for (const policy of ['bulwark', 'round_robin'] as const) {
      const client = new GreeterClientCtor('bulwark:///greeter', insecure, d.channelOptions({ policy }));
      // warm up: connect to all three
      await waitFor('three instances connected', async () => {
        await sayHello(client, { name: 'w' });
        return policy === 'round_robin' || d.stats().balancers.some((b) => b.instances.filter((i) => i.connectivity === 'READY').length === 3);
      });
      // Two callers, so that at most one other call is in flight when P2C compares: the fast servers share
      // this process's event loop, and on a loaded machine their latency grows with it. P2C weighs latency
      // × (in flight + 1), so with 8 callers at load 12 (fast p50 74 ms) 74 × (4 + 1) outweighed 274 × 1
      // and P2C rightly sent 6–11 % to the slow server; with two, a fast server must pass 200 ms first.
      await startLoad(client, { workers: 2, maxMs: 500, maxCalls: 5_000 }).done; // both policies see the same warm-up
      // P2C: 600 calls (up to 10 s on a loaded machine), so its once-a-second forced pick of the slow
      // server stays a small share however slow the machine is; round robin's share does not depend on
      // the count: 3 s of it.
      const records = await startLoad(
        client,
        policy === 'bulwark' ? { workers: 2, maxMs: 10_000, maxCalls: 600 } : { workers: 2, maxMs: 3_000, maxCalls: 20_000 },
      ).done;
      client.close();
      const ok = records.filter((r) => r.server !== undefined);
      assert.equal(ok.length, records.length, 'no call failed');
      const ms = ok.map((r) => r.ms);
      results[policy] = { share: ok.filter((r) => r.server === 'slow').length / ok.length, p50: percentile(ms, 50), p99: percentile(ms, 99), calls: ok.length };
    }
    console.log(`slow instance: ${JSON.stringify(results)}`);
    assert.ok(
      results.bulwark!.share < 0.05,
      `P2C sent ${(results.bulwark!.share * 100).toFixed(1)} % to the slow server (calls p50 ${results.bulwark!.p50.toFixed(1)} ms${results.bulwark!.p50 > 50 ? ': the machine is too loaded for "two fast servers" to hold' : ''})`,
    );
    assert.ok(Math.abs(results.round_robin!.share - 1 / 3) < 0.05, `round_robin sent ${(results.round_robin!.share * 100).toFixed(1)} % to the slow server`);
  });

  it('an instance failing UNAVAILABLE: its breaker opens, calls go to the others; it recovers and gets calls again', async () => {
    let broken = true;
    const { cache } = await fleet({ a: () => ({}), b: () => ({}), bad: () => (broken ? { fail: status.UNAVAILABLE } : {}) });
    const d = new GrpcDiscovery({
      registry: cache,
      health: false,
      strategy: 'round-robin',
      outlier: false,
      instanceBreaker: { openMs: 500, minimumCalls: 5, failureRate: 0.5 },
    });
    after(() => d.close());
    const client = new GreeterClientCtor('bulwark:///greeter', insecure, d.channelOptions());
    after(() => client.close());
    const badState = () => d.stats().balancers[0]?.instances.find((i) => i.id === 'bad')?.breaker;
    await waitFor('the breaker of bad opens', async () => {
      await sayHello(client, { name: 'x' }).catch(() => undefined);
      return badState() === 'open';
    });
    // while open: no call fails (the bad instance is out of rotation)
    // 300 ms stays inside the 500 ms open period. Round robin would send every third call to bad, so
    // three calls already show it is out of rotation (a loaded machine managed 9 in that time).
    const during = await startLoad(client, { workers: 2, maxMs: 300, maxCalls: 2_000 }).done;
    assert.ok(during.length >= 3, `only ${during.length} calls finished in 300 ms`);
    assert.equal(during.filter((r) => r.code !== undefined).length, 0, 'no call fails while the breaker is open');
    broken = false;
    const picksBefore = d.stats().balancers[0]!.instances.find((i) => i.id === 'bad')!.picks;
    await waitFor(
      'bad is closed and serving again',
      async () => {
        const r = await sayHello(client, { name: 'x' });
        return r.server === 'bad' && badState() === 'closed';
      },
      10_000,
    );
    assert.ok(d.stats().balancers[0]!.instances.find((i) => i.id === 'bad')!.picks > picksBefore);
  });

  it('three of four instances failing: their breakers open, but no more than the cap (50 %) leave rotation, and calls keep flowing', async () => {
    const failing = () => ({ fail: status.INTERNAL });
    const { cache } = await fleet({ a: () => ({}), b: failing, c: failing, d: failing });
    // Round robin, no retries or outlier detection: what leaves rotation is the breakers' doing alone; the
    // open period outlasts the test.
    const d = new GrpcDiscovery({
      registry: cache,
      health: false,
      strategy: 'round-robin',
      outlier: false,
      retry: false,
      instanceBreaker: { openMs: 120_000, minimumCalls: 5, failureRate: 0.5 },
    });
    after(() => d.close());
    const client = new GreeterClientCtor('bulwark:///greeter', insecure, d.channelOptions());
    after(() => client.close());
    const view = () => d.stats().balancers[0]!.instances;
    await waitFor('four connected', async () => {
      await sayHello(client, { name: 'w' }).catch(() => undefined);
      return view().filter((i) => i.connectivity === 'READY').length === 4;
    });
    // Each failing instance's breaker opens on its own evidence, the one kept in rotation by the cap included.
    await waitFor(
      'the breakers of b, c and d open',
      async () => {
        await sayHello(client, { name: 'x' }).catch(() => undefined);
        return view().filter((i) => i.breaker === 'open').length === 3;
      },
      20_000,
    );
    const before = new Map(view().map((i) => [i.id, i.picks]));
    const records = await startLoad(client, { workers: 2, maxMs: 10_000, maxCalls: 200 }).done;
    const picks = view().map((i) => [i.id, i.picks - before.get(i.id)!] as const);
    const total = picks.reduce((n, [, k]) => n + k, 0);
    const shares = Object.fromEntries(picks.map(([id, k]) => [id, Number((k / total).toFixed(3))]));
    console.log(`three of four failing, after their breakers opened: shares of ${total} attempts ${JSON.stringify(shares)}`);
    assert.ok(records.length >= 20, `only ${records.length} calls finished`);
    const outOfRotation = picks.filter(([, k]) => k === 0).map(([id]) => id);
    assert.ok(outOfRotation.length <= 2, `${outOfRotation.join(', ')} got no attempt: more than the cap of 2 of 4 out of rotation`);
    const bypassed = picks.filter(([id, k]) => id !== 'a' && k > 0);
    assert.equal(bypassed.length, 1, `one failing instance stays in rotation through its open breaker: ${JSON.stringify(shares)}`);
    assert.ok(shares[bypassed[0]![0]]! > 0.3 && shares.a! > 0.3, `round robin shares the two in rotation: ${JSON.stringify(shares)}`);
    assert.equal(view().find((i) => i.id === bypassed[0]![0])!.breaker, 'open', 'calls let past the open breaker do not move it');
    assert.deepEqual(
      view()
        .map((i) => [i.id, i.inRotation])
        .sort(),
      [['a', true], ...['b', 'c', 'd'].map((id) => [id, id === bypassed[0]![0]])].sort(),
    );
  });

  it('panic: with two of four breakers open and panicThreshold 0.75, calls go to all four, through the open breakers', async () => {
    const failing = () => ({ fail: status.INTERNAL });
    const { cache } = await fleet({ a: () => ({}), b: () => ({}), c: failing, d: failing });
    const d = new GrpcDiscovery({
      registry: cache,
      health: false,
      strategy: 'round-robin',
      outlier: false,
      retry: false,
      panicThreshold: 0.75,
      instanceBreaker: { openMs: 120_000, minimumCalls: 5, failureRate: 0.5 },
    });
    after(() => d.close());
    const client = new GreeterClientCtor('bulwark:///greeter', insecure, d.channelOptions());
    after(() => client.close());
    const view = () => d.stats().balancers[0]!.instances;
    await waitFor(
      'the breakers of c and d open',
      async () => {
        await sayHello(client, { name: 'x' }).catch(() => undefined);
        return view().filter((i) => i.breaker === 'open').length === 2;
      },
      20_000,
    );
    const before = new Map(view().map((i) => [i.id, i.picks]));
    await startLoad(client, { workers: 2, maxMs: 10_000, maxCalls: 80 }).done;
    const picks = Object.fromEntries(view().map((i) => [i.id, i.picks - before.get(i.id)!]));
    assert.ok(
      Object.values(picks).every((k) => k > 0),
      `2 of 4 left is under 75 %: every instance is called, got ${JSON.stringify(picks)}`,
    );
    assert.deepEqual(
      view()
        .map((i) => [i.id, i.breaker, i.inRotation])
        .sort(),
      [
        ['a', 'closed', true],
        ['b', 'closed', true],
        ['c', 'open', true],
        ['d', 'open', true],
      ],
    );
  });

  it('outlier detection: consecutive failed attempts eject an instance for its ejection time, then it gets calls again', async () => {
    let broken = true;
    const { cache } = await fleet({ a: () => ({}), b: () => ({}), bad: () => (broken ? { fail: status.INTERNAL } : {}) });
    const d = new GrpcDiscovery({
      registry: cache,
      health: false,
      strategy: 'round-robin',
      instanceBreaker: false,
      retry: false,
      outlier: { consecutiveFailures: 3, baseEjectionMs: 3_000 },
    });
    after(() => d.close());
    const client = new GreeterClientCtor('bulwark:///greeter', insecure, d.channelOptions());
    after(() => client.close());
    const bad = () => d.stats().balancers[0]!.instances.find((i) => i.id === 'bad')!;
    await waitFor('three connected', async () => {
      await sayHello(client, { name: 'w' }).catch(() => undefined);
      return d.stats().balancers[0]!.instances.filter((i) => i.connectivity === 'READY').length === 3;
    });
    await waitFor('bad ejected', async () => {
      await sayHello(client, { name: 'x' }).catch(() => undefined);
      return bad().ejected;
    });
    const ejectedAt = performance.now();
    assert.ok(bad().failures >= 3, `ejected after ${bad().failures} failed attempts`);
    const picks = bad().picks;
    for (let i = 0; i < 20; i++) assert.notEqual((await sayHello(client, { name: 'x' })).server, 'bad');
    assert.equal(bad().picks, picks, 'no attempt went to the ejected instance');
    assert.deepEqual(
      d
        .stats()
        .balancers[0]!.instances.map((i) => [i.id, i.ejected])
        .sort(),
      [
        ['a', false],
        ['b', false],
        ['bad', true],
      ],
    );
    broken = false;
    await waitFor('bad back in rotation and serving', async () => (await sayHello(client, { name: 'x' })).server === 'bad', 5_000);
    const backAfter = performance.now() - ejectedAt;
    assert.ok(backAfter >= 2_500, `back after ${Math.round(backAfter)} ms, before its 3 000 ms ejection ended`);
    assert.equal(bad().ejected, false);
  });

  it('retries an attempt that failed UNAVAILABLE on another instance, counted in the retry budget', async () => {
    const { cache } = await fleet({ a: () => ({}), bad: () => ({ fail: status.UNAVAILABLE }) });
    const d = new GrpcDiscovery({ registry: cache, health: false, strategy: 'round-robin', instanceBreaker: false, outlier: false });
    after(() => d.close());
    const client = new GreeterClientCtor('bulwark:///greeter', insecure, d.channelOptions());
    after(() => client.close());
    await waitFor('both connected', async () => {
      await sayHello(client, { name: 'w' });
      return d.stats().balancers[0]!.instances.filter((i) => i.connectivity === 'READY').length === 2;
    });
    for (let i = 0; i < 40; i++) assert.equal((await sayHello(client, { name: 'x' })).server, 'a');
    const bad = d.stats().balancers[0]!.instances.find((i) => i.id === 'bad')!;
    assert.ok(bad.failures >= 15, `bad failed ${bad.failures} attempts (round robin sends it every other first attempt)`);
    const budget = d.stats().services[0]!.retryBudget!;
    assert.ok(budget.retries >= bad.failures - 1 && budget.refused === 0, JSON.stringify(budget));
  });

  it('a retry the budget refuses fails at once with UNAVAILABLE and ERR_RETRY_BUDGET_EXHAUSTED', async () => {
    const { cache } = await fleet({ a: () => ({}), bad: () => ({ fail: status.UNAVAILABLE }) });
    const d = new GrpcDiscovery({
      registry: cache,
      health: false,
      strategy: 'round-robin',
      instanceBreaker: false,
      outlier: false,
      retry: { budget: { percentCanRetry: 0, minRetriesPerSec: 0 } },
    });
    after(() => d.close());
    const client = new GreeterClientCtor('bulwark:///greeter', insecure, d.channelOptions());
    after(() => client.close());
    const errors: { code: number; details: string; metadata: Metadata }[] = [];
    for (let i = 0; i < 20; i++) await sayHello(client, { name: 'x' }).catch((e: { code: number; details: string; metadata: Metadata }) => errors.push(e));
    assert.ok(errors.length >= 5, `${errors.length} calls failed`);
    for (const e of errors) {
      assert.equal(e.code, status.UNAVAILABLE);
      assert.match(e.details, /^ERR_RETRY_BUDGET_EXHAUSTED: bulwark:\/\/\/greeter/);
      assert.deepEqual(e.metadata.get('bulwark-code'), ['ERR_RETRY_BUDGET_EXHAUSTED']);
    }
    assert.equal(d.stats().services[0]!.retryBudget!.refused, errors.length);
  });

  it('an instance whose health says NOT_SERVING leaves rotation, and comes back on SERVING', async () => {
    const { cache, health } = await fleet({ a: () => ({}), b: () => ({}) }, true);
    const d = new GrpcDiscovery({ registry: cache, health: { intervalMs: 100 } });
    after(() => d.close());
    const client = new GreeterClientCtor('bulwark:///greeter', insecure, d.channelOptions());
    after(() => client.close());
    await waitFor('both serve', async () => {
      const got = new Set<string>();
      for (let i = 0; i < 10; i++) got.add((await sayHello(client, { name: 'x' })).server);
      return got.size === 2;
    });
    health.get('b')!.setStatus('', 'NOT_SERVING');
    await waitFor('b out of rotation', () => d.stats().balancers[0]!.instances.find((i) => i.id === 'b')!.serving === false, 5_000);
    for (let i = 0; i < 30; i++) assert.equal((await sayHello(client, { name: 'x' })).server, 'a');
    health.get('b')!.setStatus('', 'SERVING');
    await waitFor('b back', async () => (await sayHello(client, { name: 'x' })).server === 'b', 5_000);
  });

  it('ring hash keyed by a metadata header sends one key to one instance', async () => {
    const { cache } = await fleet({ a: () => ({}), b: () => ({}), c: () => ({}) });
    const d = new GrpcDiscovery({ registry: cache, health: false, strategy: 'ring-hash', hashHeader: 'x-user' });
    after(() => d.close());
    const client = new GreeterClientCtor('bulwark:///greeter', insecure, d.channelOptions());
    after(() => client.close());
    await waitFor('three connected', async () => {
      await sayHello(client, { name: 'w' });
      return d.stats().balancers[0]!.instances.filter((i) => i.connectivity === 'READY').length === 3;
    });
    const owners = new Map<string, Set<string>>();
    for (let i = 0; i < 120; i++) {
      const user = `u${i % 12}`;
      const md = new Metadata();
      md.set('x-user', user);
      const r = await sayHello(client, { name: 'x' }, {}, md);
      owners.set(user, (owners.get(user) ?? new Set()).add(r.server));
    }
    for (const [user, s] of owners) assert.equal(s.size, 1, `${user} went to ${[...s].join(', ')}`);
    assert.ok(new Set([...owners.values()].map((s) => [...s][0])).size > 1, 'keys spread over instances');
  });

  it('an unknown service fails at once with UNAVAILABLE naming it', async () => {
    const { cache } = await fleet({ a: () => ({}) });
    const d = new GrpcDiscovery({ registry: cache, health: false });
    after(() => d.close());
    const client = new GreeterClientCtor('bulwark:///nope', insecure, d.channelOptions());
    after(() => client.close());
    const t0 = performance.now();
    const err = await sayHello(client, { name: 'x' }, { deadline: Date.now() + 10_000 }).then(
      () => assert.fail('succeeded'),
      (e: { code: number; details: string }) => e,
    );
    assert.equal(err.code, status.UNAVAILABLE);
    assert.match(err.details, /no instance of service "nope"/);
    assert.ok(performance.now() - t0 < 2_000, `took ${performance.now() - t0} ms`);
  });

  it("a channel without the discovery's options fails at once saying so", async () => {
    const client = new GreeterClientCtor('bulwark:///greeter', insecure);
    after(() => client.close());
    const err = await sayHello(client, { name: 'x' }, { deadline: Date.now() + 10_000 }).then(
      () => assert.fail('succeeded'),
      (e: { code: number; details: string }) => e,
    );
    assert.equal(err.code, status.UNAVAILABLE);
    assert.match(err.details, /channelOptions/);
  });

  it('rejects bad options naming them', () => {
    const registry = new MemoryRegistry();
    after(() => registry.close());
    assert.throws(() => new GrpcDiscovery({ registry: {} as never }), /GrpcDiscovery: registry/);
    assert.throws(() => new GrpcDiscovery({ registry, strategy: 'nope' as never }), RangeError);
    assert.throws(() => new GrpcDiscovery({ registry, hashHeader: '' }), /hashHeader/);
    assert.throws(() => new GrpcDiscovery({ registry, failureCodes: [99] }), /failureCodes/);
    assert.throws(() => new GrpcDiscovery({ registry, panicThreshold: 2 }), /GrpcDiscovery: panicThreshold/);
    assert.throws(() => new GrpcDiscovery({ registry, retry: 3 as never }), /GrpcDiscovery: retry/);
    assert.throws(() => new GrpcDiscovery({ registry, outlier: { consecutiveFailures: 0 } }), /consecutiveFailures/);
    assert.throws(() => new GrpcDiscovery({ registry, retry: { maxAttempts: 9 } }), /maxAttempts/);
    assert.throws(() => new GrpcDiscovery({ registry, retry: { backoff: { initialMs: 0 } } }), /initialMs/);
    assert.throws(() => new GrpcDiscovery({ registry, retry: { budget: { percentCanRetry: -1 } } }), /percentCanRetry/);
  });
});
