/**
 * BulwarkMetrics on fakes of time (ManualClock) and in-process scrapes: what each scrape reports,
 * untrack and close, the extension point, OpenMetrics names, bad input, and the handlers on node:http,
 * Express and Fastify.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import fastify from 'fastify';
import { Registry } from 'prom-client';
import fc from 'fast-check';
import { BulwarkMetrics, expressMetrics, fastifyMetrics, metricsHandler, statusHandler, type Trackable } from '../src/metrics/index.js';
import { BreakerGroup, CircuitBreaker, SreBreaker } from '../src/breaker/index.js';
import { AdaptiveShedder, KeyedLimiter, TokenLimiter } from '../src/limit/index.js';
import { ManualClock } from '../src/core/index.js';
import { sampleValue as value } from './support/scrape.js';

/** scrape answers the exposition's samples as `name{labels} value` lines, comments left out. */
async function scrape(m: BulwarkMetrics): Promise<string[]> {
  return (await m.metrics()).split('\n').filter((l) => l.length > 0 && !l.startsWith('#'));
}

describe('BulwarkMetrics', () => {
  it('follows a CircuitBreaker through open, half-open and closed on a ManualClock', async () => {
    const clock = new ManualClock();
    const m = new BulwarkMetrics({ registry: new Registry() });
    const b = new CircuitBreaker({ name: 'pay', minimumCalls: 2, openMs: 1000, halfOpenCalls: 1, clock });
    m.track(b);
    const state = async () => {
      const lines = await scrape(m);
      return ['closed', 'open', 'half_open', 'forced_open'].filter((s) => value(lines, `bulwark_breaker_state{name="pay",state="${s}"}`) === 1);
    };
    assert.deepEqual(await state(), ['closed']);
    await b.execute(() => Promise.reject(new Error('x'))).catch(() => {});
    await b.execute(() => Promise.reject(new Error('x'))).catch(() => {});
    assert.deepEqual(await state(), ['open']);
    clock.advance(1000);
    assert.deepEqual(await state(), ['half_open'], 'an open period that has passed reads half-open at the scrape');
    await b.execute(() => 'ok');
    assert.deepEqual(await state(), ['closed']);
    b.isolate();
    assert.deepEqual(await state(), ['forced_open']);
    const lines = await scrape(m);
    assert.equal(value(lines, 'bulwark_breaker_state_transitions_total{name="pay",from="closed",to="open"}'), 2);
    assert.equal(value(lines, 'bulwark_breaker_state_transitions_total{name="pay",from="open",to="half_open"}'), 1);
    assert.equal(value(lines, 'bulwark_breaker_state_transitions_total{name="pay",from="half_open",to="closed"}'), 1);
    assert.equal(value(lines, 'bulwark_breaker_calls_total{name="pay",kind="successful"}'), 1);
    assert.equal(value(lines, 'bulwark_breaker_calls_total{name="pay",kind="failed"}'), 2);
    await m.close();
  });

  it('reports an SreBreaker dropping calls as open, with its drop ratio', async () => {
    const clock = new ManualClock();
    const m = new BulwarkMetrics({ registry: new Registry() });
    const b = new SreBreaker({ name: 'sre', clock, random: () => 0 });
    m.track(b);
    for (let i = 0; i < 50; i++) await b.execute(() => Promise.reject(new Error('x'))).catch(() => {});
    const lines = await scrape(m);
    assert.equal(value(lines, 'bulwark_breaker_state{name="sre",state="open"}'), 1);
    assert.ok(value(lines, 'bulwark_breaker_drop_ratio{name="sre"}')! > 0);
    const failed = value(lines, 'bulwark_breaker_calls_total{name="sre",kind="failed"}')!;
    const dropped = value(lines, 'bulwark_breaker_calls_total{name="sre",kind="not_permitted"}')!;
    assert.equal(failed + dropped, 50);
    assert.ok(dropped > 0);
    await m.close();
  });

  it('reports the members of a BreakerGroup as they come and go', async () => {
    const clock = new ManualClock();
    const m = new BulwarkMetrics({ registry: new Registry() });
    const g = new BreakerGroup({ clock, maxBreakers: 2 });
    m.track(g, { name: 'peers' });
    await g.execute('a', () => 1);
    await g.execute('b', () => 1);
    let lines = await scrape(m);
    assert.equal(value(lines, 'bulwark_breaker_state{name="a",group="peers",state="closed"}'), 1);
    g.delete('a');
    await g.execute('c', () => 1);
    lines = await scrape(m);
    assert.equal(value(lines, 'bulwark_breaker_state{name="a",group="peers",state="closed"}'), undefined);
    assert.equal(value(lines, 'bulwark_breaker_state{name="c",group="peers",state="closed"}'), 1);
    assert.equal(value(lines, 'bulwark_breaker_group_breakers{name="peers"}'), 2);
    assert.equal(value(lines, 'bulwark_breaker_group_created_total{name="peers"}'), 3);
    await g.close();
    lines = await scrape(m);
    assert.ok(!lines.some((l) => l.includes('group="peers"') || l.includes('name="peers"')), 'a closed group is not reported');
    assert.deepEqual(m.tracked(), []);
    await m.close();
  });

  it('untrack removes every series of a component, event-counted ones included', async () => {
    const m = new BulwarkMetrics({ registry: new Registry() });
    const b = new CircuitBreaker({ name: 'x', minimumCalls: 1, clock: new ManualClock() });
    m.track(b);
    await b.execute(() => Promise.reject(new Error('x'))).catch(() => {});
    assert.ok((await scrape(m)).some((l) => l.includes('name="x"')));
    assert.equal(m.untrack(b), true);
    assert.equal(m.untrack(b), false);
    assert.ok(!(await scrape(m)).some((l) => l.includes('name="x"')));
    b.reset();
    await m.close();
  });

  it('counts limiter decisions by result and never a key as a label', async () => {
    const clock = new ManualClock();
    const m = new BulwarkMetrics({ registry: new Registry() });
    const k = new KeyedLimiter({ rate: 1, burst: 1, clock });
    m.track(k, { name: 'per-user' });
    for (let i = 0; i < 100; i++) k.allow(`user-${i % 10}`);
    const lines = await scrape(m);
    assert.equal(value(lines, 'bulwark_limiter_decisions_total{name="per-user",result="allowed"}'), 10);
    assert.equal(value(lines, 'bulwark_limiter_decisions_total{name="per-user",result="limited"}'), 90);
    assert.equal(value(lines, 'bulwark_limiter_keys{name="per-user"}'), 10);
    assert.ok(!lines.some((l) => l.includes('user-')));
    await m.close();
  });

  it('reports the event-loop load an AdaptiveShedder reads, and whether it drops', async () => {
    const clock = new ManualClock();
    let load = { utilization: 0.25, delayP99Ms: 12 };
    const m = new BulwarkMetrics({ registry: new Registry() });
    const shedder = new AdaptiveShedder({ load: () => load, clock });
    m.track(shedder, { name: 'api' });
    let lines = await scrape(m);
    assert.equal(value(lines, 'bulwark_shedder_event_loop_utilization{name="api"}'), 0.25);
    assert.equal(value(lines, 'bulwark_shedder_event_loop_delay_p99_seconds{name="api"}'), 0.012);
    assert.equal(value(lines, 'bulwark_shedder_overloaded{name="api"}'), 0);
    load = { utilization: 0.97, delayP99Ms: 340 };
    lines = await scrape(m);
    assert.equal(value(lines, 'bulwark_shedder_event_loop_utilization{name="api"}'), 0.97);
    assert.equal(value(lines, 'bulwark_shedder_event_loop_delay_p99_seconds{name="api"}'), 0.34);
    assert.equal(value(lines, 'bulwark_shedder_overloaded{name="api"}'), 1);
    await shedder.close();
    await m.close();
  });

  it('never doubles _total in OpenMetrics mode', async () => {
    const OpenMetricsRegistry = Registry as unknown as new (contentType: string) => Registry<typeof Registry.OPENMETRICS_CONTENT_TYPE>;
    const registry = new OpenMetricsRegistry(Registry.OPENMETRICS_CONTENT_TYPE);
    const m = new BulwarkMetrics({ registry });
    const l = new TokenLimiter({ rate: 1, clock: new ManualClock() });
    m.track(l, { name: 'api' });
    l.allow();
    for (let i = 0; i < 2; i++) {
      const text = await m.metrics();
      assert.match(text, /^# TYPE bulwark_limiter_decisions counter$/m);
      assert.match(text, /^bulwark_limiter_decisions_total\{name="api",result="allowed"\} 1$/m);
      assert.doesNotMatch(text, /_total_total/);
    }
    await m.close();
  });

  it('takes components that describe their own families (the extension point)', async () => {
    const m = new BulwarkMetrics({ registry: new Registry(), prefix: 'app_' });
    let handled = 0;
    let sink: Parameters<NonNullable<ReturnType<Trackable['describeMetrics']>['subscribe']>>[0] | undefined;
    let disposed = false;
    const part: Trackable = {
      describeMetrics: () => ({
        kind: 'grpc-server',
        families: [
          { name: 'grpc_handled_total', type: 'counter', help: 'Calls handled.', labelNames: ['code'] },
          { name: 'grpc_duration_seconds', type: 'histogram', help: 'Call durations.', labelNames: [], buckets: [0.1, 1] },
        ],
        collect: (emit) => emit('grpc_handled_total', { code: 'OK' }, handled),
        subscribe: (s) => {
          sink = s;
          return () => (disposed = true);
        },
        snapshot: () => ({ handled }),
      }),
    };
    assert.equal(m.track(part, { name: 'rpc' }), 'rpc');
    handled = 3;
    sink!.observe('grpc_duration_seconds', {}, 0.05);
    sink!.observe('grpc_duration_seconds', {}, 0.5);
    sink!.observe('grpc_duration_seconds', {}, 5);
    const lines = await scrape(m);
    assert.equal(value(lines, 'app_grpc_handled_total{name="rpc",code="OK"}'), 3);
    assert.equal(value(lines, 'app_grpc_duration_seconds_bucket{name="rpc",le="0.1"}'), 1);
    assert.equal(value(lines, 'app_grpc_duration_seconds_bucket{name="rpc",le="1"}'), 2);
    assert.equal(value(lines, 'app_grpc_duration_seconds_bucket{name="rpc",le="+Inf"}'), 3);
    assert.equal(value(lines, 'app_grpc_duration_seconds_count{name="rpc"}'), 3);
    assert.equal(value(lines, 'app_grpc_duration_seconds_sum{name="rpc"}'), 5.55);
    assert.deepEqual(m.snapshot().components, [{ name: 'rpc', kind: 'grpc-server', status: { handled: 3 } }]);
    m.untrack(part);
    assert.equal(disposed, true);
    sink!.observe('grpc_duration_seconds', {}, 1); // after untrack: ignored
    assert.ok(!(await scrape(m)).some((l) => l.includes('name="rpc"')));
    await m.close();
  });

  it('refuses bad input with TypeError naming what is wrong', () => {
    assert.throws(() => new BulwarkMetrics({ prefix: 'bad prefix' }), /prefix/);
    assert.throws(() => new BulwarkMetrics({ instanceLabel: 'name' }), /instanceLabel/);
    assert.throws(() => new BulwarkMetrics({ registry: {} as Registry }), /registry/);
    const m = new BulwarkMetrics({ registry: new Registry() });
    assert.throws(() => m.track({}), /cannot track Object/);
    assert.throws(() => m.track(new TokenLimiter({ rate: 1 }), { name: '' }), /name/);
    const clash: Trackable = { describeMetrics: () => ({ families: [{ name: 'limiter_keys', type: 'counter', help: 'x', labelNames: [] }] }) };
    m.track(new TokenLimiter({ rate: 1 }));
    assert.throws(() => m.track(clash), /limiter_keys is already a gauge/);
  });

  it('never throws and never reports a closed component while parts come and go (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(fc.constantFrom('make', 'close', 'call', 'scrape'), fc.nat(7)), { maxLength: 60 }), async (ops) => {
        const m = new BulwarkMetrics({ registry: new Registry() });
        const clock = new ManualClock();
        const live = new Map<number, CircuitBreaker | SreBreaker>();
        const closed = new Set<string>();
        for (const [op, i] of ops) {
          if (op === 'make' && !live.has(i)) {
            const name = `b${i}-${live.size}-${closed.size}`;
            const b = i % 2 === 0 ? new CircuitBreaker({ name, clock, minimumCalls: 1 }) : new SreBreaker({ name, clock });
            live.set(i, b);
            m.track(b);
          } else if (op === 'close' && live.has(i)) {
            const b = live.get(i)!;
            live.delete(i);
            closed.add(b.name);
            void b.close(); // closed now, awaited by nobody: the next scrape must already leave it out
          } else if (op === 'call' && live.has(i)) {
            await live
              .get(i)!
              .execute(() => Promise.reject(new Error('x')))
              .catch(() => {});
          } else if (op === 'scrape') {
            const [text, snap] = await Promise.all([m.metrics(), Promise.resolve(m.snapshot())]);
            for (const n of closed) {
              assert.ok(!text.includes(`name="${n}"`), `closed ${n} scraped`);
              assert.ok(!snap.components.some((c) => c.name === n), `closed ${n} in the snapshot`);
            }
            for (const b of live.values()) assert.ok(text.includes(`name="${b.name}"`));
          }
        }
        await m.close();
      }),
      { numRuns: 60 },
    );
  });

  it('serves /metrics and /status on node:http, Express and Fastify', async () => {
    const m = new BulwarkMetrics({ registry: new Registry() });
    m.track(new TokenLimiter({ rate: 1 }), { name: 'api' });
    const handler = metricsHandler(m);
    const status = statusHandler(m);
    const node = createServer((req, res) => (req.url === '/status' ? status(req, res) : handler(req, res)));
    await new Promise<void>((r) => node.listen(0, '127.0.0.1', r));
    const app = express();
    app.get('/metrics', expressMetrics(m));
    const ex = app.listen(0, '127.0.0.1');
    await new Promise((r) => ex.once('listening', r));
    const f = fastify();
    await f.register(fastifyMetrics(m));
    await f.listen({ port: 0, host: '127.0.0.1' });
    try {
      const urls = [
        `http://127.0.0.1:${(node.address() as AddressInfo).port}/metrics`,
        `http://127.0.0.1:${(ex.address() as AddressInfo).port}/metrics`,
        `http://127.0.0.1:${(f.server.address() as AddressInfo).port}/metrics`,
      ];
      for (const url of urls) {
        const r = await fetch(url);
        assert.equal(r.status, 200, url);
        assert.match(r.headers.get('content-type')!, /^text\/plain; version=0\.0\.4/);
        assert.match(await r.text(), /^bulwark_limiter_tokens\{name="api"\} 1$/m);
      }
      const post = await fetch(urls[0]!, { method: 'POST' });
      assert.equal(post.status, 405);
      const s = await fetch(urls[0]!.replace('/metrics', '/status'));
      const body = (await s.json()) as { components: { name: string; kind: string }[] };
      assert.deepEqual(
        body.components.map((c) => [c.name, c.kind]),
        [['api', 'TokenLimiter']],
      );
    } finally {
      await new Promise((r) => node.close(r));
      await new Promise((r) => ex.close(r));
      await f.close();
      await m.close();
    }
  });
});

describe('BulwarkMetrics.histograms', () => {
  it("answers each component's histogram family summed over its other labels, and nothing once it is untracked", () => {
    const m = new BulwarkMetrics({ registry: new Registry() });
    const sinks: Array<{ observe(family: string, labels: Record<string, string>, value: number): void }> = [];
    const part = (name: string): Trackable => ({
      describeMetrics: () => ({
        kind: 'Part',
        families: [{ name: 'part_call_duration_seconds', type: 'histogram', help: 'h', labelNames: ['code'], buckets: [0.01, 0.1] }],
        subscribe: (sink) => {
          sinks.push(sink);
          return () => {};
        },
        snapshot: () => ({ name }),
      }),
    });
    const a = part('a');
    m.track(a, { name: 'a' });
    m.track(part('b'), { name: 'b' });
    sinks[0]!.observe('part_call_duration_seconds', { code: 'ok' }, 0.005);
    sinks[0]!.observe('part_call_duration_seconds', { code: 'ok' }, 0.05);
    sinks[0]!.observe('part_call_duration_seconds', { code: 'error' }, 0.05);
    sinks[0]!.observe('part_call_duration_seconds', { code: 'error' }, 3);
    sinks[1]!.observe('part_call_duration_seconds', { code: 'ok' }, 0.001);
    assert.deepEqual(m.histograms(), [
      { name: 'a', family: 'part_call_duration_seconds', bounds: [0.01, 0.1], counts: [1, 2], count: 4, sum: 3.105 },
      { name: 'b', family: 'part_call_duration_seconds', bounds: [0.01, 0.1], counts: [1, 0], count: 1, sum: 0.001 },
    ]);
    m.untrack(a);
    assert.deepEqual(
      m.histograms().map((h) => h.name),
      ['b'],
    );
  });
});
