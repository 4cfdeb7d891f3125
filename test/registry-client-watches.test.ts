/**
 * One registry watch per service: a ResilientClient over EtcdRegistry looks services up through its
 * RegistryCache and balances them with a Balancer that follows the cache's view, so etcd sees one watch
 * per service, not two. Counted on etcd itself (`etcd_debugging_mvcc_watcher_total`, the number of
 * watchers etcd holds), with a control that a second, direct follower does show up as one more watch.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Balancer } from '../src/balancer/balancer.js';
import { ResilientClient } from '../src/client/resilient-client.js';
import { EtcdRegistry } from '../src/registry/etcd-registry.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { skipReason, waitFor } from './support/servers.js';

async function etcdWatchers(endpoint: string): Promise<number> {
  const text = await (await fetch(`${endpoint}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('etcd_debugging_mvcc_watcher_total '));
  assert.ok(line !== undefined, 'etcd reports etcd_debugging_mvcc_watcher_total');
  return Number(line.split(' ')[1]);
}

describe('ResilientClient on a real etcd', { skip: skipReason(etcdBinary, 'etcd') }, () => {
  let etcd: EtcdServer;
  before(async () => {
    etcd = await startEtcd();
  });
  after(async () => {
    await etcd?.stop();
  });

  it('opens one etcd watch per service it calls (the balancer follows the cache), and closes them', async () => {
    const prefix = `/bulwark-watch-count/${process.pid}`;
    const writer = new EtcdRegistry({ hosts: etcd.endpoint, prefix });
    const reader = new EtcdRegistry({ hosts: etcd.endpoint, prefix });
    const client = new ResilientClient({ registry: reader, timeoutMs: 5_000 });
    let direct: Balancer | undefined;
    try {
      for (const name of ['orders', 'users']) {
        await writer.register({ id: `${name}-1`, name, address: '127.0.0.1:9001' });
        await writer.register({ id: `${name}-2`, name, address: '127.0.0.1:9002' });
      }
      const base = await etcdWatchers(etcd.endpoint);
      for (const name of ['orders', 'users']) {
        const got = await client.call(name, async (instance) => instance.id);
        assert.match(got, new RegExp(`^${name}-[12]$`));
      }
      // every watch is established before the client's first call returns (the balancer is ready)
      await waitFor('two watches', async () => (await etcdWatchers(etcd.endpoint)) >= base + 2);
      assert.equal(await etcdWatchers(etcd.endpoint), base + 2, 'one watch per service, not one for the cache and one for the balancer');
      const s = (client.registry as unknown as { stats(): { watches: number; watchers: number } }).stats();
      assert.deepEqual([s.watches, s.watchers], [2, 2], 'the cache holds one registry watch per service and serves both balancers');

      // control: a balancer that follows the registry directly is one more watch, which etcd counts
      direct = new Balancer({ registry: reader, service: 'orders' });
      await direct.ready();
      await waitFor("the direct follower's watch", async () => (await etcdWatchers(etcd.endpoint)) === base + 3);

      // the new instance reaches the client's balancer through the one watch
      await writer.register({ id: 'orders-3', name: 'orders', address: '127.0.0.1:9003' });
      await waitFor('orders-3 picked', async () => {
        const seen = new Set<string>();
        for (let i = 0; i < 30; i++) seen.add(await client.call('orders', async (instance) => instance.id));
        return seen.has('orders-3');
      });

      await direct.close();
      await client.close();
      await waitFor('watches closed', async () => (await etcdWatchers(etcd.endpoint)) === base);
    } finally {
      await direct?.close();
      await client.close();
      await reader.close();
      await writer.close();
    }
  });
});
