/**
 * A tracked ResilientClient on a ManualClock: its attempt and call duration histograms (fed through the
 * client's measure hook, no event objects) and its counters, after known calls; a Timeout's calls and
 * timeouts.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { BulwarkMetrics } from '../src/metrics/index.js';
import { DEFAULT_BUCKETS } from '../src/metrics/family.js';
import { ResilientClient } from '../src/client/index.js';
import { MemoryRegistry, RegistryCache, type Registry as ServiceRegistry } from '../src/registry/index.js';
import type { ServiceInstance } from '../src/registry/index.js';
import { ManualClock, TimeoutError } from '../src/core/index.js';
import { Timeout } from '../src/policy/index.js';
import { sampleValue as value } from './support/scrape.js';

describe('BulwarkMetrics on a ResilientClient', () => {
  it('observes each attempt and each call, by service and outcome, in seconds', async () => {
    const clock = new ManualClock();
    const registry = new MemoryRegistry();
    await registry.register({ id: 'a', name: 'svc', address: '127.0.0.1:9001' });
    const client = new ResilientClient({ registry, clock, timeoutMs: 0 });
    const m = new BulwarkMetrics({ registry: new Registry() });
    m.track(client, { name: 'api' });
    // Answers after 30 ms.
    await client.call('svc', async () => {
      clock.advance(30);
      return 1;
    });
    // Fails after 200 ms, not retried, no fallback.
    await client
      .call(
        'svc',
        async () => {
          clock.advance(200);
          throw new Error('down');
        },
        { retry: false },
      )
      .catch(() => {});
    // Fails after 2 s; the fallback answers 1 s later.
    const answer = await client.call(
      'svc',
      async () => {
        clock.advance(2000);
        throw new Error('down');
      },
      {
        retry: false,
        fallback: async () => {
          clock.advance(1000);
          return 'fallback';
        },
      },
    );
    assert.equal(answer, 'fallback');
    const text = await m.metrics();
    const a = 'bulwark_client_attempt_duration_seconds';
    const c = 'bulwark_client_call_duration_seconds';
    assert.equal(value(text, `${a}_count{name="api",service="svc",outcome="ok"}`), 1);
    assert.equal(value(text, `${a}_sum{name="api",service="svc",outcome="ok"}`), 0.03);
    assert.equal(value(text, `${a}_count{name="api",service="svc",outcome="error"}`), 2);
    assert.equal(value(text, `${a}_sum{name="api",service="svc",outcome="error"}`), 2.2);
    assert.equal(value(text, `${c}_count{name="api",service="svc",outcome="succeeded"}`), 1);
    assert.equal(value(text, `${c}_sum{name="api",service="svc",outcome="succeeded"}`), 0.03);
    assert.equal(value(text, `${c}_bucket{name="api",service="svc",outcome="succeeded",le="0.025"}`), 0);
    assert.equal(value(text, `${c}_bucket{name="api",service="svc",outcome="succeeded",le="0.05"}`), 1);
    assert.equal(value(text, `${c}_count{name="api",service="svc",outcome="failed"}`), 1);
    assert.equal(value(text, `${c}_sum{name="api",service="svc",outcome="failed"}`), 0.2);
    assert.equal(value(text, `${c}_count{name="api",service="svc",outcome="fallback"}`), 1);
    assert.equal(value(text, `${c}_sum{name="api",service="svc",outcome="fallback"}`), 3, 'the fallback’s own time is in the call');
    assert.equal(value(text, 'bulwark_client_calls_total{name="api",outcome="succeeded"}'), 1);
    assert.equal(value(text, 'bulwark_client_calls_total{name="api",outcome="fallback"}'), 1);
    assert.equal(value(text, 'bulwark_client_calls_total{name="api",outcome="failed"}'), 1);
    assert.equal(text, await m.registry.metrics());
    // Untracked: the hook is gone, nothing more is observed.
    m.untrack(client);
    await client.call('svc', async () => 1);
    assert.ok(!(await m.metrics()).includes('name="api"'));
    await m.close();
    await client.close();
    await registry.close();
  });

  it('tracks the client with its parts in one call: its instance breakers, each service balancer (ejections, the cap, panic) and its registry cache', async () => {
    const clock = new ManualClock();
    const registry = new MemoryRegistry();
    for (const [i, id] of ['pay-1', 'pay-2'].entries()) await registry.register({ id, name: 'payments', address: `127.0.0.1:${9000 + i}` });
    const client = new ResilientClient({ registry, clock });
    const m = new BulwarkMetrics({ registry: new Registry(), instanceLabel: 'peer' });
    assert.equal(m.track(client, { name: 'api' }), 'api');
    assert.deepEqual(m.tracked(), ['api'], 'one call, one tracked component');
    let pay2 = 0;
    const task = async (inst: { id: string }) => {
      if (inst.id === 'pay-1') throw new Error('connect ECONNREFUSED');
      if (pay2++ % 2 === 0) throw new Error('500');
      return inst.id;
    };
    for (let i = 0; i < 100; i++) {
      const p = client.call('payments', task, { fallback: () => 'fallback' });
      await clock.advanceAsync(50);
      await p;
    }
    const text = await m.metrics();
    // pay-1 ejected, pay-2's breaker open but kept in rotation by the cap: what §2 needed a /debug route for.
    assert.equal(value(text, 'bulwark_balancer_instances{name="payments",group="api"}'), 2);
    assert.equal(value(text, 'bulwark_balancer_ejected_instances{name="payments",group="api"}'), 1);
    assert.equal(value(text, 'bulwark_balancer_capped_instances{name="payments",group="api"}'), 1);
    assert.equal(value(text, 'bulwark_balancer_available_instances{name="payments",group="api"}'), 1);
    assert.equal(value(text, 'bulwark_balancer_panic{name="payments",group="api"}'), 0);
    assert.equal(value(text, 'bulwark_balancer_instance_up{name="payments",group="api",peer="127.0.0.1:9000"}'), 0);
    assert.equal(value(text, 'bulwark_breaker_state{name="payments/pay-2",group="api",state="open"}'), 1);
    assert.equal(value(text, 'bulwark_breaker_state{name="payments/pay-1",group="api",state="closed"}'), 1);
    assert.ok(value(text, 'bulwark_breaker_calls_total{name="payments",group="api",kind="successful"}')! > 0, 'the service breaker');
    assert.equal(value(text, 'bulwark_breaker_group_breakers{name="api"}'), 3);
    assert.equal(value(text, 'bulwark_registry_cache_services{name="api"}'), 1);
    assert.equal(value(text, 'bulwark_registry_cache_service_instances{name="api",service="payments"}'), 2);
    assert.ok(value(text, 'bulwark_client_calls_total{name="api",outcome="succeeded"}')! > 50);
    await client.close();
    await registry.close();
    const after = await m.metrics();
    assert.equal(value(after, 'bulwark_balancer_instances{name="payments",group="api"}'), undefined, 'a closed client is dropped with its parts');
    assert.equal(value(after, 'bulwark_breaker_group_breakers{name="api"}'), undefined);
    await m.close();
  });

  it('exports a registry cache once: tracked on its own, it is not exported again through a client over it, nor twice through two clients', async () => {
    const registry = new MemoryRegistry();
    await registry.register({ id: 'a', name: 'svc', address: '127.0.0.1:9001' });
    const cache = new RegistryCache(registry);
    const series = (text: string) => text.split('\n').filter((l) => l.startsWith('bulwark_registry_cache_services{'));
    // Tracked on its own first, then through a client.
    const m = new BulwarkMetrics({ registry: new Registry() });
    m.track(cache, { name: 'discovery' });
    const api = new ResilientClient({ registry: cache });
    m.track(api, { name: 'api' });
    await api.call('svc', async () => 1);
    assert.deepEqual(series(await m.metrics()), ['bulwark_registry_cache_services{name="discovery"} 1']);
    assert.equal(await m.metrics(), await m.registry.metrics(), 'prom-client’s path answers the same series');
    // Untracked on its own: the client exports it again.
    m.untrack(cache);
    assert.deepEqual(series(await m.metrics()), ['bulwark_registry_cache_services{name="api"} 1']);
    // Through a client first, then on its own: from then on on its own only.
    m.track(cache, { name: 'discovery' });
    assert.deepEqual(series(await m.metrics()), ['bulwark_registry_cache_services{name="discovery"} 1']);
    // Two clients over one cache, the cache not tracked: exported once, through the first.
    m.untrack(cache);
    const web = new ResilientClient({ registry: cache });
    m.track(web, { name: 'web' });
    assert.deepEqual(series(await m.metrics()), ['bulwark_registry_cache_services{name="api"} 1']);
    await m.close();
    await api.close();
    await web.close();
    await cache.close();
    await registry.close();
  });

  it('exports the metrics of a balancer a balancerFactory made, whatever its kind, with the client’s parts, until the client closes', async () => {
    const registry = new MemoryRegistry();
    await registry.register({ id: 'a', name: 'svc', address: '127.0.0.1:9001' });
    /** A balancer of the application's own, describing its own family. */
    class FirstBalancer {
      picks = 0;
      private list: readonly ServiceInstance[] = [];
      constructor(
        private readonly reg: ServiceRegistry,
        private readonly service: string,
      ) {}
      async ready(): Promise<void> {
        this.list = await this.reg.getService(this.service);
      }
      pick(): ServiceInstance {
        this.picks++;
        return this.list[0]!;
      }
      report(): void {}
      async close(): Promise<void> {}
      describeMetrics() {
        return {
          families: [{ name: 'first_balancer_picks_total', type: 'counter' as const, help: 'Picks.', labelNames: [] }],
          collect: (emit: (family: string, labels: object, value: number) => void) => emit('first_balancer_picks_total', {}, this.picks),
        };
      }
    }
    const client = new ResilientClient({ registry, balancerFactory: (service, reg) => new FirstBalancer(reg, service) });
    const m = new BulwarkMetrics({ registry: new Registry() });
    m.track(client, { name: 'api' });
    await client.call('svc', async () => 1);
    await client.call('svc', async () => 1);
    assert.equal(value(await m.metrics(), 'bulwark_first_balancer_picks_total{name="svc",group="api"}'), 2);
    await client.call('svc', async () => 1);
    assert.equal(value(await m.registry.metrics(), 'bulwark_first_balancer_picks_total{name="svc",group="api"}'), 3, 'on prom-client’s path too');
    await client.close();
    assert.equal(value(await m.metrics(), 'bulwark_first_balancer_picks_total{name="svc",group="api"}'), undefined, 'dropped with its client');
    await m.close();
    await registry.close();
  });

  it('counts every answered call though the client hands them over by the batch: past a batch, the rest when read, each duration in its own bucket, sums to the last bit', async () => {
    const clock = new ManualClock();
    const registry = new MemoryRegistry();
    await registry.register({ id: 'a', name: 'svc', address: '127.0.0.1:9001' });
    await registry.register({ id: 'b', name: 'svc', address: '127.0.0.1:9002' });
    const client = new ResilientClient({ registry, clock, timeoutMs: 0, retryBackoff: { initialMs: 1, jitter: 'none' } });
    const m = new BulwarkMetrics({ registry: new Registry() });
    m.track(client, { name: 'api' });
    // What the ok and succeeded series must hold, in call order: each attempt's duration as the client
    // saw it (onAttempt), each call's from its start to its end on the clock.
    const ok: number[] = [];
    const succeeded: number[] = [];
    client.onAttempt((e) => {
      if (e.outcome === 'ok') ok.push(e.latencyMs / 1000);
    });
    const call = async (task: () => void, options?: { isFailure: () => boolean }): Promise<void> => {
      const start = clock.now();
      const answered = await client
        .call('svc', async () => (task(), 1), options)
        .then(
          () => true,
          () => false,
        );
      if (answered) succeeded.push((clock.now() - start) / 1000);
    };
    // 300 calls (two batches and part of a third), through every bucket and past the last bound.
    const steps = [0.3, 3, 7, 20, 40, 90, 200, 400, 900, 2000, 4000, 9000, 20_000];
    for (let i = 0; i < 300; i++) await call(() => clock.advance(steps[i % steps.length]!));
    // A call whose first attempt fails after 30 ms and whose retry, 1 ms later, answers in 2 ms: its
    // attempt is ≤ 5 ms, the call in (25, 50] ms.
    let first = true;
    const retried = call(() => {
      clock.advance(first ? 30 : 2);
      if (first) throw ((first = false), new Error('down'));
    });
    await new Promise(setImmediate);
    await clock.advanceAsync(1);
    await retried;
    // An attempt whose error is not a failure (an ok attempt measured on its own, after the calls
    // before it: src/client/answered-batch.test.ts checks the order), then answered calls, still in the
    // client's batch when the metrics read.
    await call(
      () => {
        clock.advance(0.7);
        throw new Error('not counted');
      },
      { isFailure: () => false },
    );
    for (const d of [3.3, 20_000.3, 9000.1, 0.9, 7.7]) await call(() => clock.advance(d));
    const bucketsOf = (values: number[]) => DEFAULT_BUCKETS.map((b) => values.filter((v) => v <= b).length);
    const sumOf = (values: number[]) => values.reduce((s, v) => s + v, 0);
    // Read by histograms() (its families summed over their labels): the attempts (ok, and the one
    // error), the calls (succeeded, and the one whose error was not a failure, which failed).
    const totals = m.histograms();
    const attempts = totals.find((h) => h.family === 'client_attempt_duration_seconds')!;
    const calls = totals.find((h) => h.family === 'client_call_duration_seconds')!;
    assert.equal(attempts.count, ok.length + 1);
    assert.equal(calls.count, succeeded.length + 1);
    // Read by a scrape: the ok series to the last bit, bucket by bucket.
    const text = await m.metrics();
    const a = 'bulwark_client_attempt_duration_seconds';
    const c = 'bulwark_client_call_duration_seconds';
    assert.equal(ok.length, 307);
    assert.equal(value(text, `${a}_count{name="api",service="svc",outcome="ok"}`), ok.length);
    assert.equal(value(text, `${a}_sum{name="api",service="svc",outcome="ok"}`), sumOf(ok));
    DEFAULT_BUCKETS.forEach((b, i) => {
      assert.equal(value(text, `${a}_bucket{name="api",service="svc",outcome="ok",le="${b}"}`), bucketsOf(ok)[i], `ok le=${b}`);
      assert.equal(value(text, `${c}_bucket{name="api",service="svc",outcome="succeeded",le="${b}"}`), bucketsOf(succeeded)[i], `succeeded le=${b}`);
    });
    assert.equal(value(text, `${c}_sum{name="api",service="svc",outcome="succeeded"}`), sumOf(succeeded));
    // The retried call: its attempt ≤ 5 ms, the call in (25, 50] ms.
    assert.equal(ok[300], 0.002);
    assert.equal(succeeded[300], 0.033);
    await client.close();
    await registry.close();
  });

  it('refuses a measure hook without its methods', () => {
    const client = new ResilientClient({ registry: new MemoryRegistry() });
    assert.throws(() => client.measure({} as never), /ResilientClient.measure: m must have answered\(\), attempt\(\) and call\(\)/);
    return client.close();
  });

  it('counts a Timeout’s calls and timeouts, with a shared deadline and with a caller’s signal', async () => {
    const clock = new ManualClock();
    const t = new Timeout({ timeoutMs: 100, clock });
    const m = new BulwarkMetrics({ registry: new Registry() });
    m.track(t, { name: 'db' });
    await t.execute(async () => 1);
    const never = () => new Promise<never>(() => {});
    const shared = assert.rejects(t.execute(never), TimeoutError);
    const own = assert.rejects(t.execute(never, { signal: new AbortController().signal }), TimeoutError);
    await clock.advanceAsync(150);
    await shared;
    await own;
    await t.execute(() => Promise.reject(new Error('not a timeout'))).catch(() => {});
    await t.execute(undefined as never).catch(() => {}); // a bad argument is not a call
    assert.deepEqual(t.stats(), { calls: 4, timeouts: 2 });
    const text = await m.metrics();
    assert.equal(value(text, 'bulwark_timeout_calls_total{name="db"}'), 4);
    assert.equal(value(text, 'bulwark_timeout_timeouts_total{name="db"}'), 2);
    assert.equal(value(text, 'bulwark_timeout_seconds{name="db"}'), 0.1);
    await m.close();
  });
});
