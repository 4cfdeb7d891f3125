/**
 * Three cache nodes on loopback, talking over real HTTP (undici pools → node:http handlers).
 */
import { describe, it, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { request } from 'undici';
import { ManualClock } from '../src/core/clock.js';
import { NotFoundError, PeerError } from '../src/core/errors.js';
import { decodeGetResponse, decodeRemoveResponse, encodePeerRequest } from '../src/cache/codec.js';
import { MAX_REQUEST_BYTES } from '../src/cache/peer-handler.js';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, sign } from '../src/cache/signing.js';
import { startCluster, startNode, listen, type CacheNode } from './cache-nodes.js';
import { waitFor } from './support/servers.js';

let nodes: CacheNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  nodes = [];
});

/** keyOwnedBy finds a key that `owner` owns, by the ring every node shares. */
function keyOwnedBy(owner: CacheNode, prefix = 'key'): string {
  for (let i = 0; ; i++) if (owner.pool.owner(`${prefix}-${i}`) === owner.url) return `${prefix}-${i}`;
}

describe('cache cluster over HTTP', () => {
  it('GeeCache example: Tom 630, Jack 589, Sam 567 from any of three nodes; the slow DB is asked once per key', async () => {
    const db: Record<string, string> = { Tom: '630', Jack: '589', Sam: '567' };
    const searched: string[] = [];
    nodes = await startCluster(3, {}, () => ({
      name: 'scores',
      cacheBytes: 2 << 10,
      getter: async (key) => {
        searched.push(key); // [SlowDB] search key
        await Promise.resolve(); // answered later, as a database would be (the test counts the searches, not their time)
        if (key in db) return db[key]!;
        throw new NotFoundError(`${key} not exist`);
      },
    }));
    // The API server in front of node 1 (GeeCache's :9999 /api?key=).
    const api = createServer((req, res) => {
      const key = new URL(req.url ?? '/', 'http://x').searchParams.get('key') ?? '';
      nodes[0]!.group.get(key).then(
        (v) => res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(v.bytes()),
        (err: Error) => res.writeHead(err instanceof NotFoundError ? 404 : 500).end(err.message),
      );
    });
    const apiUrl = await listen(api);
    try {
      for (let round = 0; round < 2; round++) {
        for (const [key, want] of Object.entries(db)) {
          const r = await request(`${apiUrl}/api?key=${key}`);
          assert.equal(r.statusCode, 200);
          assert.equal(await r.body.text(), want);
          for (const n of nodes) assert.equal((await n.group.get(key)).toString(), want);
        }
      }
      const r = await request(`${apiUrl}/api?key=kkk`);
      assert.equal(r.statusCode, 404);
      assert.equal(await r.body.text(), 'Group scores: key "kkk" not found');
      assert.deepEqual(searched.filter((k) => k !== 'kkk').sort(), ['Jack', 'Sam', 'Tom']);
    } finally {
      await new Promise((r) => api.close(r));
    }
  });

  it('100 concurrent gets of one key from all three nodes run the getter exactly once in the cluster', async () => {
    let loads = 0;
    let owner: CacheNode | undefined;
    nodes = await startCluster(3, {}, () => ({
      name: 'g',
      cacheBytes: 1 << 20,
      getter: async (key) => {
        loads++;
        // The load is in flight until both other nodes' requests (one each, after their own
        // singleflight) have reached the owner: they must join it, not load again.
        await waitFor('both peer requests at the owner', () => owner!.group.stats().serverRequests >= 2, 10_000);
        return `value of ${key}`;
      },
    }));
    owner = nodes.find((n) => n.url === nodes[0]!.pool.owner('hot-key'))!;
    const gets = Array.from({ length: 100 }, (_, i) => nodes[i % 3]!.group.get('hot-key'));
    const values = await Promise.all(gets);
    assert.ok(values.every((v) => v.toString() === 'value of hot-key'));
    assert.equal(loads, 1);
    assert.equal(owner.group.stats().localLoads, 1);
    for (const n of nodes.filter((x) => x !== owner)) {
      assert.equal(n.group.stats().peerLoads, 1, 'one request per non-owner node (singleflight)');
    }
  });

  it('loads each key on the node the ring names, and every node agrees on the owner', async () => {
    const loadedOn = new Map<string, number>();
    nodes = await startCluster(3, {}, (i) => ({
      name: 'g',
      cacheBytes: 1 << 20,
      getter: (key) => {
        loadedOn.set(key, i);
        return key;
      },
    }));
    const counts = [0, 0, 0];
    for (let k = 0; k < 60; k++) {
      const key = `user:${k}`;
      const owners = new Set(nodes.map((n) => n.pool.owner(key)));
      assert.equal(owners.size, 1, 'nodes disagree about the owner');
      await nodes[k % 3]!.group.get(key);
      const ownerIndex = nodes.findIndex((n) => n.url === [...owners][0]);
      assert.equal(loadedOn.get(key), ownerIndex, `${key} loaded on node ${loadedOn.get(key)}, ring says ${ownerIndex}`);
      counts[ownerIndex]!++;
    }
    assert.ok(
      counts.every((c) => c > 0),
      `every node owns some keys: ${counts}`,
    );
  });

  it('carries any bytes between nodes unchanged', async () => {
    const all = Uint8Array.from({ length: 4096 }, (_, i) => (i * 7) & 255);
    nodes = await startCluster(2, {}, () => ({ name: 'g', cacheBytes: 1 << 20, getter: (k) => (k.startsWith('t') ? `tëxt ${k} 😀` : all) }));
    const [a, b] = nodes as [CacheNode, CacheNode];
    const bin = keyOwnedBy(a, 'bin');
    const txt = keyOwnedBy(a, 't');
    assert.deepEqual((await b.group.get(bin)).bytes(), Buffer.from(all));
    assert.equal((await b.group.get(txt)).toString(), `tëxt ${txt} 😀`);
    assert.equal(b.group.stats().peerLoads, 2);
  });

  it('when the owner is down, the caller still gets the value by loading locally', async () => {
    nodes = await startCluster(3, { timeoutMs: 1_000 }, (i) => ({ name: 'g', cacheBytes: 1 << 20, getter: (key) => `${key} from node ${i}` }));
    const [a, b] = nodes as [CacheNode, CacheNode];
    const key = keyOwnedBy(a);
    await a.stop();
    const v = await b.group.get(key);
    assert.equal(v.toString(), `${key} from node 1`);
    assert.equal(b.group.stats().peerErrors, 1);
    assert.equal(b.group.stats().localLoads, 1);
  });

  it('peers that disagree about the owner do not forward to each other forever (mailgun/groupcache #72)', async () => {
    let loads = 0;
    const group = (i: number) => ({ name: 'g', cacheBytes: 1 << 20, getter: (k: string) => (loads++, `${k}@${i}`) });
    // A rolling deploy that changes the ring's replicas: for some keys a names b, and b names a.
    const a = await startNode({ timeoutMs: 5_000 }, group(0));
    const b = await startNode({ timeoutMs: 5_000, replicas: 7 }, group(1));
    nodes = [a, b];
    for (const n of nodes) n.pool.setPeers(a.url, b.url);
    let key: string | undefined;
    for (let i = 0; i < 100_000 && key === undefined; i++) {
      if (a.pool.owner(`k${i}`) === b.url && b.pool.owner(`k${i}`) === a.url) key = `k${i}`;
    }
    assert.ok(key !== undefined, 'no key on which the two rings disagree');
    // a asks b; b, asked by a peer, answers from itself instead of asking a back.
    assert.equal((await a.group.get(key)).toString(), `${key}@1`);
    assert.equal(loads, 1);
    assert.equal(b.group.stats().serverRequests, 1);
    assert.equal(b.group.stats().peerLoads, 0);
  });

  it('remove reaches the owner and every hot cache', async () => {
    let version = 1;
    nodes = await startCluster(3, {}, () => ({ name: 'g', cacheBytes: 1 << 20, hotCacheSample: 1, getter: () => `v${version}` }));
    const [a, b, c] = nodes as [CacheNode, CacheNode, CacheNode];
    const key = keyOwnedBy(a);
    for (const n of nodes) assert.equal((await n.group.get(key)).toString(), 'v1');
    assert.equal(b.group.cacheStats().hot.length, 1);
    assert.equal(c.group.cacheStats().hot.length, 1);
    version = 2;
    await c.group.remove(key);
    for (const n of nodes) {
      assert.equal(n.group.cacheStats().main.length + n.group.cacheStats().hot.length, 0, `${n.url} still holds the key`);
    }
    for (const n of nodes) assert.equal((await n.group.get(key)).toString(), 'v2');
  });

  it('with a secret: peers sharing it talk; a peer with the wrong secret gets 401 and loads locally', async () => {
    const group = () => ({ name: 'g', cacheBytes: 1 << 20, getter: (k: string) => `v-${k}` });
    const good = await startCluster(2, { secret: 'right' }, group);
    const intruder = await startNode({ secret: 'wrong' }, group());
    nodes = [...good, intruder];
    const [a, b] = good as [CacheNode, CacheNode];
    const key = keyOwnedBy(a);
    assert.equal((await b.group.get(key)).toString(), `v-${key}`);
    assert.equal(b.group.stats().peerLoads, 1);
    intruder.pool.setPeers(a.url, intruder.url);
    const peer = intruder.pool.peers()[0]!;
    await assert.rejects(peer.get('g', key), (e: unknown) => e instanceof PeerError && e.status === 401);
    const unsigned = await request(`${a.url}/_bulwark/g/${key}`);
    assert.equal(unsigned.statusCode, 401);
    await unsigned.body.dump();
    // A signed request captured on the wire, replayed with its key swapped: refused; as sent: served.
    const ts = String(Date.now());
    const body = encodePeerRequest('g', key);
    const headers = { 'content-type': 'application/x-protobuf', [TIMESTAMP_HEADER]: ts, [SIGNATURE_HEADER]: sign('right', 'POST', '/_bulwark/', ts, body) };
    const swapped = await request(`${a.url}/_bulwark/`, { method: 'POST', headers, body: encodePeerRequest('g', `${key}x`) });
    assert.equal(swapped.statusCode, 401);
    await swapped.body.dump();
    const asSent = await request(`${a.url}/_bulwark/`, { method: 'POST', headers, body });
    assert.equal(asSent.statusCode, 200);
    assert.equal(decodeGetResponse(new Uint8Array(await asSent.body.arrayBuffer()), 100).value, `v-${key}`);
    let keyForA = '';
    for (let i = 0; keyForA === ''; i++) if (intruder.pool.owner(`other-${i}`) === a.url) keyForA = `other-${i}`;
    assert.equal((await intruder.group.get(keyForA)).toString(), `v-${keyForA}`);
    assert.equal(intruder.group.stats().peerErrors, 1);
    assert.equal(intruder.group.stats().localLoads, 1);
  });

  it('a node answers peers (POST / DELETE with protobuf bodies) and people (GET by path) with the documented statuses', async () => {
    nodes = await startCluster(1, {}, () => ({ name: 'g', cacheBytes: 1 << 20, getter: (k: string) => `v-${k}` }));
    const base = `${nodes[0]!.url}/_bulwark/`;
    const send = async (method: 'GET' | 'POST' | 'DELETE' | 'PUT', url: string, body?: Uint8Array) => {
      const r = await request(url, { method, body });
      return { status: r.statusCode, body: new Uint8Array(await r.body.arrayBuffer()), headers: r.headers };
    };
    const got = await send('POST', base, encodePeerRequest('g', 'Tom'));
    assert.equal(got.status, 200);
    assert.equal(decodeGetResponse(got.body, 100).value, 'v-Tom');
    const curl = await send('GET', `${base}g/Tom`);
    assert.equal(curl.status, 200);
    assert.deepEqual(curl.body, got.body);
    const removed = await send('DELETE', base, encodePeerRequest('g', 'Tom'));
    assert.equal(decodeRemoveResponse(removed.body), true);
    assert.equal((await send('POST', base, encodePeerRequest('nope', 'Tom'))).status, 404);
    assert.equal((await send('POST', base, encodePeerRequest('g', ''))).status, 400);
    assert.equal((await send('POST', base, encodePeerRequest('g', 'k'.repeat(1025)))).status, 400);
    assert.equal((await send('POST', base, new Uint8Array([0x0a, 40, 1]))).status, 400);
    const big = await send('POST', base, new Uint8Array(MAX_REQUEST_BYTES + 1));
    assert.equal(big.status, 413);
    assert.equal((await send('PUT', base, encodePeerRequest('g', 'Tom'))).status, 405);
    const wrongForm = await send('GET', base);
    assert.equal(wrongForm.status, 405);
    assert.equal(wrongForm.headers['allow'], 'POST, DELETE');
    assert.equal((await send('DELETE', `${base}g/Tom`)).status, 405);
    // The node still serves after all that.
    assert.equal((await send('POST', base, encodePeerRequest('g', 'Jack'))).status, 200);
  });

  it("TTL and negative TTL on a ManualClock: the owner reloads after expiry, and a peer's hot copy expires with it", async () => {
    const clock = new ManualClock();
    let version = 1;
    const misses = new Map<string, number>();
    nodes = await startCluster(2, {}, () => ({
      name: 'g',
      cacheBytes: 1 << 20,
      ttlMs: 1_000,
      negativeTtlMs: 100,
      clock,
      random: () => 0.05, // 0.05: jitter −9 %, and sampled
      getter: (key) => {
        if (key.startsWith('missing')) {
          misses.set(key, (misses.get(key) ?? 0) + 1);
          throw new NotFoundError();
        }
        return `v${version}`;
      },
    }));
    const [a, b] = nodes as [CacheNode, CacheNode];
    const key = keyOwnedBy(a);
    assert.equal((await b.group.get(key)).toString(), 'v1');
    assert.equal(b.group.cacheStats().hot.length, 1);
    version = 2;
    clock.advance(909); // expiry at 1000 × 0.91 = 910
    assert.equal((await b.group.get(key)).toString(), 'v1');
    clock.advance(1);
    assert.equal((await b.group.get(key)).toString(), 'v2');
    const missing = keyOwnedBy(a, 'missing');
    await assert.rejects(b.group.get(missing), NotFoundError);
    await assert.rejects(a.group.get(missing), NotFoundError);
    await assert.rejects(b.group.get(missing), NotFoundError);
    assert.equal(misses.get(missing), 1);
    clock.advance(91);
    await assert.rejects(b.group.get(missing), NotFoundError);
    assert.equal(misses.get(missing), 2);
  });
});
