/**
 * docs/metrics.md lists every metric; this test scrapes one of every component (EtcdRegistry on a real
 * etcd, the Redis limiters on a real Redis) and checks the list against the scrape both ways: every
 * listed family is exposed with the listed type and labels, and every exposed family is listed.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Registry } from 'prom-client';
import { BulwarkMetrics } from '../src/metrics/index.js';
import { allComponents } from './support/all-components.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { redisBinary, startRedis, type RedisServer } from './support/redis.js';
import { checkMetrics, promtoolBinary } from './support/prometheus.js';
import { skipReason } from './support/servers.js';

const INSTANCE_LABEL = 'peer';

interface Listed {
  type: string;
  labels: string[];
}

/** listed parses the metric tables of docs/metrics.md. */
function listed(): Map<string, Listed> {
  const page = readFileSync(new URL('../docs/metrics.md', import.meta.url), 'utf8');
  const out = new Map<string, Listed>();
  for (const line of page.split('\n')) {
    const m = /^\| `(bulwark_[a-z0-9_]+)` \| (counter|gauge|histogram) \| ([^|]*) \| (.+) \|$/.exec(line);
    if (m === null) continue;
    assert.ok(!out.has(m[1]!), `${m[1]} listed twice`);
    const labels = [...m[3]!.matchAll(/`([^`]+)`/g)].map((x) => (x[1] === '<instanceLabel>' ? INSTANCE_LABEL : x[1]!));
    out.set(m[1]!, { type: m[2]!, labels: labels.sort() });
    assert.ok(m[4]!.trim().length > 10, `${m[1]} has a meaning`);
  }
  return out;
}

/** exposed parses a text exposition: each family's type and the label names its samples carry. */
function exposed(text: string): Map<string, { type: string; labels: Set<string>; samples: number }> {
  const out = new Map<string, { type: string; labels: Set<string>; samples: number }>();
  for (const line of text.split('\n')) {
    const t = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (t !== null) {
      out.set(t[1]!, { type: t[2]!, labels: new Set(), samples: 0 });
      continue;
    }
    if (line.length === 0 || line.startsWith('#')) continue;
    const s = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? \S+$/.exec(line);
    assert.ok(s !== null, `bad sample line ${line}`);
    let family = s[1]!;
    if (!out.has(family)) family = family.replace(/_(bucket|sum|count)$/, '');
    const f = out.get(family);
    assert.ok(f !== undefined, `sample ${line} has no TYPE line`);
    f.samples++;
    for (const m of (s[3] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="/g)) if (m[1] !== 'le') f.labels.add(m[1]!);
  }
  return out;
}

describe('docs/metrics.md against a full scrape', { skip: skipReason(etcdBinary, 'etcd') ?? skipReason(redisBinary, 'redis-server') }, () => {
  let etcd: EtcdServer;
  let redis: RedisServer;
  let all: Awaited<ReturnType<typeof allComponents>>;
  let text: string;
  before(async () => {
    etcd = await startEtcd();
    redis = await startRedis();
    all = await allComponents(etcd.endpoint, redis.url);
    const metrics = new BulwarkMetrics({ registry: new Registry(), instanceLabel: INSTANCE_LABEL });
    for (const p of all.parts) metrics.track(p);
    await all.exercise();
    text = await metrics.metrics();
    await metrics.close();
  });
  after(async () => {
    await all?.close();
    await etcd?.stop();
    await redis?.stop();
  });

  it('lists every family the scrape exposes, with its type and labels, and nothing it does not', () => {
    const doc = listed();
    const got = exposed(text);
    assert.ok(doc.size > 50, `parsed ${doc.size} rows`);
    const notListed = [...got.keys()].filter((n) => !doc.has(n));
    const notExposed = [...doc.keys()].filter((n) => !got.has(n));
    assert.deepEqual(notListed, [], 'exposed but not in docs/metrics.md');
    assert.deepEqual(notExposed, [], 'in docs/metrics.md but not exposed');
    for (const [name, d] of doc) {
      const g = got.get(name)!;
      assert.equal(g.type, d.type, `${name}: type`);
      assert.ok(g.samples > 0, `${name}: the scenario leaves at least one sample, so its labels are checked`);
      assert.deepEqual([...g.labels].sort(), d.labels, `${name}: labels`);
    }
  });

  it('passes promtool check metrics', { skip: skipReason(promtoolBinary, 'promtool') }, async () => {
    const { code, output } = await checkMetrics(text);
    assert.equal(code, 0, output);
    assert.equal(output.trim(), '');
  });
});
