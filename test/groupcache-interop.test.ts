/**
 * A mixed cluster of real golang/groupcache nodes (built from test/support/groupcache-peer.go) and
 * bulwark nodes with `protocol: 'groupcache'`, on one peer list: the rings agree on every key's owner,
 * each key is loaded from the origin once under concurrent gets from all four nodes, each side reads
 * values the other owns, and what cannot cross (not-found answers, removal) degrades as documented. Then
 * the same with `bulwark serve --protocol groupcache` processes in place of the library's nodes.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { request } from 'undici';
import { NotFoundError } from '../src/core/errors.js';
import { crc32Utf8 } from '../src/cache/ring.js';
import { listen, startNode, type CacheNode } from './cache-nodes.js';
import { buildGoPeer, startGoPeer, type GoPeer, type GoPeerBuild } from './support/groupcache.js';
import { freePort } from './support/servers.js';
import { startServe, stopAll, type ServeProc } from './serve-harness.js';

const build: GoPeerBuild = await buildGoPeer();
const skip = 'skip' in build ? build.skip : undefined;

/** Keys that Go's path handling and our escaping must carry intact. */
const ODD_KEYS = ['with space', 'plus+sign', '100%', 'a/b/c', 'ümlaut-ключ-鍵', 'q?x=1&y=2#frag', "!'()*~"];

describe('Go groupcache interop (real Go peers)', { skip }, () => {
  let originServer: Server;
  let origin: string;
  const loads = new Map<string, number>();
  let goPeers: GoPeer[] = [];
  let nodes: CacheNode[] = [];
  let all: string[] = [];

  before(async () => {
    originServer = createServer((req, res) => {
      const key = new URL(req.url ?? '/', 'http://x').searchParams.get('key') ?? '';
      loads.set(key, (loads.get(key) ?? 0) + 1);
      // A little latency so that concurrent gets overlap the load.
      setTimeout(() => {
        if (key.startsWith('missing')) res.writeHead(404).end('no such item');
        else res.writeHead(200).end(`value of ${key}`);
      }, 5);
    });
    origin = await listen(originServer);
    if (skip !== undefined || !('binary' in build)) return;
    goPeers = [await startGoPeer(build.binary, origin), await startGoPeer(build.binary, origin)];
    const getter = async (key: string) => {
      const res = await request(`${origin}?key=${encodeURIComponent(key)}`);
      const body = await res.body.text();
      if (res.statusCode === 404) throw new NotFoundError(body);
      if (res.statusCode !== 200) throw new Error(`origin answered ${res.statusCode}`);
      return body;
    };
    nodes = [
      await startNode({ protocol: 'groupcache' }, { name: 'items', cacheBytes: 1 << 20, getter, hotCacheSample: 0, negativeTtlMs: 60_000 }),
      await startNode({ protocol: 'groupcache' }, { name: 'items', cacheBytes: 1 << 20, getter, hotCacheSample: 0, negativeTtlMs: 60_000 }),
    ];
    all = [goPeers[0]!.url, nodes[0]!.url, goPeers[1]!.url, nodes[1]!.url];
    for (const g of goPeers) await g.setPeers(all);
    for (const n of nodes) n.pool.setPeers(...all);
  });

  after(async () => {
    await Promise.all(goPeers.map((g) => g.stop()));
    await Promise.all(nodes.map((n) => n.stop()));
    originServer?.closeAllConnections();
    originServer?.close();
  });

  async function goGet(peer: GoPeer, key: string): Promise<{ status: number; body: string }> {
    const res = await request(`${peer.url}/get?key=${encodeURIComponent(key)}`);
    return { status: res.statusCode, body: await res.body.text() };
  }

  async function goText(peer: GoPeer, path: string): Promise<string> {
    const res = await request(`${peer.url}${path}`);
    return res.body.text();
  }

  it("hashes as Go's crc32.ChecksumIEEE over UTF-8", () => {
    // Values from Go: crc32.ChecksumIEEE([]byte(s)).
    assert.equal(crc32Utf8(''), 0);
    assert.equal(crc32Utf8('123456789'), 0xcbf43926);
    assert.equal(crc32Utf8('ümlaut-ключ-鍵😀'), crc32Of(Buffer.from('ümlaut-ключ-鍵😀', 'utf8')));
  });

  it("names the same owner as Go's ring for every key", async () => {
    const keys = [...Array.from({ length: 300 }, (_, i) => `item:${i}`), ...ODD_KEYS];
    let differ = 0;
    const owners = new Map<string, number>();
    for (const key of keys) {
      const go = await goText(goPeers[0]!, `/owner?key=${encodeURIComponent(key)}`);
      if (go !== nodes[0]!.pool.owner(key) || go !== nodes[1]!.pool.owner(key)) differ++;
      owners.set(go, (owners.get(go) ?? 0) + 1);
    }
    assert.equal(differ, 0);
    assert.equal(owners.size, 4, 'every node owns some keys');
  });

  it('loads each key from the origin once under concurrent gets from all four nodes, and both sides read what the other owns', async () => {
    const keys = Array.from({ length: 120 }, (_, i) => `conc:${i}`);
    const gets: Promise<string>[] = [];
    for (let round = 0; round < 2; round++) {
      for (const key of keys) {
        for (const g of goPeers) gets.push(goGet(g, key).then((r) => (assert.equal(r.status, 200, r.body), r.body)));
        for (const n of nodes) gets.push(n.group.get(key).then((v) => v.toString()));
      }
    }
    const values = await Promise.all(gets);
    assert.equal(values.length, keys.length * 8);
    for (let i = 0; i < values.length; i++) assert.equal(values[i], `value of ${keys[Math.floor(i / 4) % keys.length]}`);
    const extra = keys.filter((k) => loads.get(k) !== 1).map((k) => `${k}×${loads.get(k)}`);
    assert.deepEqual(extra, [], 'each key loaded from the origin exactly once');
    // Node read from Go owners, Go from Node owners, without a failed peer request.
    for (const n of nodes) {
      const s = n.group.stats();
      assert.ok(s.peerLoads > 0, 'a Node node read values from its peers');
      assert.equal(s.peerErrors, 0);
      assert.ok(s.serverRequests > 0, 'a Node node served its peers');
    }
    for (const g of goPeers) {
      const s = JSON.parse(await goText(g, '/stats')) as { peerLoads: number; peerErrors: number; serverRequests: number };
      assert.ok(s.peerLoads > 0, 'a Go node read values from its peers');
      assert.equal(s.peerErrors, 0);
      assert.ok(s.serverRequests > 0, 'a Go node served its peers');
    }
  });

  it('carries keys with spaces, +, %, / and non-ASCII both ways', async () => {
    for (const key of ODD_KEYS) {
      const owner = nodes[0]!.pool.owner(key);
      // Read through a node of the other kind than the owner, so the key crosses the wire.
      const viaGo = nodes.some((n) => n.url === owner);
      const value = viaGo ? (await goGet(goPeers[0]!, key)).body : (await nodes[0]!.group.get(key)).toString();
      assert.equal(value, `value of ${key}`, `key ${JSON.stringify(key)} owned by ${viaGo ? 'Node' : 'Go'}`);
    }
    for (const key of ODD_KEYS) assert.equal(loads.get(key), 1, `${JSON.stringify(key)} loaded once`);
  });

  it('answers "not found" so that Go loads locally and bulwark peers still see a not-found', async () => {
    const ownedByNode1 = findKey('missing:', (k) => nodes[0]!.pool.owner(k) === nodes[1]!.url);
    // A bulwark peer reads the 404 + x-bulwark-not-found as a not-found answer: one origin load.
    await assert.rejects(nodes[0]!.group.get(ownedByNode1), NotFoundError);
    assert.equal(loads.get(ownedByNode1), 1);
    assert.equal(nodes[0]!.group.stats().peerErrors, 0);
    // Go reads the owner's (cached) 404 as a failure and loads the key itself: the one extra load.
    const r = await goGet(goPeers[0]!, ownedByNode1);
    assert.equal(r.status, 502);
    assert.equal(loads.get(ownedByNode1), 2);
  });

  it('removes at bulwark peers and skips Go peers, which load nothing for it', async () => {
    const key = findKey('rm:', (k) => nodes[0]!.pool.owner(k) === nodes[1]!.url);
    assert.equal((await nodes[0]!.group.get(key)).toString(), `value of ${key}`);
    assert.equal(nodes[1]!.group.cacheStats().main.length > 0, true);
    const before = new Map(loads);
    await nodes[0]!.group.remove(key);
    await nodes[0]!.group.remove(key); // the second time Go peers are known and not asked
    assert.deepEqual(loads, before, 'removal made no node load anything');
    // The owner dropped it: the next get loads it again.
    assert.equal((await nodes[1]!.group.get(key)).toString(), `value of ${key}`);
    assert.equal(loads.get(key), 2);
  });
});

function findKey(prefix: string, ok: (key: string) => boolean): string {
  for (let i = 0; i < 10_000; i++) if (ok(`${prefix}${i}`)) return `${prefix}${i}`;
  throw new Error(`no key with prefix ${prefix} fits`);
}

function crc32Of(bytes: Uint8Array): number {
  let c = -1;
  for (const b of bytes) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  }
  return (c ^ -1) >>> 0;
}

/**
 * The same mix with `bulwark serve --protocol groupcache` as separate processes, as an operator runs them:
 * two serve nodes and two Go nodes on one static peer list.
 */
describe('bulwark serve --protocol groupcache among real Go groupcache nodes', { skip }, () => {
  let originServer: Server;
  let origin: string;
  const loads = new Map<string, number>();
  let goPeers: GoPeer[] = [];
  let serves: ServeProc[] = [];

  before(async () => {
    originServer = createServer((req, res) => {
      const key = new URL(req.url ?? '/', 'http://x').searchParams.get('key') ?? '';
      loads.set(key, (loads.get(key) ?? 0) + 1);
      setTimeout(() => res.writeHead(200).end(`value of ${key}`), 5);
    });
    origin = await listen(originServer);
    if (skip !== undefined || !('binary' in build)) return;
    goPeers = [await startGoPeer(build.binary, origin), await startGoPeer(build.binary, origin)];
    const ports = [await freePort(), await freePort()];
    const all = [goPeers[0]!.url, `http://127.0.0.1:${ports[0]}`, goPeers[1]!.url, `http://127.0.0.1:${ports[1]}`];
    const args = [
      '--protocol',
      'groupcache',
      '--registry',
      'memory',
      '--peers',
      all.join(','),
      '--group',
      'items',
      '--origin',
      `${origin}/?key={key}`,
      '--hot-cache-bytes',
      '0',
      '--drain-delay',
      '0',
      '--quiet',
    ];
    serves = await Promise.all(ports.map((port) => startServe(args, { port })));
    for (const g of goPeers) await g.setPeers(all);
  });

  after(async () => {
    await Promise.all(goPeers.map((g) => g.stop()));
    await stopAll(serves);
    originServer?.closeAllConnections();
    originServer?.close();
    if ('remove' in build) build.remove();
  });

  const serveGet = async (node: ServeProc, key: string) => {
    const res = await request(`${node.url}/v1/groups/items/keys/${encodeURIComponent(key)}`);
    return { status: res.statusCode, source: String(res.headers['x-bulwark-source']), body: await res.body.text() };
  };
  const goGet = async (peer: GoPeer, path: string) => (await request(`${peer.url}${path}`)).body.text();

  it('loads each key once under concurrent gets from all four nodes, and each side reads what the other owns', async () => {
    const keys = Array.from({ length: 80 }, (_, i) => `serve:${i}`);
    const gets: Promise<void>[] = [];
    const fromPeer = new Set<string>();
    for (const key of keys) {
      for (const g of goPeers) gets.push(goGet(g, `/get?key=${encodeURIComponent(key)}`).then((v) => assert.equal(v, `value of ${key}`)));
      for (const n of serves) {
        gets.push(
          serveGet(n, key).then((r) => {
            assert.equal(r.status, 200, r.body);
            assert.equal(r.body, `value of ${key}`);
            if (r.source === 'peer') fromPeer.add(key);
          }),
        );
      }
    }
    await Promise.all(gets);
    const extra = keys.filter((k) => loads.get(k) !== 1).map((k) => `${k}×${loads.get(k)}`);
    assert.deepEqual(extra, [], 'each key loaded from the origin exactly once');
    // serve nodes read keys Go owns from Go; Go read keys serve nodes own from them
    const owners = await Promise.all(keys.map((k) => goGet(goPeers[0]!, `/owner?key=${encodeURIComponent(k)}`)));
    const goOwned = keys.filter((_, i) => goPeers.some((g) => g.url === owners[i]));
    assert.ok(goOwned.length > 0 && goOwned.length < keys.length, 'both kinds own keys');
    assert.ok(
      goOwned.some((k) => fromPeer.has(k)),
      'a serve node read a Go-owned key from its Go owner',
    );
    for (const g of goPeers) {
      const s = JSON.parse(await goGet(g, '/stats')) as { peerLoads: number; peerErrors: number; serverRequests: number };
      assert.ok(s.peerLoads > 0, 'a Go node read values from its peers');
      assert.equal(s.peerErrors, 0);
      assert.ok(s.serverRequests > 0, 'a Go node served its peers');
    }
  });
});
