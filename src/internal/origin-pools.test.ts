import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ManualClock } from '../core/clock.js';
import { ClosedError } from '../core/errors.js';
import { OriginPools } from './origin-pools.js';

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('OriginPools', () => {
  it('makes one pool per origin and reuses it', async () => {
    await using pools = new OriginPools({ owner: 'test' });
    const a = pools.get('http://127.0.0.1:1');
    assert.equal(pools.get('http://127.0.0.1:1'), a);
    assert.notEqual(pools.get('http://127.0.0.1:2'), a);
    assert.equal(pools.size, 2);
  });

  it('closes the least recently used pool past maxPools', async () => {
    const pools = new OriginPools({ owner: 'test', maxPools: 2 });
    const a = pools.get('http://127.0.0.1:1');
    const b = pools.get('http://127.0.0.1:2');
    pools.get('http://127.0.0.1:1'); // a is now the most recent
    pools.get('http://127.0.0.1:3');
    assert.equal(pools.size, 2);
    assert.equal(pools.has('http://127.0.0.1:2'), false);
    assert.equal(pools.get('http://127.0.0.1:1'), a);
    await pools.close();
    assert.equal(b.closed, true, 'close() waited for the evicted pool too');
  });

  it('retain and delete close the pools of origins that are gone', async () => {
    const pools = new OriginPools({ owner: 'test' });
    const gone = pools.get('http://127.0.0.1:1');
    const other = pools.get('http://127.0.0.1:2');
    pools.get('http://127.0.0.1:3');
    pools.retain(new Set(['http://127.0.0.1:2', 'http://127.0.0.1:3']));
    assert.equal(pools.size, 2);
    await pools.delete('http://127.0.0.1:2');
    assert.equal(pools.size, 1);
    assert.equal(other.closed, true);
    await pools.close();
    assert.equal(gone.closed, true);
  });

  it('lets a request in flight finish, and destroys it when the close grace (on its clock) runs out', async () => {
    const clock = new ManualClock();
    let answer: (() => void) | undefined;
    const server = createServer((_req, res) => {
      answer = () => res.end('late');
    });
    const origin = await listen(server);
    try {
      const pools = new OriginPools({ owner: 'test', clock, closeGraceMs: 1_000 });
      const request = pools.get(origin).request({ path: '/', method: 'GET' });
      request.catch(() => {});
      while (answer === undefined) await new Promise((r) => setImmediate(r));
      const closed = pools.close();
      await clock.advanceAsync(999);
      let done = false;
      void closed.then(() => (done = true));
      await new Promise((r) => setImmediate(r));
      assert.equal(done, false, 'still within the grace time');
      await clock.advanceAsync(1);
      await closed;
      await assert.rejects(request, 'the unfinished request was destroyed');
      assert.equal(clock.pendingTimers, 0);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  it('refuses use after close with ClosedError naming its owner, and bad options with RangeError', async () => {
    const pools = new OriginPools({ owner: 'ResilientClient' });
    await pools.close();
    await pools.close(); // idempotent
    assert.throws(
      () => pools.get('http://127.0.0.1:1'),
      (err: Error) => err instanceof ClosedError && /ResilientClient is closed/.test(err.message),
    );
    assert.throws(() => new OriginPools({ owner: 'x', maxPools: 1.5 }), /x: maxPools/);
    assert.throws(() => new OriginPools({ owner: 'x', closeGraceMs: -1 }), /x: closeGraceMs/);
    assert.throws(() => new OriginPools({ owner: 'x', clock: {} as never }), /x: clock/);
  });
});
