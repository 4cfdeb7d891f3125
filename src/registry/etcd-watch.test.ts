import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { ManualClock } from '../core/clock.js';
import { EtcdPool } from './etcd-pool.js';
import type { EtcdClient } from './etcd-client.js';
import { Warner } from './etcd-warnings.js';
import { EtcdWatch } from './etcd-watch.js';
import { EventQueue } from './event-queue.js';
import type { ServiceInstance } from './types.js';

/**
 * A fake member holding one key's history: `behind` makes a serializable read at a revision it has not
 * applied fail as etcd's does ("future revision"); `compacted` fails any read below it.
 */
function member(o: { head: number; behind?: boolean; compacted?: number }) {
  const ranges: Array<{ revision?: string; serializable: boolean }> = [];
  let startRevision: string | undefined;
  const kv = {
    range: (req: { revision?: string; serializable?: boolean }) => {
      ranges.push({ revision: req.revision, serializable: req.serializable === true });
      const at = Number(req.revision ?? o.head);
      if (at < (o.compacted ?? 0)) return Promise.reject(new Error('etcdserver: mvcc: required revision has been compacted'));
      if (o.behind === true && req.serializable === true && req.revision !== undefined)
        return Promise.reject(new Error('etcdserver: mvcc: required revision is a future revision'));
      return Promise.resolve({ header: { revision: String(o.head) }, kvs: [], count: '0', more: false });
    },
  };
  const watcher = Object.assign(new EventEmitter(), { request: {}, cancel: () => Promise.resolve() });
  const builder = {
    prefix: () => builder,
    startRevision: (r: string) => ((startRevision = r), builder),
    watcher: () => watcher,
  };
  const client = { kv, watch: () => builder } as unknown as EtcdClient;
  return { client, ranges, startRevision: () => startRevision };
}

const instance: ServiceInstance = { id: 'x', name: 'w', address: '127.0.0.1:9000' };

async function open(m: ReturnType<typeof member>, seen: number) {
  const clock = new ManualClock();
  const pool = new EtcdPool([{ endpoint: 'http://m0', client: m.client }], { clock, callTimeoutMs: 1000, attemptTimeoutMs: 1000, cooldownMs: 1000 });
  pool.revision = seen;
  let ready = false;
  const queue = new EventQueue(16, undefined, undefined);
  const w = new EtcdWatch(
    {
      pool,
      clock,
      warner: new Warner(() => {}),
      root: '/p/',
      decode: () => ({ instance }),
      onResync: () => {},
      onMove: () => {},
    },
    'w',
    queue,
    () => (ready = true),
  );
  await w.start();
  assert.ok(ready);
  return w;
}

describe('EtcdWatch first listing', () => {
  it('lists at the revision its registry had seen, serializably, and watches from the one after', async () => {
    const m = member({ head: 9 });
    const w = await open(m, 5);
    assert.deepEqual(m.ranges, [{ revision: '5', serializable: true }]);
    assert.equal(m.startRevision(), '6');
    await w.stop();
  });

  it('reads linearizably at that revision on a member that has not applied it yet', async () => {
    const m = member({ head: 9, behind: true });
    const w = await open(m, 5);
    assert.deepEqual(m.ranges, [
      { revision: '5', serializable: true },
      { revision: '5', serializable: false },
    ]);
    assert.equal(m.startRevision(), '6');
    await w.stop();
  });

  it('lists at the current revision when that revision was compacted, or when the registry had seen none', async () => {
    for (const [seen, compacted] of [
      [5, 7],
      [0, 0],
    ] as const) {
      const m = member({ head: 9, compacted });
      const w = await open(m, seen);
      assert.deepEqual(m.ranges.at(-1), { revision: undefined, serializable: true });
      assert.equal(m.startRevision(), '10');
      await w.stop();
    }
  });
});

describe('EtcdPool.revision', () => {
  it('is the newest header revision any answer carried', async () => {
    const clock = new ManualClock();
    const pool = new EtcdPool([{ endpoint: 'http://m0', client: {} }], { clock, callTimeoutMs: 1000, attemptTimeoutMs: 1000, cooldownMs: 1000 });
    assert.equal(pool.revision, 0);
    await pool.call('put', () => Promise.resolve({ header: { revision: '7' } }));
    await pool.call('range', () => Promise.resolve({ header: { revision: '4' } }));
    await pool.call('keep-alive', () => Promise.resolve(3));
    assert.equal(pool.revision, 7);
  });
});
