/**
 * ops/grafana/bulwark.json, the Grafana dashboard shipped for people who run Prometheus and Grafana, on a
 * real Prometheus: it scrapes one of every component (test/support/all-components.ts, EtcdRegistry on a
 * real etcd, the Redis limiters on a real Redis) kept busy by a bounded loop, and every panel's PromQL and
 * every templating query, with Grafana's macros and variables replaced by concrete values, must answer
 * data — and every metric they name must exist in the scrape, so that no panel reads a family bulwark does
 * not expose (an `or vector(0)` would otherwise hide it). The same Prometheus loads
 * ops/prometheus/alerts.yml: every rule evaluates without error and reads only metrics that exist, and the
 * alerts go pending on the real series — the fixture's open breaker, and a Redis limiter once Redis is
 * killed (which also lights the rescue panel).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import { BulwarkMetrics, metricsHandler } from '../src/metrics/index.js';
import { Group } from '../src/cache/index.js';
import { AdaptiveShedder, RedisTokenLimiter, TokenLimiter } from '../src/limit/index.js';
import { allComponents } from './support/all-components.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { redisBinary, startRedis, type RedisServer } from './support/redis.js';
import { prometheusBinary, startPrometheus, type PrometheusServer, type PromRule, type PromSample } from './support/prometheus.js';
import { skipReason, waitFor } from './support/servers.js';

const dashboardPath = new URL('../ops/grafana/bulwark.json', import.meta.url);
const alertsPath = fileURLToPath(new URL('../ops/prometheus/alerts.yml', import.meta.url));

/** What the test puts in place of Grafana's macros: `$__rate_interval` is at least 4 scrapes (1 s each). */
const RATE_INTERVAL = '15s';
const INTERVAL = '5s';
/** Rounds of the busy loop, at most: 250 ms apart, two minutes or more (it stops when the tests end). */
const MAX_ROUNDS = 480;

interface Target {
  refId: string;
  expr: string;
  datasource?: { uid?: string };
}
interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { h: number; w: number; x: number; y: number };
  datasource?: { type?: string; uid?: string };
  targets?: Target[];
  panels?: Panel[];
}
interface Variable {
  name: string;
  type: string;
  query: string | { query: string };
  allValue?: string;
}
interface Dashboard {
  uid: string;
  title: string;
  panels: Panel[];
  templating: { list: Variable[] };
}

const dashboard = JSON.parse(readFileSync(dashboardPath, 'utf8')) as Dashboard;
const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]).filter((p) => p.type !== 'row');
const variables = new Map(dashboard.templating.list.map((v) => [v.name, v]));

/** substitute replaces Grafana's macros and the dashboard's variables in `expr` by `values`; throws on an unknown one. */
function substitute(expr: string, values: Record<string, string>): string {
  return expr.replace(/\$\{?(\w+)\}?/g, (_, name: string) => {
    const v = values[name];
    assert.ok(v !== undefined, `unknown variable $${name} in ${expr}`);
    return v;
  });
}

/** metricNames answers the bulwark metric names an expression reads. */
function metricNames(expr: string): string[] {
  return [...new Set([...expr.matchAll(/\b(bulwark_[a-z0-9_]+)\b/g)].map((m) => m[1]!))];
}

/** labelValues turns Grafana's `label_values(selector, label)` into a PromQL query answering one series per value. */
function labelValues(query: string): { promql: string; label: string } {
  const m = /^label_values\((.+),\s*(\w+)\)$/.exec(query.trim());
  assert.ok(m !== null, `not a label_values query: ${query}`);
  return { promql: `count by (${m[2]}) (${m[1]})`, label: m[2]! };
}

/** documented answers the metric families listed in docs/metrics.md's tables. */
function documented(): string[] {
  const page = readFileSync(new URL('../docs/metrics.md', import.meta.url), 'utf8');
  return [...page.matchAll(/^\| `(bulwark_[a-z0-9_]+)` \| (?:counter|gauge|histogram) \|/gm)].map((m) => m[1]!);
}

const hasData = (s: PromSample[]): boolean => s.some((x) => Number.isFinite(x.value));

describe('ops/grafana/bulwark.json, as written', () => {
  it('has unique panel ids, panels within 24 columns, and every query on the datasource variable', () => {
    const ids = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]).map((p) => p.id);
    assert.equal(new Set(ids).size, ids.length, 'panel ids are unique');
    assert.ok(panels.length >= 40, `${panels.length} panels`);
    for (const p of panels) {
      assert.ok(p.gridPos.x + p.gridPos.w <= 24, `${p.title}: within the grid`);
      assert.equal(p.datasource?.uid, '${datasource}', `${p.title}: on the datasource variable`);
      assert.ok((p.targets ?? []).length > 0, `${p.title}: has a query`);
      for (const t of p.targets!) {
        assert.ok(t.expr.length > 0, `${p.title} ${t.refId}: has an expression`);
        assert.ok(metricNames(t.expr).length > 0, `${p.title} ${t.refId}: reads a bulwark metric`);
      }
    }
    for (const [i, a] of panels.entries()) {
      for (const b of panels.slice(i + 1)) {
        const apart =
          a.gridPos.x + a.gridPos.w <= b.gridPos.x ||
          b.gridPos.x + b.gridPos.w <= a.gridPos.x ||
          a.gridPos.y + a.gridPos.h <= b.gridPos.y ||
          b.gridPos.y + b.gridPos.h <= a.gridPos.y;
        assert.ok(apart, `${a.title} and ${b.title} overlap`);
      }
    }
    assert.deepEqual([...variables.keys()], ['datasource', 'job', 'instance', 'name']);
    assert.equal(variables.get('datasource')!.type, 'datasource');
    assert.equal(variables.get('datasource')!.query, 'prometheus');
  });

  it('charts every family docs/metrics.md lists', () => {
    const charted = new Set(panels.flatMap((p) => p.targets!.flatMap((t) => metricNames(t.expr))).map((n) => n.replace(/_bucket$/, '')));
    assert.deepEqual(
      documented().filter((n) => !charted.has(n)),
      [],
      'families without a panel: add one to ops/grafana/bulwark.json',
    );
  });
});

describe(
  'ops/grafana/bulwark.json on a real Prometheus',
  {
    skip: skipReason(prometheusBinary, 'prometheus') ?? skipReason(etcdBinary, 'etcd') ?? skipReason(redisBinary, 'redis-server'),
  },
  () => {
    let etcd: EtcdServer;
    let redis: RedisServer;
    let all: Awaited<ReturnType<typeof allComponents>>;
    let metrics: BulwarkMetrics;
    let server: Server;
    let prom: PrometheusServer;
    let target: string;
    let busy: Promise<void> | undefined;
    let stop = false;
    const names = new Map<object, string>();

    before(async () => {
      [etcd, redis] = await Promise.all([startEtcd(), startRedis()]);
      all = await allComponents(etcd.endpoint, redis.url);
      metrics = new BulwarkMetrics({ registry: new Registry(), instanceLabel: 'peer' });
      for (const p of all.parts) names.set(p, metrics.track(p));
      const group = all.parts.find((p): p is Group => p instanceof Group)!;
      const limiter = all.parts.find((p): p is TokenLimiter => p instanceof TokenLimiter)!;
      const shedder = all.parts.find((p): p is AdaptiveShedder => p instanceof AdaptiveShedder)!;
      // The counters the panels rate, the histograms they take quantiles of, and a cache hit ratio, move
      // while Prometheus scrapes: every component's calls, plus cache gets (a hit after the first), limiter
      // decisions past its burst and shedder decisions.
      const round = async (i: number): Promise<void> => {
        await all.exercise();
        await group.get(`k${i % 4}`);
        for (let j = 0; j < 5; j++) limiter.allow();
        await shedder.execute(async () => 1);
      };
      await round(0);
      busy = (async () => {
        for (let i = 1; i < MAX_ROUNDS && !stop; i++) {
          await round(i);
          await new Promise((r) => setTimeout(r, 250));
        }
      })();
      busy.catch(() => {}); // a failed round fails the after() hook that awaits it, not the process
      server = createServer(metricsHandler(metrics));
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      target = `127.0.0.1:${(server.address() as AddressInfo).port}`;
      prom = await startPrometheus([target], { ruleFiles: [alertsPath] });
      await prom.waitForQuery('up{job="bulwark"}', (s) => s.length === 1 && s[0]!.value === 1);
    });
    after(async () => {
      stop = true;
      await busy;
      await prom?.stop();
      await new Promise((r) => server?.close(r));
      await metrics?.close();
      await all?.close();
      await etcd?.stop();
      await redis?.stop();
    });

    it('answers every templating query with the scraped job, instance and names', async () => {
      const want: Record<string, (values: string[]) => boolean> = {
        job: (v) => v.includes('bulwark'),
        instance: (v) => v.includes(target),
        // a breaker's own name, a client's instance breaker (`<service>/<id>`) and a cache group's
        name: (v) => v.includes('circuit') && v.includes('svc/a') && v.includes('g'),
      };
      for (const v of variables.values()) {
        if (v.type !== 'query') continue;
        const query = typeof v.query === 'string' ? v.query : v.query.query;
        const { promql, label } = labelValues(substitute(query, { job: 'bulwark', instance: target }));
        const got = await prom.waitForQuery(promql, (s) => s.length > 0);
        const values = got.map((s) => s.metric[label] ?? '');
        assert.ok(want[v.name]?.(values), `$${v.name}: ${JSON.stringify(values)}`);
        assert.equal(v.allValue, '.*', `$${v.name}: All is a regex every panel takes`);
      }
    });

    it('answers data for every panel query, and every metric a panel names exists', async () => {
      const values = { __rate_interval: RATE_INTERVAL, __interval: INTERVAL, job: 'bulwark', instance: target, name: '.*' };
      const names = new Set(panels.flatMap((p) => p.targets!.flatMap((t) => metricNames(t.expr))));
      // `up` is 1 (before): a scrape of every component is in, so every family it exposes is there.
      const exposed = await prom.query(`count by (__name__) ({__name__=~"${[...names].join('|')}"})`);
      const missing = [...names].filter((n) => !exposed.some((s) => s.metric.__name__ === n));
      assert.deepEqual(missing, [], 'metrics panels read that the scrape does not expose');
      const empty: string[] = [];
      for (const p of panels) {
        for (const t of p.targets!) {
          const promql = substitute(t.expr, values);
          try {
            await prom.waitForQuery(promql, hasData, 20_000);
          } catch (err) {
            empty.push(`${p.title} ${t.refId}: ${(err as Error).message}`);
          }
        }
      }
      assert.deepEqual(empty, [], 'panel queries without data');
    });

    it('loads ops/prometheus/alerts.yml: every rule evaluates without error and reads metrics that exist', async () => {
      let rules: PromRule[] = [];
      await waitFor('every rule evaluated once', async () => (rules = await prom.rules()).every((r) => r.health !== 'unknown'), 20_000);
      assert.ok(rules.length >= 8, `${rules.length} rules loaded`);
      for (const r of rules) {
        assert.equal(r.health, 'ok', `${r.name}: ${r.lastError ?? ''}`);
        for (const n of metricNames(r.query)) {
          const got = await prom.query(`count({__name__="${n}"})`);
          assert.ok(got.length > 0, `${r.name} reads ${n}, which the scrape does not expose`);
        }
      }
    });

    it('puts alerts pending on the real series: the open breaker, and a Redis limiter in rescue once Redis is killed', async () => {
      const pending = (alert: string, name: string) => async () => {
        const rule = (await prom.rules()).find((r) => r.name === alert);
        return (rule?.alerts ?? []).some((a) => a.labels.name === name && a.state === 'pending');
      };
      // The fixture's CircuitBreaker 'circuit' (minimumCalls 1) failed its call: open, and the alert waits its 5 minutes.
      await waitFor('BulwarkBreakerOpen pending for circuit', pending('BulwarkBreakerOpen', 'circuit'), 20_000);
      const token = all.parts.find((p): p is RedisTokenLimiter => p instanceof RedisTokenLimiter)!;
      assert.equal(token.mode, 'redis');
      await redis.kill();
      await waitFor(
        'the Redis limiter to decide in rescue',
        async () => {
          await token.take('k');
          return token.mode === 'rescue';
        },
        20_000,
      );
      await waitFor('BulwarkLimiterRescue pending', pending('BulwarkLimiterRescue', names.get(token)!), 20_000);
      const rescue = panels.find((p) => p.title === 'Redis limiters in rescue')!.targets![0]!.expr;
      await prom.waitForQuery(substitute(rescue, { job: 'bulwark', instance: target, name: '.*' }), (s) => s[0]?.value === 1);
    });
  },
);
