/**
 * BulwarkMetrics renders its own families for `metrics()` (prom-client's formatter is too slow for a
 * large BreakerGroup): that text must be what `registry.metrics()` answers for the same registry, byte
 * for byte — with the user's own metrics between ours, label values that need escaping or are not
 * ASCII, histograms, and scrapes that overlap.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Counter, Gauge, Registry } from 'prom-client';
import fc from 'fast-check';
import { BulwarkMetrics, type Trackable } from '../src/metrics/index.js';
import { BreakerGroup, CircuitBreaker, SreBreaker } from '../src/breaker/index.js';
import { KeyedLimiter } from '../src/limit/index.js';
import { ManualClock } from '../src/core/index.js';

/** odd names: quotes, backslashes, newlines, non-ASCII (one, two and four UTF-8 bytes). */
const ODD = ['plain', 'quo"te', 'back\\slash', 'new\nline', 'café', '日本', 'emoji 🚀', ''];

async function same(m: BulwarkMetrics): Promise<string> {
  const ours = await m.metrics();
  const theirs = await m.registry.metrics();
  assert.equal(ours, theirs);
  assert.ok((await m.metricsBuffer()).equals(Buffer.from(theirs, 'utf8')));
  return ours;
}

describe('BulwarkMetrics text rendering', () => {
  it('answers what registry.metrics() answers, byte for byte, with the registry’s own metrics in between', async () => {
    const clock = new ManualClock();
    const registry = new Registry();
    const before = new Counter({ name: 'app_requests_total', help: 'Requests (ünïcode help).', labelNames: ['path'], registers: [registry] });
    before.inc({ path: '/é' }, 2);
    const m = new BulwarkMetrics({ registry });
    const group = new BreakerGroup({ clock, factory: (name) => new CircuitBreaker({ name, clock, minimumCalls: 1 }) });
    m.track(group, { name: 'pe"ers' });
    for (const key of ODD) await group.execute(key, () => 1);
    await group.execute('café', () => Promise.reject(new Error('x'))).catch(() => {});
    new Gauge({ name: 'app_after', help: 'Registered after bulwark’s first families.', registers: [registry] }).set(1.5);
    const sre = new SreBreaker({ name: 'sré', clock });
    m.track(sre);
    await sre.execute(() => 1);
    const part: Trackable = {
      describeMetrics: () => ({
        families: [{ name: 'job_seconds', type: 'histogram', help: 'Jobs.', labelNames: ['queue'], buckets: [0.1, 1] }],
        subscribe: (sink) => {
          sink.observe('job_seconds', { queue: 'naïve' }, 0.5);
          sink.observe('job_seconds', { queue: 'b"q' }, 2);
          return () => {};
        },
      }),
    };
    m.track(part, { name: 'jobs' });
    const text = await same(m);
    assert.match(text, /^app_requests_total\{path="\/é"\} 2$/m);
    assert.match(text, /^bulwark_breaker_state\{name="café",group="pe\\"ers",state="open"\} 1$/m);
    assert.match(text, /^bulwark_breaker_state\{name="new\\nline",group="pe\\"ers",state="closed"\} 1$/m);
    assert.match(text, /^bulwark_breaker_calls_total\{name="emoji 🚀",group="pe\\"ers",kind="successful"\} 1$/m);
    assert.match(text, /^bulwark_job_seconds_bucket\{name="jobs",queue="naïve",le="1"\} 1$/m);
    // An SreBreaker has no half-open or forced-open state: two state series, no empty group label.
    assert.deepEqual(
      text.split('\n').filter((l) => l.startsWith('bulwark_breaker_state{name="sré"')),
      ['bulwark_breaker_state{name="sré",state="closed"} 1', 'bulwark_breaker_state{name="sré",state="open"} 0'],
    );
    assert.ok(text.indexOf('# HELP app_requests_total') < text.indexOf('# HELP bulwark_breaker_state'));
    assert.ok(text.indexOf('# HELP app_after') < text.indexOf('# HELP bulwark_job_seconds'));
    await m.close();
  });

  it('is plain ASCII read back without decoding when every name is ASCII, and equal either way (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.string({ unit: 'binary', maxLength: 6 }), { minLength: 1, maxLength: 12 }), async (keys) => {
        const clock = new ManualClock();
        const m = new BulwarkMetrics({ registry: new Registry() });
        const group = new BreakerGroup({ clock });
        m.track(group, { name: 'g' });
        for (const key of keys) await group.execute(key, () => 1);
        await same(m);
        await m.close();
      }),
      { numRuns: 40 },
    );
  });

  it('keeps overlapping scrapes apart', async () => {
    const registry = new Registry();
    // A metric of the registry's own that answers later: a second scrape starts while the first waits.
    new Gauge({
      name: 'app_slow',
      help: 'Set at collect, after a pause.',
      registers: [registry],
      async collect() {
        await new Promise((r) => setImmediate(r));
        this.set(1);
      },
    });
    const m = new BulwarkMetrics({ registry });
    const keyed = new KeyedLimiter({ rate: 1, clock: new ManualClock() });
    m.track(keyed, { name: 'k' });
    keyed.allow('a');
    const [a, b] = await Promise.all([m.metrics(), m.metrics()]);
    assert.equal(a, b);
    assert.equal(a.split('\n').filter((l) => l.startsWith('bulwark_limiter_decisions_total{')).length, 2);
    await m.close();
  });
});
