import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { EventEmitter } from 'node:events';
import { Group } from './group.js';
import { HttpPool } from './http-pool.js';

function fakeRes() {
  const res = Object.assign(new EventEmitter(), {
    statusCode: 0,
    ended: false,
    headersSent: false,
    writableEnded: false,
    setHeader() {},
    end() {
      res.ended = res.writableEnded = res.headersSent = true;
    },
  });
  return res;
}

describe('HttpPool', () => {
  it('always counts itself as a member, and normalizes peer URLs', async () => {
    const pool = new HttpPool({ self: 'http://127.0.0.1:8001/' });
    pool.setPeers('http://127.0.0.1:8002', 'http://127.0.0.1:8003/', 'http://127.0.0.1:8002');
    assert.deepEqual(pool.members(), ['http://127.0.0.1:8001', 'http://127.0.0.1:8002', 'http://127.0.0.1:8003']);
    assert.equal(pool.peers().length, 2);
    pool.setPeers();
    assert.deepEqual(pool.members(), ['http://127.0.0.1:8001']);
    assert.equal(pool.pickPeer('any'), undefined);
    await pool.close();
  });

  it("picks the ring's owner, and no peer for keys this node owns", async () => {
    const pool = new HttpPool({ self: 'http://127.0.0.1:8001' });
    pool.setPeers('http://127.0.0.1:8001', 'http://127.0.0.1:8002');
    let mine = 0;
    let theirs = 0;
    for (let i = 0; i < 200; i++) {
      const peer = pool.pickPeer(`k${i}`);
      if (peer === undefined) {
        assert.equal(pool.owner(`k${i}`), 'http://127.0.0.1:8001');
        mine++;
      } else {
        assert.equal(peer.url, pool.owner(`k${i}`));
        theirs++;
      }
    }
    assert.ok(mine > 30 && theirs > 30, `${mine}/${theirs}`);
    await pool.close();
  });

  it("its snapshot gives each member's share of the keys it owns first, summing to 1, as the keys fall", async () => {
    const pool = new HttpPool({ self: 'http://127.0.0.1:8001' });
    pool.setPeers('http://127.0.0.1:8001', 'http://127.0.0.1:8002', 'http://127.0.0.1:8003');
    const snap = pool.describeMetrics().snapshot!() as { members: string[]; shares: Record<string, number> };
    assert.deepEqual(Object.keys(snap.shares).sort(), snap.members);
    const total = Object.values(snap.shares).reduce((a, b) => a + b, 0);
    assert.ok(Math.abs(total - 1) < 1e-9, String(total));
    const owned = new Map<string, number>();
    const keys = 30_000;
    for (let i = 0; i < keys; i++) owned.set(pool.owner(`k${i}`), (owned.get(pool.owner(`k${i}`)) ?? 0) + 1);
    // 30 000 keys: a share's sampling error is about 0.3 %; 2 % is far outside it.
    for (const m of snap.members) assert.ok(Math.abs(owned.get(m)! / keys - snap.shares[m]!) < 0.02, `${m}: ${owned.get(m)! / keys} vs ${snap.shares[m]}`);
    await pool.close();
  });

  it('refuses two groups with one name, and frees the name when a group closes', async () => {
    const pool = new HttpPool({ self: 'http://127.0.0.1:8001' });
    const g = new Group({ name: 'g', cacheBytes: 100, peers: pool, getter: () => 'v' });
    assert.throws(() => new Group({ name: 'g', cacheBytes: 100, peers: pool, getter: () => 'v' }), /already registered/);
    await g.close();
    new Group({ name: 'g', cacheBytes: 100, peers: pool, getter: () => 'v' });
    await pool.close();
  });

  it('answers 503 once closed', async () => {
    const pool = new HttpPool({ self: 'http://127.0.0.1:8001' });
    new Group({ name: 'g', cacheBytes: 100, peers: pool, getter: () => 'v' });
    await pool.close();
    const res = fakeRes();
    await pool.handler({ method: 'GET', url: '/_bulwark/g/k', headers: {} } as unknown as IncomingMessage, res as unknown as ServerResponse);
    assert.equal(res.statusCode, 503);
  });

  it('rejects bad options and peer URLs with errors naming them', () => {
    assert.throws(() => new HttpPool({ self: 'not a url' }), /self/);
    assert.throws(() => new HttpPool({ self: 'ftp://127.0.0.1:1' }), /self/);
    assert.throws(() => new HttpPool({ self: 'http://127.0.0.1:1/path' }), /self/);
    assert.throws(() => new HttpPool({ self: 'http://127.0.0.1:1', basePath: 'x' }), /basePath/);
    assert.throws(() => new HttpPool({ self: 'http://127.0.0.1:1', replicas: 0 }), /replicas/);
    assert.throws(() => new HttpPool({ self: 'http://127.0.0.1:1', timeoutMs: 0 }), /timeoutMs/);
    assert.throws(() => new HttpPool({ self: 'http://127.0.0.1:1', secret: '' }), /secret/);
    const pool = new HttpPool({ self: 'http://127.0.0.1:1' });
    assert.throws(() => pool.setPeers('http://127.0.0.1:2', 'nope'), /peer 1/);
    assert.deepEqual(pool.members(), ['http://127.0.0.1:1'], 'a bad list changes nothing');
  });

  it('rejects bad protocol, owners and body deadline options with typed errors naming option and value', () => {
    const self = 'http://127.0.0.1:1';
    const cases: [Record<string, unknown>, ErrorConstructor, RegExp][] = [
      [{ protocol: 'grpc' }, TypeError, /protocol must be 'bulwark' or 'groupcache', got "grpc"/],
      [{ protocol: 42 }, TypeError, /protocol .* got 42/],
      [{ owners: 0 }, RangeError, /owners must be an integer in \[1, 8\], got 0/],
      [{ owners: 1.5 }, RangeError, /owners .* got 1.5/],
      [{ owners: '2' }, TypeError, /owners must be a number, got "2"/],
      [{ owners: 9 }, RangeError, /owners .* got 9/],
      [{ protocol: 'groupcache', owners: 2 }, RangeError, /owners must be 1 with protocol 'groupcache'.*got 2/],
      [{ protocol: 'groupcache', secret: 's' }, TypeError, /secret cannot be used with protocol 'groupcache'/],
      [{ bodyTimeoutMs: 0 }, RangeError, /bodyTimeoutMs .* got 0/],
      [{ bodyTimeoutMs: Infinity }, RangeError, /bodyTimeoutMs .* got Infinity/],
    ];
    for (const [options, type, message] of cases) {
      assert.throws(
        () => new HttpPool({ self, ...options } as never),
        (err: unknown) => err instanceof type && message.test((err as Error).message),
        JSON.stringify(options),
      );
    }
  });

  it("defaults to 1 280 virtual nodes, and to groupcache's 50, base path and peer strings in groupcache mode", async () => {
    const ours = new HttpPool({ self: 'http://127.0.0.1:8001' });
    const go = new HttpPool({ self: 'http://localhost:80', protocol: 'groupcache' });
    assert.equal(ours.basePath, '/_bulwark/');
    assert.equal(go.basePath, '/_groupcache/');
    ours.setPeers('http://127.0.0.1:8002');
    // Peer strings stay exactly as given: Go's ring hashes them so.
    go.setPeers('http://localhost:80', 'http://127.0.0.1:8002');
    assert.deepEqual(go.members(), ['http://127.0.0.1:8002', 'http://localhost:80']);
    assert.equal(go.self, 'http://localhost:80');
    await Promise.all([ours.close(), go.close()]);
  });

  it('names the first R distinct members of the ring as owners, this node flagged, healthy peers first', async () => {
    const urls = ['http://127.0.0.1:8001', 'http://127.0.0.1:8002', 'http://127.0.0.1:8003', 'http://127.0.0.1:8004'];
    const pools = urls.map((self) => new HttpPool({ self, owners: 2 }));
    for (const p of pools) p.setPeers(...urls);
    const r1 = new HttpPool({ self: urls[0]! });
    r1.setPeers(...urls);
    for (let i = 0; i < 300; i++) {
      const key = `k${i}`;
      const picks = pools.map((p) => p.pickOwners(key)!);
      // Exactly two nodes own the key, one of them first; each owner's peers name the other owner.
      assert.equal(picks.filter((p) => p.self).length, 2);
      assert.equal(picks.filter((p) => p.primary).length, 1);
      const primary = urls[picks.findIndex((p) => p.primary)]!;
      assert.equal(primary, pools[0]!.owner(key), "the first owner is the ring's owner");
      for (const [j, p] of picks.entries()) {
        assert.equal(p.peers.length, p.self ? 1 : 2);
        assert.ok(p.peers.every((g) => g.url !== urls[j]));
      }
      assert.equal(r1.pickOwners(key), undefined, 'R = 1 leaves the choice to pickPeer');
    }
    await Promise.all([...pools, r1].map((p) => p.close()));
  });
});
