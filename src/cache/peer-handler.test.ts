import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { Readable } from 'node:stream';
import type { IncomingMessage, ServerResponse } from 'node:http';
import fc from 'fast-check';
import { ManualClock } from '../core/clock.js';
import { NotFoundError } from '../core/errors.js';
import { decodeGetResponse, decodeRemoveResponse, encodePeerRequest } from './codec.js';
import { Group } from './group.js';
import { HttpPool } from './http-pool.js';
import { MAX_REQUEST_BYTES, PEER_STATUSES } from './peer-handler.js';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, sign } from './signing.js';

/** FakeRes records what the handler writes; it checks the handler answers exactly once. */
class FakeRes extends EventEmitter {
  statusCode = 200;
  headers: Record<string, string | number> = {};
  body: Buffer | undefined;
  ends = 0;
  get headersSent() {
    return this.ends > 0;
  }
  get writableEnded() {
    return this.ends > 0;
  }
  setHeader(name: string, value: string | number) {
    this.headers[name.toLowerCase()] = value;
    return this;
  }
  writeHead(status: number, raw: string[]) {
    this.statusCode = status;
    for (let i = 0; i < raw.length; i += 2) this.setHeader(raw[i]!, raw[i + 1]!);
    return this;
  }
  end(body?: Uint8Array | string) {
    this.ends++;
    this.body = body === undefined ? Buffer.alloc(0) : Buffer.from(body as Uint8Array);
    this.emit('close');
    return this;
  }
}

/** fakeReq is a readable request whose body is `body` (in chunks of at most 1 000 bytes). */
function fakeReq(method: string, url: string, headers: Record<string, string> = {}, body: Uint8Array = new Uint8Array()): IncomingMessage {
  const chunks: Buffer[] = [];
  for (let i = 0; i < body.length; i += 1000) chunks.push(Buffer.from(body.subarray(i, i + 1000)));
  return Object.assign(Readable.from(chunks), { method, url, headers }) as unknown as IncomingMessage;
}

/** bodyReq is a peer's request: POST (get) or DELETE (remove) to the base path with a protobuf body. */
function bodyReq(method: string, group: string, key: string, headers: Record<string, string> = {}): IncomingMessage {
  const body = encodePeerRequest(group, key);
  return fakeReq(method, '/_bulwark/', { 'content-length': String(body.length), ...headers }, body);
}

const NOW = 1_700_000_000_000;
const SECRET = 'shh';

function makePools() {
  const open = new HttpPool({ self: 'http://127.0.0.1:1' });
  const signed = new HttpPool({ self: 'http://127.0.0.1:2', secret: SECRET, clock: new ManualClock(NOW) });
  for (const pool of [open, signed]) {
    new Group({
      name: 'scores',
      cacheBytes: 1 << 16,
      peers: pool,
      timeoutMs: 50,
      getter: (key) => {
        if (key.startsWith('nf')) throw new NotFoundError();
        if (key.startsWith('err')) throw new Error('db down');
        if (key.startsWith('hang')) return new Promise<string>(() => {});
        return `v:${key}`;
      },
    });
  }
  return { open, signed };
}

async function call(pool: HttpPool, req: IncomingMessage): Promise<FakeRes> {
  const res = new FakeRes();
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`handler hung on ${req.method} ${req.url}`)), 2_000);
  });
  try {
    await Promise.race([pool.handler(req, res as unknown as ServerResponse), hang]);
  } finally {
    clearTimeout(timer);
  }
  return res;
}

function signedHeaders(method: string, url: string, ts = NOW, secret = SECRET, body?: Uint8Array): Record<string, string> {
  return { [TIMESTAMP_HEADER]: String(ts), [SIGNATURE_HEADER]: sign(secret, method, url, String(ts), body) };
}

describe('peer handler', () => {
  const { open, signed } = makePools();
  after(() => Promise.all([open.close(), signed.close()]));

  const body = (group: string, key: string) => encodePeerRequest(group, key);
  const bodyTable: [string, string, Uint8Array, number][] = [
    ['POST', 'a GetRequest', body('scores', 'Tom'), 200],
    ['POST', 'a GetRequest for a missing key', body('scores', 'nf-1'), 200],
    ['DELETE', 'a RemoveRequest', body('scores', 'Tom'), 200],
    ['POST', 'an unknown group', body('nope', 'Tom'), 404],
    ['DELETE', 'an unknown group', body('nope', 'Tom'), 404],
    ['POST', 'an empty body', new Uint8Array(), 400],
    ['POST', 'an empty key', body('scores', ''), 400],
    ['POST', 'a key over 1 KiB', body('scores', 'x'.repeat(1025)), 400],
    ['POST', 'a key of 1 KiB', body('scores', 'x'.repeat(1024)), 200],
    ['POST', 'truncated protobuf', body('scores', 'Tom').subarray(0, 5), 400],
    ['POST', 'a wrong wire type', new Uint8Array([0x08, 1, 0x12, 1, 0x41]), 400],
    ['POST', 'a key that is not UTF-8', new Uint8Array([0x0a, 6, ...Buffer.from('scores'), 0x12, 2, 0xc3, 0x28]), 400],
    ['POST', 'a body over the limit', new Uint8Array(MAX_REQUEST_BYTES + 1), 413],
    ['GET', 'a body', body('scores', 'Tom'), 405],
    ['PUT', 'a body', body('scores', 'Tom'), 405],
  ];
  for (const [method, what, b, status] of bodyTable) {
    it(`answers ${status} to ${method} /_bulwark/ with ${what}`, async () => {
      const res = await call(open, fakeReq(method, '/_bulwark/', { 'content-length': String(b.length) }, b));
      assert.equal(res.statusCode, status, res.body?.toString());
      assert.equal(res.ends, 1);
    });
  }

  it('answers 400, not a hang, when middleware already read the body', async () => {
    const req = bodyReq('POST', 'scores', 'Tom');
    for await (const _ of req) void _;
    const res = await call(open, req);
    assert.equal(res.statusCode, 400);
  });

  it('answers 413 to a body over the limit even when its length is not declared', async () => {
    const res = await call(open, fakeReq('POST', '/_bulwark/', { 'transfer-encoding': 'chunked' }, new Uint8Array(MAX_REQUEST_BYTES + 1)));
    assert.equal(res.statusCode, 413);
    assert.equal(res.headers['connection'], 'close');
  });

  const table: [string, string, Record<string, string>, number][] = [
    ['GET', '/_bulwark/scores/Tom', {}, 200],
    ['GET', '/_bulwark/scores/nf-1', {}, 200],
    ['DELETE', '/_bulwark/scores/Tom', {}, 405],
    ['GET', '/elsewhere', {}, 404],
    ['GET', '/_bulwark/nope/Tom', {}, 404],
    ['POST', '/_bulwark/scores/Tom', {}, 405],
    ['GET', '/_bulwark/?x=1', {}, 400],
    ['GET', '/_bulwark/scores/', {}, 400],
    ['GET', '/_bulwark/scores', {}, 400],
    ['GET', '/_bulwark//Tom', {}, 400],
    ['GET', '/_bulwark/scores/%E0%A4%A', {}, 400],
    ['GET', '/_bulwark/scores/%ZZ', {}, 400],
    ['GET', `/_bulwark/scores/${'x'.repeat(1025)}`, {}, 400],
    ['GET', '/_bulwark/scores/Tom?x=1', {}, 400],
    ['GET', '/_bulwark/scores/Tom', { 'content-length': '5' }, 400],
    ['GET', '/_bulwark/scores/Tom', { 'transfer-encoding': 'chunked' }, 400],
    ['GET', '/_bulwark/scores/err-1', {}, 502],
    ['GET', '/_bulwark/scores/hang-1', {}, 504],
  ];
  for (const [method, url, headers, status] of table) {
    it(`answers ${status} to ${method} ${url.slice(0, 40)} ${JSON.stringify(headers)}`, async () => {
      const res = await call(open, fakeReq(method, url, headers));
      assert.equal(res.statusCode, status, res.body?.toString());
      assert.equal(res.ends, 1);
    });
  }

  it('answers a value and a not-found as protobuf, in both forms', async () => {
    const ok = await call(open, bodyReq('POST', 'scores', 'Tom/1'));
    assert.equal(ok.headers['content-type'], 'application/x-protobuf');
    assert.equal(decodeGetResponse(ok.body!, 100).value, 'v:Tom/1');
    const byPath = await call(open, fakeReq('GET', '/_bulwark/scores/Tom%2F1'));
    assert.deepEqual(byPath.body, ok.body);
    const nf = await call(open, bodyReq('POST', 'scores', 'nf-2'));
    assert.equal(decodeGetResponse(nf.body!, 100).notFound, true);
    const rm = await call(open, bodyReq('DELETE', 'scores', 'Tom/1'));
    assert.equal(decodeRemoveResponse(rm.body!), true);
    const again = await call(open, bodyReq('DELETE', 'scores', 'Tom/1'));
    assert.equal(decodeRemoveResponse(again.body!), false);
  });

  it('with a secret: a body request is refused (401) unless signed over method, path, time and that very body', async () => {
    const url = '/_bulwark/';
    const tom = encodePeerRequest('scores', 'Tom');
    const jack = encodePeerRequest('scores', 'Jack');
    const send = (method: string, b: Uint8Array, h: Record<string, string>) =>
      call(signed, fakeReq(method, url, { 'content-length': String(b.length), ...h }, b));
    assert.equal((await send('POST', tom, {})).statusCode, 401);
    assert.equal((await send('POST', tom, signedHeaders('POST', url, NOW, 'wrong', tom))).statusCode, 401);
    assert.equal((await send('POST', tom, signedHeaders('POST', url, NOW - 30_001, SECRET, tom))).statusCode, 401);
    assert.equal((await send('POST', tom, signedHeaders('DELETE', url, NOW, SECRET, tom))).statusCode, 401);
    // The key swapped under a valid signature: refused.
    assert.equal((await send('POST', jack, signedHeaders('POST', url, NOW, SECRET, tom))).statusCode, 401);
    assert.equal((await send('POST', tom, signedHeaders('POST', url, NOW))).statusCode, 401);
    assert.equal((await send('POST', tom, signedHeaders('POST', url, NOW + 29_000, SECRET, tom))).statusCode, 200);
    const ok = await send('POST', tom, signedHeaders('POST', url, NOW, SECRET, tom));
    assert.equal(decodeGetResponse(ok.body!, 100).value, 'v:Tom');
    assert.equal((await send('DELETE', tom, signedHeaders('DELETE', url, NOW, SECRET, tom))).statusCode, 200);
  });

  it('with a secret: the GET form is refused (401) unless signed within ±30 s', async () => {
    const url = '/_bulwark/scores/Tom';
    assert.equal((await call(signed, fakeReq('GET', url))).statusCode, 401);
    assert.equal((await call(signed, fakeReq('GET', url, signedHeaders('GET', url, NOW, 'wrong')))).statusCode, 401);
    assert.equal((await call(signed, fakeReq('GET', url, signedHeaders('GET', url, NOW - 30_001)))).statusCode, 401);
    assert.equal((await call(signed, fakeReq('GET', url, signedHeaders('POST', url)))).statusCode, 401);
    assert.equal((await call(signed, fakeReq('GET', url, signedHeaders('GET', '/_bulwark/scores/Jack')))).statusCode, 401);
    assert.equal((await call(signed, fakeReq('GET', url, signedHeaders('GET', url, NOW + 29_000)))).statusCode, 200);
    assert.equal((await call(signed, fakeReq('GET', url, signedHeaders('GET', url)))).statusCode, 200);
  });

  it('never crashes or hangs, and answers only documented statuses, for 10 000 random methods, paths, headers and bodies', async () => {
    const segment = fc.oneof(
      fc.constantFrom('scores', 'Tom', 'nf-x', 'err-x', '', '%', '%2', '%ZZ', '%E0%A4%A8', '%F0%9F%98%80', '%ED%A0%80', '..', '?', '#'),
      fc.string({ maxLength: 12 }),
      fc.string({ unit: 'binary', maxLength: 8 }),
    );
    const path = fc.oneof(
      fc.string({ minLength: 1, maxLength: 20 }).map((k) => `/_bulwark/scores/${encodeURIComponent(k.replace(/[\uD800-\uDFFF]/g, 'x'))}`),
      fc.array(segment, { maxLength: 4 }).map((s) => `/_bulwark/${s.join('/')}`),
      fc.array(segment, { maxLength: 4 }).map((s) => s.join('/')),
      fc.constantFrom('', '/', '/_bulwark', '/_bulwark/', '/_bulwark/', '/_bulwark/', '/_bulwark/?', `/_bulwark/scores/${'k'.repeat(2000)}`),
    );
    const method = fc.oneof(fc.constantFrom('GET', 'DELETE', 'POST', 'POST', 'PUT', 'HEAD', 'OPTIONS', ''), fc.string({ maxLength: 8 }));
    const text = fc.oneof(fc.constantFrom('scores', 'Tom', 'nf-x', 'err-x', ''), fc.string({ maxLength: 12 }), fc.constant('k'.repeat(1025)));
    const body = fc.oneof(
      fc.constant(new Uint8Array()),
      fc.tuple(text, text).map(([g, k]) => encodePeerRequest(g, k)),
      fc.tuple(text, fc.nat(40)).map(([k, cut]) => encodePeerRequest('scores', k).subarray(0, cut)),
      fc.uint8Array({ maxLength: 64 }),
      fc.tuple(fc.uint8Array({ maxLength: 8 }), fc.constantFrom(MAX_REQUEST_BYTES - 8, MAX_REQUEST_BYTES + 1, 3 * MAX_REQUEST_BYTES)).map(([b, n]) => {
        const big = new Uint8Array(n);
        big.set(b);
        return big;
      }),
    );
    const headers = fc.oneof(
      fc.constant({}),
      fc.dictionary(
        fc.constantFrom('content-length', 'transfer-encoding', TIMESTAMP_HEADER, SIGNATURE_HEADER, 'x-other'),
        fc.oneof(fc.string({ maxLength: 70 }), fc.constantFrom('0', '5', String(NOW), 'a'.repeat(64))),
      ),
    );
    const seen = new Set<number>();
    await fc.assert(
      fc.asyncProperty(fc.boolean(), method, path, headers, body, fc.boolean(), async (useSigned, m, p, h, b, signIt) => {
        const pool = useSigned ? signed : open;
        const hs = signIt && useSigned ? { ...h, ...signedHeaders(m, p, NOW, SECRET, b) } : h;
        const res = await call(pool, fakeReq(m, p, hs, b));
        seen.add(res.statusCode);
        assert.ok(PEER_STATUSES.includes(res.statusCode), `status ${res.statusCode} for ${m} ${p}`);
        assert.equal(res.ends, 1, 'answered exactly once');
        assert.equal(Number(res.headers['content-length']), res.body!.byteLength);
      }),
      { numRuns: 10_000 },
    );
    for (const s of [200, 400, 401, 404, 405, 413]) assert.ok(seen.has(s), `fuzzing never produced ${s}: ${[...seen]}`);
  });

  describe('groupcache mode', () => {
    const pool = new HttpPool({ self: 'http://127.0.0.1:3', protocol: 'groupcache' });
    new Group({
      name: 'scores',
      cacheBytes: 1 << 16,
      peers: pool,
      negativeTtlMs: 5_000,
      getter: (key) => {
        if (key.startsWith('nf')) throw new NotFoundError();
        return `v:${key}`;
      },
    });
    after(() => pool.close());

    async function get(url: string): Promise<FakeRes> {
      const res = new FakeRes();
      await pool.handler(fakeReq('GET', url), res as unknown as ServerResponse);
      return res;
    }

    it("decodes the path as Go's url.QueryUnescape does: + is a space, %2B a plus", async () => {
      const table: [string, string][] = [
        ['/_groupcache/scores/red+shoes', 'v:red shoes'],
        ['/_groupcache/scores/a%2Bb', 'v:a+b'],
        ['/_groupcache/scores/a%20b', 'v:a b'],
        ['/_groupcache/scores/a%2Fb%25', 'v:a/b%'],
        ['/_groupcache/scores/%C3%BC', 'v:ü'],
      ];
      for (const [url, value] of table) {
        const res = await get(url);
        assert.equal(res.statusCode, 200, url);
        assert.equal(decodeGetResponse(res.body!, 1 << 20).value, Buffer.from(value, 'utf8').toString('latin1'), url);
        assert.equal(res.headers['x-bulwark-node'], '1');
      }
    });

    it('answers "not found" as a 404 marked with x-bulwark-not-found (the miss\'s TTL), and unknown groups as a plain 404', async () => {
      const nf = await get('/_groupcache/scores/nf-1');
      assert.equal(nf.statusCode, 404);
      assert.ok(Number(nf.headers['x-bulwark-not-found']) > 0);
      const unknown = await get('/_groupcache/nope/k');
      assert.equal(unknown.statusCode, 404);
      assert.equal(unknown.headers['x-bulwark-not-found'], undefined);
    });

    it("answers Go's bad request for a path without a key, as Go does (400)", async () => {
      assert.equal((await get('/_groupcache/scores')).statusCode, 400);
    });
  });

  it('answers a peek from the caches only: not_held on a miss, the value once held', async () => {
    const pool = new HttpPool({ self: 'http://127.0.0.1:4' });
    let loads = 0;
    new Group({ name: 'scores', cacheBytes: 1 << 16, peers: pool, getter: (key) => (loads++, `v:${key}`) });
    const ask = async (mode: 'peek' | 'local') => {
      const body = encodePeerRequest('scores', 'k', mode);
      const res = new FakeRes();
      await pool.handler(fakeReq('POST', '/_bulwark/', { 'content-length': String(body.length) }, body), res as unknown as ServerResponse);
      assert.equal(res.statusCode, 200);
      return decodeGetResponse(res.body!, 1 << 20);
    };
    assert.deepEqual(await ask('peek'), { value: '', ttlMs: 0, notFound: false, notHeld: true });
    assert.equal(loads, 0);
    assert.equal((await ask('local')).value, 'v:k');
    assert.equal((await ask('peek')).value, 'v:k');
    assert.equal(loads, 1);
    await pool.close();
  });
});
