/**
 * dashboardHandler mounted as a user mounts it — on node:http, Express (4 and 5) and Fastify (4 and 5),
 * under a path of the user's choice — answering the page, the stream and the frame as JSON; and its
 * controls: off unless given, refusing another origin, a value the checks refuse answered 422 with the
 * field and its message and nothing written, a good one written as a rule.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import express4 from 'express4';
import Fastify from 'fastify';
import Fastify4 from 'fastify4';
import promClient from 'prom-client';
import { dashboardHandler, fastifyDashboard, type DashboardHandler } from '../src/dashboard/index.js';
import { TokenLimiter } from '../src/limit/index.js';
import { BulwarkMetrics } from '../src/metrics/index.js';
import { RecordingRuleStore } from './support/recording-rule-store.js';

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

async function checkServes(base: string): Promise<void> {
  const page = await fetch(`${base}/`);
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-type')!, /^text\/html/);
  assert.match(await page.text(), /<title>test<\/title>/);
  const redirect = await fetch(base, { redirect: 'manual' });
  assert.equal(redirect.status, 308);
  assert.equal(new URL(redirect.headers.get('location')!, base).pathname, `${new URL(base).pathname}/`);
  const status = (await (await fetch(`${base}/status.json`)).json()) as { mode: string; components: Array<{ name: string }> };
  assert.equal(status.mode, 'process');
  assert.deepEqual(status.components.map((c) => c.name), ['api-limit']);
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
    closers.push(() => h.close(), () => new Promise((r) => server.close(r)));
    await checkServes(`${url}/ops/dash`);
    assert.equal((await fetch(`${url}/other`)).status, 404);
  });

  // The two majors' types differ; the test uses what they share.
  type ExpressApp = ((req: IncomingMessage, res: ServerResponse) => void) & { use(...a: unknown[]): void; get(path: string, h: (req: unknown, res: { send(b: string): void }) => void): void };
  for (const [name, make] of [['Express 5', express], ['Express 4', express4]] as const) {
    it(`serves as ${name} middleware, with app.use(handler) and app.use(path, handler)`, async () => {
      const app = (make as unknown as () => ExpressApp)();
      const h = dashboardHandler(metrics(), { path: '/dashboard', title: 'test' });
      const mounted = dashboardHandler(metrics(), { path: '/admin/dashboard', title: 'test' });
      app.use(h);
      app.use('/admin', mounted);
      app.get('/other', (_req, res) => void res.send('theirs'));
      const server = createServer(app);
      const url = await listen(server);
      closers.push(() => h.close(), () => mounted.close(), () => new Promise((r) => server.close(r)));
      await checkServes(`${url}/dashboard`);
      await checkServes(`${url}/admin/dashboard`);
      assert.equal(await (await fetch(`${url}/other`)).text(), 'theirs');
    });
  }

  for (const [name, make] of [['Fastify 5', Fastify], ['Fastify 4', Fastify4]] as const) {
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
    async function start(withControls: boolean): Promise<{ url: string; store: RecordingRuleStore; h: DashboardHandler }> {
      const store = new RecordingRuleStore();
      const h = dashboardHandler(metrics(), { path: '/dashboard', ...(withControls ? { controls: { store, scope: 'checkout' } } : {}) });
      const server = createServer(h);
      const url = await listen(server);
      closers.push(() => h.close(), () => new Promise((r) => server.close(r)));
      return { url: `${url}/dashboard`, store, h };
    }
    const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${url}/controls/put`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

    it('are off unless given: read-only', async () => {
      const { url, store } = await start(false);
      const r = await post(url, { scope: 'checkout', kind: 'token-limiter', name: 'api-limit', set: { rate: 5 } });
      assert.equal(r.status, 403);
      assert.match(((await r.json()) as { error: string }).error, /read-only/);
      assert.equal((await fetch(`${url}/controls/rules`)).status, 403);
      assert.deepEqual(store.writes, []);
    });

    it('write a good limit as a rule, refuse a bad one with its field and message and write nothing', async () => {
      const { url, store } = await start(true);
      const bad = await post(url, { scope: 'checkout', kind: 'token-limiter', name: 'api-limit', set: { rate: -5 } });
      assert.equal(bad.status, 422);
      assert.deepEqual(await bad.json(), { error: 'TokenLimiter: rate must be a finite number > 0, got -5', field: 'set.rate' });
      const typo = await post(url, { scope: 'checkout', kind: 'token-limiter', name: 'api-limit', set: { rat: 5 } });
      assert.equal(typo.status, 422);
      assert.match(((await typo.json()) as { error: string }).error, /rat is not an option/);
      assert.equal((await post(url, { scope: 'checkout', kind: 'weights', name: 'payments', weights: { a: -1 } })).status, 422);
      assert.equal((await post(url, { scope: 'checkout', kind: 'fault', name: 'payments', fault: {}, ttlMs: 10 })).status, 422);
      assert.deepEqual(store.writes, []);
      const good = await post(url, { scope: 'checkout', kind: 'token-limiter', name: 'api-limit', set: { rate: 5 } });
      assert.equal(good.status, 200);
      assert.deepEqual(await good.json(), { key: 'checkout/token-limiter/api-limit', revision: 1 });
      const fault = await post(url, { scope: 'checkout', kind: 'fault', name: 'payments', fault: { failureRatio: 0.1 }, ttlMs: 60_000 });
      assert.equal(fault.status, 200);
      const removed = await fetch(`${url}/controls/remove`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ scope: 'checkout', kind: 'token-limiter', name: 'api-limit' }) });
      assert.equal(removed.status, 200);
      assert.deepEqual(store.writes, [
        { op: 'put', key: 'checkout/token-limiter/api-limit', value: JSON.stringify({ scope: 'checkout', kind: 'token-limiter', name: 'api-limit', set: { rate: 5 } }) },
        { op: 'put', key: 'checkout/fault/payments', value: JSON.stringify({ scope: 'checkout', kind: 'fault', name: 'payments', fault: { failureRatio: 0.1 }, ttlMs: 60_000 }), ttlMs: 60_000 },
        { op: 'remove', key: 'checkout/token-limiter/api-limit' },
      ]);
      const listed = (await (await fetch(`${url}/controls/rules`)).json()) as { records: Array<{ key: string }> };
      assert.deepEqual(listed.records.map((r) => r.key), ['checkout/fault/payments']);
    });

    it('refuse a request from another origin or site, and one that is not JSON', async () => {
      const { url, store } = await start(true);
      const rule = { scope: 'checkout', kind: 'isolate', name: 'api' };
      assert.equal((await post(url, rule, { origin: 'http://evil.example' })).status, 403);
      assert.equal((await post(url, rule, { 'sec-fetch-site': 'cross-site' })).status, 403);
      assert.equal((await fetch(`${url}/controls/put`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: JSON.stringify(rule) })).status, 415);
      assert.deepEqual(store.writes, []);
      assert.equal((await post(url, rule, { origin: new URL(url).origin })).status, 200);
      assert.equal(store.writes.length, 1);
    });

    it('refuse bad options by name', () => {
      const store = new RecordingRuleStore();
      assert.throws(() => dashboardHandler(metrics(), { controls: { store } }), /dashboardHandler: controls.scope is required/);
      assert.throws(() => dashboardHandler(metrics(), { path: 'dash' }), /dashboardHandler: path must be an absolute URL path/);
      assert.throws(() => dashboardHandler(metrics(), { token: 'short' }), /dashboardHandler: token must be a string of at least 8 characters/);
      assert.throws(() => dashboardHandler(metrics(), { paht: '/x' } as never), /dashboardHandler: paht is not an option/);
    });
  });

  describe('actions', () => {
    it('list and press the process\'s own buttons under the controls\' protections, and are off unless given', async () => {
      const pressed: string[] = [];
      const h = dashboardHandler(metrics(), {
        path: '/dashboard',
        actions: { title: 'Demo controls', list: () => [{ id: 'kill:a', label: 'kill', target: 'a', state: 'up' }], run: (id) => (pressed.push(id), `${id} done`) },
      });
      const server = createServer(h);
      const url = `${await listen(server)}/dashboard`;
      closers.push(() => h.close(), () => new Promise((r) => server.close(r)));
      const press = (id: string, headers: Record<string, string> = {}) => fetch(`${url}/actions/${id}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: '{}' });
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
      closers.push(() => plain.close(), () => new Promise((r) => other.close(r)));
      assert.equal((await fetch(`${base}/actions.json`)).status, 404);
      assert.equal((await fetch(`${base}/actions/kill:a`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status, 403);
      assert.throws(() => dashboardHandler(metrics(), { actions: { list: () => [] } as never }), /dashboardHandler: actions must be an object with list\(\) and run\(id\)/);
    });
  });
});
