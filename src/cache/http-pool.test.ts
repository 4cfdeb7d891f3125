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

  it('picks the ring\'s owner, and no peer for keys this node owns', async () => {
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
});
