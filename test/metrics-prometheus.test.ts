/**
 * bulwark/metrics against real parts: a real Prometheus (1 s scrape interval) scrapes this process, which
 * runs a breaker, a limiter and a cache group behind `metricsHandler`; the test asks Prometheus's HTTP
 * API for the series a known scenario must leave. `promtool check metrics` lints a full scrape.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { BulwarkMetrics, metricsHandler } from '../src/metrics/index.js';
import { BreakerGroup, CircuitBreaker, SreBreaker } from '../src/breaker/index.js';
import { AdaptiveShedder, KeyedLimiter, PeriodLimiter, TokenLimiter } from '../src/limit/index.js';
import { Group } from '../src/cache/index.js';
import { Bulkhead, Fallback, Retry, RetryBudget, Timeout } from '../src/policy/index.js';
import { HttpGuard } from '../src/http/index.js';
import { MemoryRegistry, RegistryCache } from '../src/registry/index.js';
import { Balancer } from '../src/balancer/index.js';
import { checkMetrics, prometheusBinary, promtoolBinary, startPrometheus, type PrometheusServer } from './support/prometheus.js';
import { skipReason } from './support/servers.js';

async function listen(handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; port: number }> {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port };
}

describe('bulwark/metrics scraped by a real Prometheus', { skip: skipReason(prometheusBinary, 'prometheus') }, () => {
  const registry = new Registry();
  const metrics = new BulwarkMetrics({ registry });
  let prom: PrometheusServer;
  let server: Server;
  const breaker = new CircuitBreaker({ name: 'payments', minimumCalls: 2, failureRate: 0.5, openMs: 600_000 });
  const limiter = new TokenLimiter({ rate: 1, burst: 2 });
  const group = new Group({ name: 'users', cacheBytes: 1 << 20, getter: (key) => `user:${key}` });

  before(async () => {
    metrics.track(breaker);
    metrics.track(limiter, { name: 'api' });
    metrics.track(group);
    const s = await listen(metricsHandler(metrics));
    server = s.server;
    prom = await startPrometheus([`127.0.0.1:${s.port}`]);
  });
  after(async () => {
    await prom?.stop();
    await new Promise((r) => server?.close(r));
    await metrics.close();
  });

  it('finds the breaker open, the limiter decisions and the cache counters after a known scenario', async () => {
    await prom.waitForQuery('up{job="bulwark"}', (s) => s.length === 1 && s[0]!.value === 1);
    // Before: closed.
    await prom.waitForQuery('bulwark_breaker_state{name="payments",state="closed"}', (s) => s[0]?.value === 1);
    // Two failures over minimumCalls 2 trip the breaker; a third call is not permitted.
    for (let i = 0; i < 2; i++) await breaker.execute(() => Promise.reject(new Error('down'))).catch(() => {});
    await assert.rejects(breaker.execute(() => 'never'));
    assert.equal(breaker.state, 'open');
    // Three decisions on a burst of 2: two allowed, one limited.
    limiter.allow();
    limiter.allow();
    limiter.allow();
    // Two gets of one key: one load, one hit.
    await group.get('42');
    await group.get('42');

    const open = await prom.waitForQuery('bulwark_breaker_state{name="payments"} == 1', (s) => s.length === 1 && s[0]!.metric.state === 'open');
    assert.equal(open[0]!.metric.group ?? '', '');
    await prom.waitForQuery('bulwark_breaker_calls_total{name="payments",kind="failed"}', (s) => s[0]?.value === 2);
    await prom.waitForQuery('bulwark_breaker_calls_total{name="payments",kind="not_permitted"}', (s) => s[0]?.value === 1);
    await prom.waitForQuery('bulwark_breaker_failure_rate{name="payments"}', (s) => s[0]?.value === 1);
    await prom.waitForQuery('bulwark_breaker_state_transitions_total{name="payments",from="closed",to="open"}', (s) => s[0]?.value === 1);
    const decisions = await prom.waitForQuery('bulwark_limiter_decisions_total{name="api"}', (s) => s.length === 2 && s.every((x) => x.value > 0));
    const by = Object.fromEntries(decisions.map((x) => [x.metric.result, x.value]));
    assert.deepEqual(by, { allowed: 2, limited: 1 });
    await prom.waitForQuery('bulwark_cache_gets_total{name="users"}', (s) => s[0]?.value === 2);
    await prom.waitForQuery('bulwark_cache_hits_total{name="users"}', (s) => s[0]?.value === 1);
    await prom.waitForQuery('bulwark_cache_items{name="users",cache="main"}', (s) => s[0]?.value === 1);
    const targets = await prom.targets();
    assert.deepEqual(
      targets.map((t) => [t.health, t.lastError]),
      [['up', '']],
    );
  });

  it('drops the series of an untracked component from the next scrape', async () => {
    metrics.untrack(limiter);
    await prom.waitForQuery('bulwark_limiter_decisions_total{name="api"}', (s) => s.length === 0);
    // Prometheus marks the vanished series stale; the breaker's stay.
    const still = await prom.query('bulwark_breaker_state{name="payments",state="open"}');
    assert.equal(still[0]?.value, 1);
  });
});

describe('promtool check metrics', { skip: skipReason(promtoolBinary, 'promtool') }, () => {
  it('passes on a full scrape of every kind of component', async () => {
    const registry = new Registry();
    const metrics = new BulwarkMetrics({ registry, instanceLabel: 'peer' });
    const reg = new MemoryRegistry();
    await reg.register({ id: 'a', name: 'svc', address: '127.0.0.1:8080' });
    const cache = new RegistryCache(reg);
    await cache.getService('svc');
    const balancer = new Balancer({ registry: cache, service: 'svc' });
    await balancer.ready();
    const fallback = new Fallback({ value: 'x' });
    const parts: object[] = [
      new SreBreaker({ name: 'sre' }),
      new CircuitBreaker({ name: 'circuit' }),
      new BreakerGroup(),
      new TokenLimiter({ rate: 10 }),
      new PeriodLimiter({ quota: 10, periodMs: 1000 }),
      new KeyedLimiter({ rate: 10 }),
      new AdaptiveShedder(),
      cache,
      balancer,
      new Retry(),
      new RetryBudget(),
      new Bulkhead(),
      new Timeout(),
      fallback,
      new HttpGuard({ limiter: new KeyedLimiter({ rate: 10 }) }),
      new Group({ name: 'g', cacheBytes: 1024, getter: (k) => k }),
    ];
    for (const p of parts) metrics.track(p);
    await fallback.execute(() => Promise.reject(new Error('x')));
    const text = await metrics.metrics();
    const { code, output } = await checkMetrics(text);
    assert.equal(code, 0, output);
    assert.equal(output.trim(), '', 'no lint problem');
    for (const p of parts) await (p as { close?: () => Promise<void> }).close?.();
    await metrics.close();
  });
});
