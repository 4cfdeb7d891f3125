import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ClosedError } from '../core/errors.js';
import { HttpPools } from './http-pools.js';

describe('HttpPools', () => {
  it('makes one pool per origin and reuses it', async () => {
    const pools = new HttpPools();
    const a = pools.get('http://127.0.0.1:1');
    assert.equal(pools.get('http://127.0.0.1:1'), a);
    assert.notEqual(pools.get('http://127.0.0.1:2'), a);
    assert.equal(pools.size, 2);
    await pools.close();
  });

  it('closes the least recently used pool past maxPools', async () => {
    const pools = new HttpPools({ maxPools: 2 });
    const a = pools.get('http://127.0.0.1:1');
    pools.get('http://127.0.0.1:2');
    pools.get('http://127.0.0.1:1'); // a is now the most recent
    pools.get('http://127.0.0.1:3');
    assert.equal(pools.size, 2);
    assert.equal(pools.has('http://127.0.0.1:2'), false);
    assert.equal(pools.get('http://127.0.0.1:1'), a);
    await pools.close();
  });

  it('retain closes the pools of origins that are gone', async () => {
    const pools = new HttpPools();
    const gone = pools.get('http://127.0.0.1:1');
    pools.get('http://127.0.0.1:2');
    pools.retain(new Set(['http://127.0.0.1:2']));
    assert.equal(pools.size, 1);
    await new Promise((r) => setImmediate(r));
    assert.equal(gone.closed, true);
    await pools.close();
  });

  it('refuses use after close with ClosedError, and bad options with RangeError', async () => {
    const pools = new HttpPools();
    await pools.close();
    assert.throws(() => pools.get('http://127.0.0.1:1'), ClosedError);
    assert.throws(() => new HttpPools({ connectionsPerInstance: 0 }), /connectionsPerInstance/);
    assert.throws(() => new HttpPools({ maxPools: 1.5 }), /maxPools/);
    assert.throws(() => new HttpPools({ keepAliveTimeoutMs: -1 }), /keepAliveTimeoutMs/);
  });
});
