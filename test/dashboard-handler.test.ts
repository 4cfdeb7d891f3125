/**
 * dashboardHandler mounted as a user mounts it — on node:http, Express (4 and 5) and Fastify (4 and 5),
 * under a path of the user's choice — answering the page, the stream and the frame as JSON; and its
 * controls: off unless given, refusing another origin, a value the checks refuse answered 422 with the
 * field and its message and nothing written, a good one written as a rule. The page comes with the last
 * frame and history in it (escaped: a component's name cannot end the script element; left out past its
 * bound, so the page stays under 300 KB), and its own script draws values from them before any stream
 * is open (run here in a VM over a few stand-in elements): the Rules card among them.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { runInNewContext } from 'node:vm';
import express from 'express';
import express4 from 'express4';
import Fastify from 'fastify';
import Fastify4 from 'fastify4';
import promClient from 'prom-client';
import { dashboardHandler, fastifyDashboard, type DashboardHandler, type Feed } from '../src/dashboard/index.js';
import { TokenLimiter } from '../src/limit/index.js';
import { BulwarkMetrics } from '../src/metrics/index.js';
import { CircuitBreaker } from '../src/breaker/index.js';
import { checkRule, MemoryRuleStore, RuleInvalidError, Rules } from '../src/rules/index.js';
import { waitFor } from './support/servers.js';

function metrics(): BulwarkMetrics {
  const m = new BulwarkMetrics({ registry: new promClient.Registry() });
  m.track(new TokenLimiter({ rate: 10 }), { name: 'api-limit' });
  return m;
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** firstEvents reads a stream until it has `n` events, then closes it. */
function firstEvents(url: string, n: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { accept: 'text/event-stream' } }, (res) => {
      assert.equal(res.statusCode, 200);
      assert.match(String(res.headers['content-type']), /^text\/event-stream/);
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        buf += c;
        const events = buf.split('\n\n').filter((e) => e.includes('event: '));
        if (buf.endsWith('\n\n') && events.length >= n) {
          req.destroy();
          resolve(events.map((e) => /event: (\w+)/.exec(e)![1]!));
        }
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** A stand-in for the page's elements: what the page's script sets on them. */
interface Element {
  id: string;
  innerHTML: string;
  textContent: string;
  className: string;
  hidden: boolean;
}

/**
 * drawPage runs the page's own script over `html` (the page as served, with its embedded data) in a VM,
 * with stand-ins for its elements and an EventSource that never opens, and answers what it drew before
 * any stream: `#body`'s HTML, the title and the connection's word.
 */
function drawPage(html: string): { body: string; title: string; conn: string; marks: string[] } {
  const script = /<script>([\s\S]*)<\/script>/.exec(html)![1]!;
  const boot = /<script type="application\/json" id="boot">([\s\S]*?)<\/script>/.exec(html)?.[1];
  const els = new Map<string, Element & Record<string, unknown>>();
  const el = (id: string) => {
    let e = els.get(id);
    if (e === undefined) {
      e = {
        id,
        innerHTML: '',
        textContent: id === 'boot' ? (boot ?? '') : '',
        className: '',
        hidden: false,
        setAttribute() {},
        addEventListener() {},
        contains: () => false,
      };
      els.set(id, e);
    }
    return e;
  };
  const marks: string[] = [];
  const document = { getElementById: (id: string) => (id === 'boot' && boot === undefined ? null : el(id)), activeElement: null, title: '' };
  runInNewContext(script, {
    document,
    location: { search: '' },
    URLSearchParams,
    performance: { getEntriesByName: (n: string) => marks.filter((m) => m === n), mark: (n: string) => void marks.push(n) },
    EventSource: class {
      addEventListener(): void {}
      close(): void {}
    },
    fetch: () => new Promise(() => {}),
    setInterval: () => 0,
    setTimeout: () => 0,
  });
  return { body: el('body').innerHTML, title: document.title, conn: el('conn').textContent, marks };
}

/** rows answers a table's rows as the text of their cells (tags left out). */
function rows(html: string): string[][] {
  return [...html.matchAll(/<tr[^>]*>(.*?)<\/tr>/g)].map((r) => [...r[1]!.matchAll(/<t[dh][^>]*>(.*?)<\/t[dh]>/g)].map((c) => c[1]!.replace(/<[^>]+>/g, '')));
}

async function checkServes(base: string): Promise<void> {
  const page = await fetch(`${base}/`);
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-type')!, /^text\/html/);
  const html = await page.text();
  assert.match(html, /<title>test<\/title>/);
  // Drawn from the data in the page, before any stream: the limiter's row, each number under its unit.
  const drawn = drawPage(html);
  assert.match(drawn.body, /<th class="n">admitted<\/th>.*<td>api-limit<\/td><td data-h="kind">TokenLimiter<\/td>.*<td class="n" data-h="admitted">\d+<\/td>/);
  assert.deepEqual(drawn.marks, ['bulwark-embedded-data', 'bulwark-first-data']);
  assert.equal(drawn.conn, 'connecting');
  assert.equal(drawn.title, 'test dashboard');
  const redirect = await fetch(base, { redirect: 'manual' });
  assert.equal(redirect.status, 308);
  assert.equal(new URL(redirect.headers.get('location')!, base).pathname, `${new URL(base).pathname}/`);
  const status = (await (await fetch(`${base}/status.json`)).json()) as { mode: string; components: Array<{ name: string }> };
  assert.equal(status.mode, 'process');
  assert.deepEqual(
    status.components.map((c) => c.name),
    ['api-limit'],
  );
  assert.ok(Array.isArray(await (await fetch(`${base}/history.json`)).json()));
  assert.deepEqual(await firstEvents(`${base}/events`, 3), ['hello', 'history', 'tick']);
  assert.equal((await fetch(`${base}/nothing`)).status, 404);
}

describe('dashboardHandler', () => {
  const closers: Array<() => Promise<unknown>> = [];
  after(async () => {
    for (const c of closers) await c();
  });

  it('serves on node:http under its path, and 404 elsewhere', async () => {
    const h = dashboardHandler(metrics(), { path: '/ops/dash', title: 'test' });
    const server = createServer(h);
    const url = await listen(server);
    closers.push(
      () => h.close(),
      () => new Promise((r) => server.close(r)),
    );
    await checkServes(`${url}/ops/dash`);
    assert.equal((await fetch(`${url}/other`)).status, 404);
  });

  it('embeds the frame in the page with no way out of its script element, and leaves out what would pass 300 KB', async () => {
    let frame = '';
    const feed: Feed = {
      mode: 'process',
      tickMs: 1_000,
      latest: () => frame,
      history: () => '[]',
      onTick: () => () => {},
      close: () => Promise.resolve(),
    };
    const h = dashboardHandler(feed, { path: '/dashboard' });
    const server = createServer(h);
    const url = `${await listen(server)}/dashboard/`;
    closers.push(
      () => h.close(),
      () => new Promise((r) => server.close(r)),
    );
    const component = (name: string) => ({ name, kind: 'Mystery', status: { calls: 1 } });
    const framed = (names: string[]) =>
      JSON.stringify({ mode: 'process', at: '2026-01-01T00:00:00.000Z', tickMs: 1_000, components: names.map(component), point: { t: 0, c: {} } });
    // A component's name is the user's text: it must not end the script element it is embedded in.
    frame = framed(['</script><script>window.hacked = 1</script><!--']);
    const html = await (await fetch(url)).text();
    assert.doesNotMatch(html, /<script>window\.hacked/);
    assert.equal(html.match(/<\/script>/g)!.length, 2); // the data's and the page's own
    const drawn = drawPage(html);
    assert.match(drawn.body, /<h2>Mystery: &#60;\/script&#62;&#60;script&#62;window\.hacked = 1&#60;\/script&#62;&#60;!--<\/h2>/);
    assert.deepEqual(drawn.marks, ['bulwark-embedded-data', 'bulwark-first-data']);
    // A frame past the bound (a large fleet's) comes with the stream only: the page stays under 300 KB.
    frame = framed(Array.from({ length: 3_000 }, (_, i) => `component-${i}-${'x'.repeat(80)}`));
    assert.ok(frame.length > 256 * 1024);
    const big = await (await fetch(url)).text();
    assert.ok(Buffer.byteLength(big) < 300 * 1000, `the page weighs ${Buffer.byteLength(big)} bytes`);
    const waiting = drawPage(big);
    assert.deepEqual(waiting.marks, []);
    assert.equal(waiting.body, ''); // nothing drawn: the page waits for its stream
    assert.equal(waiting.conn, 'connecting');
  });

  // The two majors' types differ; the test uses what they share.
  type ExpressApp = ((req: IncomingMessage, res: ServerResponse) => void) & {
    use(...a: unknown[]): void;
    get(path: string, h: (req: unknown, res: { send(b: string): void }) => void): void;
  };
  for (const [name, make] of [
    ['Express 5', express],
    ['Express 4', express4],
  ] as const) {
    it(`serves as ${name} middleware, with app.use(handler) and app.use(path, handler)`, async () => {
      const app = (make as unknown as () => ExpressApp)();
      const h = dashboardHandler(metrics(), { path: '/dashboard', title: 'test' });
      const mounted = dashboardHandler(metrics(), { path: '/admin/dashboard', title: 'test' });
      app.use(h);
      app.use('/admin', mounted);
      app.get('/other', (_req, res) => void res.send('theirs'));
      const server = createServer(app);
      const url = await listen(server);
      closers.push(
        () => h.close(),
        () => mounted.close(),
        () => new Promise((r) => server.close(r)),
      );
      await checkServes(`${url}/dashboard`);
      await checkServes(`${url}/admin/dashboard`);
      assert.equal(await (await fetch(`${url}/other`)).text(), 'theirs');
    });
  }

  for (const [name, make] of [
    ['Fastify 5', Fastify],
    ['Fastify 4', Fastify4],
  ] as const) {
    it(`serves as a ${name} plugin`, async () => {
      const app = (make as typeof Fastify)();
      const plugin = fastifyDashboard(metrics(), { path: '/dashboard', title: 'test' });
      await app.register(plugin as never);
      app.get('/other', async () => 'theirs');
      await app.listen({ port: 0, host: '127.0.0.1' });
      const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      closers.push(() => app.close());
      await checkServes(`${url}/dashboard`);
      assert.equal(await (await fetch(`${url}/other`)).text(), 'theirs');
    });
  }

  describe('controls', () => {
    async function start(withControls: boolean): Promise<{ url: string; store: MemoryRuleStore; h: DashboardHandler }> {
      const store = new MemoryRuleStore();
      const h = dashboardHandler(metrics(), { path: '/dashboard', ...(withControls ? { controls: { store, scope: 'checkout' } } : {}) });
      const server = createServer(h);
      const url = await listen(server);
      closers.push(
        () => h.close(),
        () => new Promise((r) => server.close(r)),
        () => store.close(),
      );
      return { url: `${url}/dashboard`, store, h };
    }
    const post = (url: string, body: unknown, headers: Record<string, string> = {}, action = 'put') =>
      fetch(`${url}/controls/${action}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    /** cliRefusal is what bulwark/rules' own check (the one `bulwark rules set` runs) says of `doc`. */
    async function cliRefusal(doc: unknown): Promise<{ error: string; field: string | undefined; code: string }> {
      try {
        await checkRule(JSON.stringify(doc));
      } catch (err) {
        assert.ok(err instanceof RuleInvalidError, String(err));
        return { error: err.message, field: err.field, code: err.code };
      }
      assert.fail(`bulwark/rules accepts ${JSON.stringify(doc)}`);
    }

    it('are off unless given: read-only', async () => {
      const { url, store } = await start(false);
      const r = await post(url, { scope: 'checkout', kind: 'token-limiter', name: 'api-limit', set: { rate: 5 } });
      assert.equal(r.status, 403);
      assert.match(((await r.json()) as { error: string }).error, /read-only/);
      assert.equal((await fetch(`${url}/controls/rules`)).status, 403);
      assert.equal(store.revision, 0);
    });

    it('refuse what bulwark/rules refuses, with its very field and message, and write nothing', async () => {
      const { url, store } = await start(true);
      const bad = [
        { scope: 'checkout', kind: 'token-limiter', name: 'api-limit', set: { rate: -5 } },
        { scope: 'checkout', kind: 'token-limiter', name: 'api-limit', set: { rat: 5 } },
        { scope: 'checkout', kind: 'circuit-breaker', name: 'origin', set: { failureRate: 2 } },
        { scope: 'checkout', kind: 'weights', name: 'payments', weights: { a: -1 } },
        { scope: 'checkout', kind: 'fault', name: 'payments', fault: { abort: { percent: 10 } }, ttlMs: 10 },
        { scope: 'checkout', kind: 'fault', name: 'payments', fault: { abort: { percent: 140 } }, ttlMs: 60_000 },
        { scope: 'checkout', kind: 'fault', name: 'payments', fault: { delay: { ms: 100 } }, ttlMs: 60_000 },
        { scope: 'checkout', kind: 'fault', name: 'payments', fault: { failureRatio: 0.1 } },
        { scope: 'check/out', kind: 'isolate', name: 'origin' },
        { scope: 'checkout', kind: 'frob', name: 'origin' },
        { scope: 'checkout', kind: 'isolate', name: 'origin', extra: 1 },
      ];
      for (const doc of bad) {
        const r = await post(url, doc);
        assert.equal(r.status, 422, JSON.stringify(doc));
        assert.deepEqual(await r.json(), JSON.parse(JSON.stringify(await cliRefusal(doc))), JSON.stringify(doc));
      }
      // Spot checks that the field names what a page puts its message beside.
      assert.deepEqual(await (await post(url, bad[0])).json(), {
        error: 'TokenLimiter: rate must be a finite number > 0, got -5',
        field: 'rate',
        code: 'ERR_RULE_INVALID',
      });
      assert.equal(((await (await post(url, bad[5])).json()) as { field: string }).field, 'fault.abort.percent');
      const removeBad = await post(url, { scope: 'checkout', kind: 'frob', name: 'x' }, {}, 'remove');
      assert.equal(removeBad.status, 422);
      assert.equal(((await removeBad.json()) as { field: string }).field, 'kind');
      assert.equal(store.revision, 0, 'a refused rule wrote nothing');
      assert.deepEqual((await store.list()).records, []);
    });

    it('write a good rule to the store, which a Rules binder applies; a fault on a lease; remove', async () => {
      const { url, store } = await start(true);
      const breaker = new CircuitBreaker({ name: 'origin' });
      const rules = new Rules({ store, service: 'checkout' });
      closers.push(
        () => rules.close(),
        () => breaker.close(),
      );
      rules.bind('circuit-breaker', 'origin', breaker);
      await rules.start();
      const good = await post(url, { scope: 'checkout', kind: 'isolate', name: 'origin', reason: 'drill' });
      assert.equal(good.status, 200);
      assert.deepEqual(await good.json(), { key: 'checkout/isolate/origin', revision: 1 });
      await waitFor('the binder isolates the breaker', () => breaker.isolated, 5_000);
      const faultRule = {
        scope: 'checkout',
        kind: 'fault',
        name: 'payments',
        fault: { delay: { ms: 200, percent: 50 }, abort: { percent: 10, status: 503 } },
        ttlMs: 60_000,
      };
      const fault = await post(url, faultRule);
      assert.equal(fault.status, 200);
      const held = await store.get('checkout/fault/payments');
      assert.equal(held?.value, JSON.stringify(faultRule));
      assert.equal(held?.leased, true, 'a fault rule lives on a lease');
      const removed = await post(url, { scope: 'checkout', kind: 'isolate', name: 'origin' }, {}, 'remove');
      assert.equal(removed.status, 200);
      assert.deepEqual(await removed.json(), { key: 'checkout/isolate/origin', revision: 3 });
      await waitFor('the binder releases the breaker', () => !breaker.isolated, 5_000);
      const listed = (await (await fetch(`${url}/controls/rules`)).json()) as { records: Array<{ key: string }> };
      assert.deepEqual(
        listed.records.map((r) => r.key),
        ['checkout/fault/payments'],
      );
    });

    it('show a tracked Rules binder in the frame: the rules each component runs, and those it refused', async () => {
      const store = new MemoryRuleStore();
      const breaker = new CircuitBreaker({ name: 'origin' });
      const rules = new Rules({ store, service: 'checkout' });
      rules.bind('circuit-breaker', 'origin', breaker);
      await rules.start();
      const m = metrics();
      m.track(rules, { name: 'rules' });
      const h = dashboardHandler(m, { path: '/dashboard', tickMs: 50, controls: { store, scope: 'checkout' } });
      const server = createServer(h);
      const url = `${await listen(server)}/dashboard`;
      closers.push(
        () => h.close(),
        () => new Promise((r) => server.close(r)),
        () => rules.close(),
        () => breaker.close(),
        () => store.close(),
      );
      assert.equal((await post(url, { scope: 'checkout', kind: 'isolate', name: 'origin' })).status, 200);
      // valid offline, but a running breaker's name cannot change: the binder refuses it and says so
      assert.equal((await post(url, { scope: 'checkout', kind: 'circuit-breaker', name: 'origin', set: { name: 'renamed' } })).status, 200);
      type Bound = { kind: string; name: string; rules: string[]; isolated: string | undefined; refused: Array<{ key: string; code: string }> };
      let bound: Bound[] = [];
      await waitFor(
        'the frame to carry both',
        async () => {
          const r = await fetch(`${url}/status.json`);
          if (r.status !== 200) return false;
          const frame = (await r.json()) as { components: Array<{ kind: string; status: { components: Bound[] } }> };
          bound = frame.components.find((c) => c.kind === 'Rules')?.status.components ?? [];
          return bound.length === 1 && bound[0]!.refused.length === 1 && bound[0]!.rules.length === 1;
        },
        5_000,
      );
      assert.deepEqual(
        bound.map((b) => [b.kind, b.name, b.rules, b.refused.map((r) => [r.key, r.code])]),
        [['circuit-breaker', 'origin', ['checkout/isolate/origin'], [['checkout/circuit-breaker/origin', 'ERR_RULE_REFUSED']]]],
      );
      // What the page's Rules card draws of it (the page's own script, over the frame embedded in the page).
      const page = await (await fetch(`${url}/`)).text();
      const card = drawPage(page)
        .body.split('<div class="card">')
        .find((c) => c.startsWith('<h2>Rules: rules</h2>'));
      assert.ok(card !== undefined, 'no Rules card');
      assert.match(card, /<p class="mute">2 rules held · 1 component bound · store revision 2<\/p>/);
      assert.deepEqual(rows(card), [
        ['component', 'state', 'rules it runs', 'revision'],
        ['circuit-breaker origin', '1 refused', 'checkout/isolate/origin', '1'],
        [
          '↳ refused checkout/circuit-breaker/origin',
          'refused by the component',
          'name: CircuitBreaker: name cannot change on a running breaker (reconfigure), got &#34;renamed&#34;',
          '2',
        ],
      ]);
    });

    it('refuse a request from another origin or site, and one that is not JSON', async () => {
      const { url, store } = await start(true);
      const rule = { scope: 'checkout', kind: 'isolate', name: 'api' };
      assert.equal((await post(url, rule, { origin: 'http://evil.example' })).status, 403);
      assert.equal((await post(url, rule, { 'sec-fetch-site': 'cross-site' })).status, 403);
      assert.equal((await fetch(`${url}/controls/put`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: JSON.stringify(rule) })).status, 415);
      assert.equal(store.revision, 0);
      assert.equal((await post(url, rule, { origin: new URL(url).origin })).status, 200);
      assert.equal(store.revision, 1);
    });

    it('refuse bad options by name', () => {
      const store = new MemoryRuleStore();
      assert.throws(() => dashboardHandler(metrics(), { controls: { store } }), /dashboardHandler: controls.scope is required/);
      assert.throws(
        () => dashboardHandler(metrics(), { controls: { store, scope: 'a/b' } }),
        /dashboardHandler: controls.scope must be <service> or <service>@<instance>, got "a\/b"/,
      );
      assert.throws(
        () => dashboardHandler(metrics(), { controls: { store, scope: 'a', check: () => undefined } as never }),
        /dashboardHandler: controls: check is not an option; the options are store, scope/,
      );
      assert.throws(() => dashboardHandler(metrics(), { path: 'dash' }), /dashboardHandler: path must be an absolute URL path/);
      assert.throws(() => dashboardHandler(metrics(), { token: 'short' }), /dashboardHandler: token must be a string of at least 8 characters/);
      assert.throws(() => dashboardHandler(metrics(), { paht: '/x' } as never), /dashboardHandler: paht is not an option/);
    });
  });

  describe('actions', () => {
    it("list and press the process's own buttons under the controls' protections, and are off unless given", async () => {
      const pressed: string[] = [];
      const h = dashboardHandler(metrics(), {
        path: '/dashboard',
        actions: {
          title: 'Demo controls',
          list: () => [{ id: 'kill:a', label: 'kill', target: 'a', state: 'up' }],
          run: (id) => (pressed.push(id), `${id} done`),
        },
      });
      const server = createServer(h);
      const url = `${await listen(server)}/dashboard`;
      closers.push(
        () => h.close(),
        () => new Promise((r) => server.close(r)),
      );
      const press = (id: string, headers: Record<string, string> = {}) =>
        fetch(`${url}/actions/${id}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: '{}' });
      const listed = (await (await fetch(`${url}/actions.json`)).json()) as { title: string; actions: Array<{ id: string }> };
      assert.deepEqual([listed.title, listed.actions.map((a) => a.id)], ['Demo controls', ['kill:a']]);
      assert.equal((await press('kill:a', { origin: 'http://evil.example' })).status, 403);
      assert.equal((await press('kill:a', { 'sec-fetch-site': 'cross-site' })).status, 403);
      assert.equal((await fetch(`${url}/actions/kill:a`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{}' })).status, 415);
      assert.equal((await fetch(`${url}/actions/kill:a`)).status, 405);
      assert.equal((await press('nope')).status, 404);
      assert.deepEqual(pressed, []);
      // The page sends the id encoded (kill%3Aa).
      const ok = await press(encodeURIComponent('kill:a'), { origin: new URL(url).origin });
      assert.deepEqual([ok.status, await ok.json()], [200, { done: 'kill:a done' }]);
      assert.deepEqual(pressed, ['kill:a']);

      const plain = dashboardHandler(metrics(), { path: '/' });
      const other = createServer(plain);
      const base = await listen(other);
      closers.push(
        () => plain.close(),
        () => new Promise((r) => other.close(r)),
      );
      assert.equal((await fetch(`${base}/actions.json`)).status, 404);
      assert.equal((await fetch(`${base}/actions/kill:a`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status, 403);
      assert.throws(
        () => dashboardHandler(metrics(), { actions: { list: () => [] } as never }),
        /dashboardHandler: actions must be an object with list\(\) and run\(id\)/,
      );
    });
  });
});
