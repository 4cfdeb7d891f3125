// ResilientClient.fetch against real HTTP servers on loopback, discovered through a MemoryRegistry.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { InvalidResponseError, NotFoundError, PeerError } from '../src/core/errors.js';
import { MemoryRegistry } from '../src/registry/memory-registry.js';
import { ResilientClient, type ResilientClientOptions } from '../src/client/index.js';

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

async function serve(handler: Handler) {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      hits.push(`${req.method} ${req.url}`);
      handler(req, res, body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    hits,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

async function cluster(handlers: Record<string, Handler>, options: Partial<ResilientClientOptions> = {}) {
  const registry = new MemoryRegistry();
  const servers = new Map<string, Awaited<ReturnType<typeof serve>>>();
  for (const [id, h] of Object.entries(handlers)) {
    const s = await serve(h);
    servers.set(id, s);
    await registry.register({ id, name: 'payments', address: s.address });
  }
  // Round robin keeps the order of attempts predictable; P2C is exercised end to end elsewhere.
  const client = new ResilientClient({ registry, balancer: { strategy: 'round-robin' }, ...options });
  return {
    client,
    registry,
    servers,
    hits: (id: string) => servers.get(id)!.hits.length,
    async close() {
      await client.close();
      await registry.close();
      await Promise.all([...servers.values()].map((s) => s.close()));
    },
  };
}

const ok: Handler = (_req, res, body) => res.writeHead(200, { 'content-type': 'application/json', 'x-seen': body }).end('{"ok":true}');
const status =
  (code: number): Handler =>
  (_req, res) =>
    res.writeHead(code).end(`status ${code}`);

describe('ResilientClient.fetch', () => {
  it('resolves the host as a service name and answers a Response with status, headers and body', async () => {
    const c = await cluster({ a: ok });
    const res = await c.client.fetch('http://payments/api/pay?x=1', { method: 'POST', body: 'hello', headers: { 'x-test': '1' }, retry: false });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-seen'), 'hello');
    assert.deepEqual(await res.json(), { ok: true });
    assert.deepEqual(c.servers.get('a')!.hits, ['POST /api/pay?x=1']);
    await c.close();
  });

  it('counts a 5xx as a failure and retries a GET on another instance', async () => {
    const c = await cluster({ a: status(503), b: ok });
    for (let i = 0; i < 4; i++) assert.equal((await c.client.fetch('http://payments/x')).status, 200);
    assert.equal(c.hits('b'), 4);
    assert.ok(c.hits('a') >= 1, 'round robin never tried a');
    assert.equal(c.client.stats().failedAttempts, c.hits('a'));
    assert.equal(c.client.stats().retries, c.hits('a'));
    await c.close();
  });

  it('counts a 4xx as a success: not retried, answered as it is', async () => {
    const c = await cluster({ a: status(404), b: status(404) });
    const res = await c.client.fetch('http://payments/missing');
    assert.equal(res.status, 404);
    assert.equal(c.hits('a') + c.hits('b'), 1);
    assert.equal(c.client.stats().failedAttempts, 0);
    await c.close();
  });

  it('does not retry a POST unless asked', async () => {
    const c = await cluster({ a: status(500), b: status(500) });
    const res = await c.client.fetch('http://payments/pay', { method: 'POST', body: '{}' });
    assert.equal(res.status, 500, 'the last 5xx answer is the answer when nothing else took over');
    assert.equal(await res.text(), 'status 500');
    assert.equal(c.hits('a') + c.hits('b'), 1);
    await c.close();
  });

  it('retries a POST on another instance when asked', async () => {
    const c = await cluster({ a: status(500), b: ok });
    for (let i = 0; i < 4; i++) assert.equal((await c.client.fetch('http://payments/pay', { method: 'POST', body: '{}', retry: true })).status, 200);
    assert.equal(c.hits('b'), 4);
    assert.ok(c.hits('a') >= 1);
    await c.close();
  });

  it('hands the fallback a PeerError with the status when every attempt answered 5xx', async () => {
    const c = await cluster({ a: status(502), b: status(503) });
    let seen: unknown;
    const res = await c.client.fetch('http://payments/x', {
      fallback: (err) => {
        seen = err;
        return new Response('cached', { status: 200 });
      },
    });
    assert.equal(await res.text(), 'cached');
    assert.ok(seen instanceof PeerError);
    assert.ok(seen.status === 502 || seen.status === 503);
    assert.equal(c.client.stats().fallbacks, 1);
    await c.close();
  });

  it('retries a network error on another instance', async () => {
    const c = await cluster({ a: ok, b: ok });
    await c.servers.get('a')!.close(); // a refuses connections now
    for (let i = 0; i < 4; i++) assert.equal((await c.client.fetch('http://payments/x')).status, 200);
    assert.equal(c.hits('b'), 4);
    assert.ok(c.client.stats().failedAttempts >= 1);
    await c.close();
  });

  it('rejects with NotFoundError for a service that is not registered', async () => {
    const c = await cluster({ a: ok });
    await assert.rejects(c.client.fetch('http://refunds/x'), NotFoundError);
    await c.close();
  });

  it('rejects bad URLs and bodies with TypeError, before any request', async () => {
    const c = await cluster({ a: ok });
    await assert.rejects(c.client.fetch('payments/x'), TypeError);
    await assert.rejects(c.client.fetch('ftp://payments/x'), TypeError);
    await assert.rejects(c.client.fetch('http://payments:8080/x'), /leave port/);
    await assert.rejects(c.client.fetch('http://payments/x', { method: 'GE T' }), TypeError);
    await assert.rejects(
      c.client.fetch('http://payments/x', { method: 'POST', body: {} as unknown as string }),
      /stream cannot be retried|string or a Uint8Array/,
    );
    assert.equal(c.hits('a'), 0);
    await c.close();
  });

  it('fails an attempt whose body is larger than maxResponseBytes', async () => {
    const big: Handler = (_req, res) => res.writeHead(200).end(Buffer.alloc(2_000, 1));
    const c = await cluster({ a: big }, { maxResponseBytes: 1_000 });
    await assert.rejects(c.client.fetch('http://payments/x', { retry: false }), InvalidResponseError);
    await c.close();
  });

  it('times out a slow answer (body included) and retries elsewhere', async () => {
    const slow: Handler = (_req, res) => {
      res.writeHead(200);
      res.write('partial');
      setTimeout(() => res.end('rest'), 5_000).unref();
    };
    // A deadline a loaded machine still meets for the healthy instance, far below the slow body's end.
    const c = await cluster({ a: slow, b: ok }, { timeoutMs: 500 });
    const res = await c.client.fetch('http://payments/x');
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { ok: true });
    await c.close();
  });

  it('keeps one keep-alive pool per instance and closes the pool of an instance that left', async () => {
    const c = await cluster({ a: ok, b: ok });
    for (let i = 0; i < 6; i++) await c.client.fetch('http://payments/x');
    const pools = (c.client as unknown as { pools: { size: number; has(o: string): boolean } }).pools;
    assert.equal(pools.size, 2);
    const a = c.servers.get('a')!;
    await c.registry.deregister({ id: 'a', name: 'payments', address: a.address });
    for (let i = 0; i < 50 && pools.has(`http://${a.address}`); i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(pools.has(`http://${a.address}`), false);
    await c.close();
  });

  it("stops at once when the caller's signal aborts, without blaming the instance", async () => {
    const hang: Handler = () => {}; // never answers
    const c = await cluster({ a: hang, b: hang }, { timeoutMs: 10_000 });
    const caller = new AbortController();
    const p = c.client.fetch('http://payments/x', { signal: caller.signal });
    setTimeout(() => caller.abort(new Error('user left')), 30);
    const err = await p.catch((e: unknown) => e);
    assert.ok(err instanceof Error && err.name === 'AbortedError', String(err));
    assert.equal(c.client.stats().failedAttempts, 0);
    assert.equal(c.client.stats().attempts, 1);
    await c.close();
  });
});
