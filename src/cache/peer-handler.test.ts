import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import fc from 'fast-check';
import { NotFoundError } from '../core/errors.js';
import { decodeGetResponse, decodeRemoveResponse } from './codec.js';
import { Group } from './group.js';
import { HttpPool } from './http-pool.js';
import { PEER_STATUSES } from './peer-handler.js';
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

function fakeReq(method: string, url: string, headers: Record<string, string> = {}): IncomingMessage {
  return { method, url, headers } as unknown as IncomingMessage;
}

const NOW = 1_700_000_000_000;
const SECRET = 'shh';

function makePools() {
  const open = new HttpPool({ self: 'http://127.0.0.1:1' });
  const signed = new HttpPool({ self: 'http://127.0.0.1:2', secret: SECRET, wallClock: () => NOW });
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

function signedHeaders(method: string, url: string, ts = NOW, secret = SECRET): Record<string, string> {
  return { [TIMESTAMP_HEADER]: String(ts), [SIGNATURE_HEADER]: sign(secret, method, url, String(ts)) };
}

describe('peer handler', () => {
  const { open, signed } = makePools();
  after(() => Promise.all([open.close(), signed.close()]));

  const table: [string, string, Record<string, string>, number][] = [
    ['GET', '/_bulwark/scores/Tom', {}, 200],
    ['GET', '/_bulwark/scores/nf-1', {}, 200],
    ['DELETE', '/_bulwark/scores/Tom', {}, 200],
    ['GET', '/elsewhere', {}, 404],
    ['GET', '/_bulwark/nope/Tom', {}, 404],
    ['POST', '/_bulwark/scores/Tom', {}, 405],
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

  it('answers a value and a not-found as protobuf', async () => {
    const ok = await call(open, fakeReq('GET', '/_bulwark/scores/Tom%2F1'));
    assert.equal(ok.headers['content-type'], 'application/x-protobuf');
    assert.equal(decodeGetResponse(ok.body!, 100).value, 'v:Tom/1');
    const nf = await call(open, fakeReq('GET', '/_bulwark/scores/nf-2'));
    assert.equal(decodeGetResponse(nf.body!, 100).notFound, true);
    const rm = await call(open, fakeReq('DELETE', '/_bulwark/scores/Tom%2F1'));
    assert.equal(decodeRemoveResponse(rm.body!), true);
  });

  it('with a secret: 401 unless signed with the same secret within ±30 s', async () => {
    const url = '/_bulwark/scores/Tom';
    assert.equal((await call(signed, fakeReq('GET', url))).statusCode, 401);
    assert.equal((await call(signed, fakeReq('GET', url, signedHeaders('GET', url, NOW, 'wrong')))).statusCode, 401);
    assert.equal((await call(signed, fakeReq('GET', url, signedHeaders('GET', url, NOW - 30_001)))).statusCode, 401);
    assert.equal((await call(signed, fakeReq('GET', url, signedHeaders('DELETE', url)))).statusCode, 401);
    assert.equal((await call(signed, fakeReq('GET', url, signedHeaders('GET', '/_bulwark/scores/Jack')))).statusCode, 401);
    assert.equal((await call(signed, fakeReq('GET', url, signedHeaders('GET', url, NOW + 29_000)))).statusCode, 200);
    assert.equal((await call(signed, fakeReq('GET', url, signedHeaders('GET', url)))).statusCode, 200);
  });

  it('never crashes or hangs, and answers only documented statuses, for 10 000 random requests', async () => {
    const segment = fc.oneof(
      fc.constantFrom('scores', 'Tom', 'nf-x', 'err-x', '', '%', '%2', '%ZZ', '%E0%A4%A8', '%F0%9F%98%80', '%ED%A0%80', '..', '?', '#'),
      fc.string({ maxLength: 12 }),
      fc.string({ unit: 'binary', maxLength: 8 }),
    );
    const path = fc.oneof(
      fc.string({ minLength: 1, maxLength: 20 }).map((k) => `/_bulwark/scores/${encodeURIComponent(k.replace(/[\uD800-\uDFFF]/g, 'x'))}`),
      fc.array(segment, { maxLength: 4 }).map((s) => `/_bulwark/${s.join('/')}`),
      fc.array(segment, { maxLength: 4 }).map((s) => s.join('/')),
      fc.constantFrom('', '/', '/_bulwark', '/_bulwark/', `/_bulwark/scores/${'k'.repeat(2000)}`),
    );
    const method = fc.oneof(fc.constantFrom('GET', 'DELETE', 'POST', 'PUT', 'HEAD', 'OPTIONS', ''), fc.string({ maxLength: 8 }));
    const headers = fc.oneof(fc.constant({}), fc.dictionary(
      fc.constantFrom('content-length', 'transfer-encoding', TIMESTAMP_HEADER, SIGNATURE_HEADER, 'x-other'),
      fc.oneof(fc.string({ maxLength: 70 }), fc.constantFrom('0', '5', String(NOW), 'a'.repeat(64))),
    ));
    const seen = new Set<number>();
    await fc.assert(
      fc.asyncProperty(fc.boolean(), method, path, headers, fc.boolean(), async (useSigned, m, p, h, signIt) => {
        const pool = useSigned ? signed : open;
        const hs = signIt && useSigned ? { ...h, ...signedHeaders(m, p) } : h;
        const res = await call(pool, fakeReq(m, p, hs));
        seen.add(res.statusCode);
        assert.ok(PEER_STATUSES.includes(res.statusCode), `status ${res.statusCode} for ${m} ${p}`);
        assert.equal(res.ends, 1, 'answered exactly once');
        assert.equal(Number(res.headers['content-length']), res.body!.byteLength);
      }),
      { numRuns: 10_000 },
    );
    for (const s of [200, 400, 401, 404, 405]) assert.ok(seen.has(s), `fuzzing never produced ${s}: ${[...seen]}`);
  });
});
