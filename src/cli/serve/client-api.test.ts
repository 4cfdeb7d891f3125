import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import fc from 'fast-check';
import { HttpPool, MAX_KEY_BYTES } from '../../cache/index.js';
import { ManualClock } from '../../core/index.js';
import { handleClient, type ClientApi } from './client-api.js';
import { ServedGroup } from './served-group.js';

function served(name: string, staleBytes: number, clock: ManualClock): ServedGroup {
  return new ServedGroup({
    name,
    cacheBytes: 1 << 20,
    hotCacheBytes: 1 << 13,
    ttlMs: 60_000,
    negativeTtlMs: 1_000,
    loadTimeoutMs: 5_000,
    staleBytes,
    staleMaxAgeMs: 60_000,
    pool: new HttpPool({ self: 'http://127.0.0.1:1' }),
    load: (key) => Promise.resolve(`v:${key}`),
    clock,
  });
}

interface Reply {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** raw sends one request line as written (no URL normalization, unlike fetch) and reads the whole answer. */
function raw(port: number, method: string, target: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('end', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const split = text.indexOf('\r\n\r\n');
      const [statusLine, ...lines] = text.slice(0, split).split('\r\n');
      const headers: Record<string, string> = {};
      for (const l of lines) headers[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
      resolve({ status: Number(statusLine!.split(' ')[1]), headers, body: text.slice(split + 4) });
    });
    socket.end(`${method} ${target} HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n`);
  });
}

/** What the client API answered before its path was parsed by hand: the regular expression it used, as the oracle. */
const FORMER_ROUTE = /^\/v1\/groups\/([^/?#]+)\/keys\/([^/?#]*)(?:\?.*)?$/;

function expected(url: string): { status: number; error?: string; body?: string } {
  const m = FORMER_ROUTE.exec(url);
  if (m === null) return { status: 404 };
  let group: string;
  let key: string;
  try {
    group = decodeURIComponent(m[1]!);
    key = decodeURIComponent(m[2]!);
  } catch {
    return { status: 400, error: 'ERR_BAD_REQUEST' };
  }
  if (group !== 'g' && group !== 'n') return { status: 404, error: 'ERR_NO_GROUP' };
  if (key.length === 0) return { status: 400, error: 'ERR_BAD_KEY' };
  if (Buffer.byteLength(key) > MAX_KEY_BYTES) return { status: 414, error: 'ERR_BAD_KEY' };
  if (key.length > 1024) return { status: 400, error: 'ERR_BAD_KEY' }; // the group's own bound, in UTF-16 units
  return { status: 200, body: Buffer.from(`v:${key}`, 'utf8').toString('latin1') };
}

describe('client API', () => {
  const clock = new ManualClock();
  const node: ClientApi = {
    groups: new Map([
      ['g', served('g', 1 << 20, clock)],
      ['n', served('n', 0, clock)],
    ]),
    config: { service: 'svc', advertise: 'http://127.0.0.1:1' },
    pool: { members: () => ['http://127.0.0.1:1'] },
  };
  let server: Server;
  let port: number;
  before(async () => {
    server = createServer((req, res) => void handleClient(node, req, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    port = (server.address() as AddressInfo).port;
  });
  after(() => server.close());

  it('answers a held value in the request’s own tick, with its length, source and age, whether or not stale values are kept', async () => {
    assert.equal((await raw(port, 'GET', '/v1/groups/g/keys/k')).headers['x-bulwark-source'], 'origin');
    clock.advance(2_500);
    const hit = await raw(port, 'GET', '/v1/groups/g/keys/k?fresh=1');
    assert.deepEqual(
      [hit.status, hit.body, hit.headers['content-length'], hit.headers['x-bulwark-source'], hit.headers['age'], hit.headers['x-bulwark-age-ms']],
      [200, 'v:k', '3', 'main', '2', '2500'],
    );
    await raw(port, 'GET', '/v1/groups/n/keys/k'); // group n keeps no stale values
    clock.advance(1_200);
    const unkept = await raw(port, 'GET', '/v1/groups/n/keys/k');
    assert.deepEqual([unkept.headers['x-bulwark-source'], unkept.headers['age'], unkept.headers['x-bulwark-age-ms']], ['main', '1', '1200']);
    const head = await raw(port, 'HEAD', '/v1/groups/g/keys/k');
    assert.deepEqual([head.status, head.headers['content-length'], head.body], [200, '3', '']);
    // The same answers again after a value of another length: the length text is the value's own.
    await raw(port, 'GET', `/v1/groups/g/keys/${'y'.repeat(100)}`);
    assert.equal((await raw(port, 'GET', '/v1/groups/g/keys/k')).headers['content-length'], '3');
  });

  it('bounds a key at 1 KiB of UTF-8 however few characters it has', async () => {
    const euro = encodeURIComponent('€'); // 3 bytes of UTF-8 in one UTF-16 unit
    const cases: [string, number][] = [
      [euro.repeat(341), 200], // 1 023 bytes
      [euro.repeat(342), 414], // 1 026 bytes in 342 units
      ['a'.repeat(1024), 200],
      ['a'.repeat(1025), 414],
      [encodeURIComponent('😀').repeat(256), 200], // 1 024 bytes in 512 units
      [encodeURIComponent('😀').repeat(257), 414],
    ];
    for (const [key, status] of cases) assert.equal((await raw(port, 'GET', `/v1/groups/g/keys/${key}`)).status, status, key.slice(0, 40));
  });

  it('routes every path as the former regular expression did: 404, 400 on bad percent-encoding, the group, the key', async () => {
    const piece = fc.constantFrom('/', '//', '?', '#', '%', '%ZZ', '%2F', '%E2%82%AC', '%C3', 'g', 'n', 'x', 'k', 'keys', 'v1', 'groups', '=', '&', '..', '');
    const url = fc.oneof(
      fc.array(piece, { maxLength: 8 }).map((p) => `/${p.join('')}`),
      fc.tuple(fc.array(piece, { maxLength: 3 }), fc.array(piece, { maxLength: 4 })).map(([g, k]) => `/v1/groups/${g.join('')}/keys/${k.join('')}`),
      fc.tuple(fc.array(piece, { maxLength: 3 }), fc.array(piece, { maxLength: 4 })).map(([g, k]) => `/v1/groups/g${g.join('')}/keys/k${k.join('')}`),
    );
    await fc.assert(
      fc.asyncProperty(url, async (u) => {
        if (u === '/v1/registry' || u.startsWith('/v1/registry?')) return;
        const want = expected(u);
        const got = await raw(port, 'GET', u);
        assert.equal(got.status, want.status, u);
        assert.equal(got.headers['x-bulwark-error'], want.error, u);
        if (want.body !== undefined) assert.equal(got.body, want.body, u);
      }),
      { numRuns: 300 },
    );
  });
});
