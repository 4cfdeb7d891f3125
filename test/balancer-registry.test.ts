/**
 * The Balancer on the real registries: MemoryRegistry (register, deregister, TTL expiry, a watcher
 * that falls behind and must resync) and EtcdRegistry on a real etcd.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Balancer } from '../src/balancer/index.js';
import { ManualClock } from '../src/core/clock.js';
import { MemoryRegistry } from '../src/registry/memory-registry.js';
import { RegistryCache } from '../src/registry/registry-cache.js';
import { EtcdRegistry } from '../src/registry/etcd-registry.js';
import type { ServiceInstance } from '../src/registry/types.js';
import { etcdBinary, startEtcd } from './support/etcd.js';
import { skipReason } from './support/servers.js';

const inst = (id: string, port: number, weight?: string): ServiceInstance => ({
  id,
  name: 'payments',
  address: `127.0.0.1:${port}`,
  ...(weight === undefined ? {} : { metadata: { weight } }),
});

async function until(cond: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

const ids = (b: Balancer) => b.instances().map((i) => i.id).sort().join(',');

describe('Balancer on MemoryRegistry', () => {
  it('follows registrations, updates and deregistrations, keeping smooth-WRR state of instances that stay', async () => {
    const reg = new MemoryRegistry();
    await reg.register(inst('A', 1, '5'));
    await reg.register(inst('B', 2));
    await reg.register(inst('C', 3));
    const bal = new Balancer({ registry: reg, service: 'payments', strategy: 'weighted-round-robin', outlier: false });
    try {
      await bal.ready();
      assert.equal(ids(bal), 'A,B,C');
      const seq = () => bal.pick().id;
      assert.equal([seq(), seq(), seq()].join(''), 'AAB');
      await reg.register(inst('D', 4));
      await until(() => ids(bal) === 'A,B,C,D');
      await reg.deregister(inst('D', 4));
      await until(() => ids(bal) === 'A,B,C');
      assert.equal([seq(), seq(), seq(), seq()].join(''), 'ACAA', 'the cycle continues where it was');
      await reg.register(inst('B', 2, '3'));
      await until(() => bal.instances().some((i) => i.metadata?.weight === '3'));
    } finally {
      await bal.close();
      await reg.close();
    }
  });

  it('drops an instance whose TTL expires', async () => {
    const clock = new ManualClock();
    const reg = new MemoryRegistry({ clock, sweepIntervalMs: 0 });
    await reg.register(inst('a', 1), { ttlMs: 1_000 });
    await reg.register(inst('b', 2));
    const bal = new Balancer({ registry: reg, service: 'payments' });
    try {
      await bal.ready();
      assert.equal(ids(bal), 'a,b');
      clock.advance(1_001);
      reg.expire();
      await until(() => ids(bal) === 'b');
    } finally {
      await bal.close();
      await reg.close();
    }
  });

  it('resyncs by listing again when its watcher falls behind', async () => {
    const reg = new MemoryRegistry({ watchQueueSize: 2 });
    const bal = new Balancer({ registry: reg, service: 'payments', random: () => 0 });
    try {
      await bal.ready();
      // Many changes at once overflow the 2-event queue: the watch ends with WatchResyncError.
      await Promise.all(Array.from({ length: 20 }, (_, i) => reg.register(inst(`n${i}`, 1000 + i))));
      await until(() => bal.instances().length === 20);
    } finally {
      await bal.close();
      await reg.close();
    }
  });
});

describe('Balancer on RegistryCache', () => {
  it('follows changes through the cache, and keeps its list while the registry stops answering', async () => {
    const reg = new MemoryRegistry();
    await reg.register(inst('a', 1));
    await reg.register(inst('b', 2));
    const cache = new RegistryCache(reg);
    const bal = new Balancer({ registry: cache, service: 'payments', strategy: 'round-robin' });
    try {
      await bal.ready();
      assert.equal(ids(bal), 'a,b');
      await reg.register(inst('c', 3));
      await until(() => ids(bal) === 'a,b,c');
      const list = bal.instances();
      // The registry goes away: the watch breaks, the balancer re-lists from the cache (stale but
      // there) and keeps picking from the same list.
      await reg.close();
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(bal.instances(), list);
      assert.ok(['a', 'b', 'c'].includes(bal.pick().id));
    } finally {
      await bal.close();
      await cache.close();
    }
  });
});

describe('Balancer on EtcdRegistry (real etcd)', { skip: skipReason(etcdBinary, 'etcd') }, () => {
  it('follows registrations and deregistrations through the etcd watch', async () => {
    const etcd = await startEtcd();
    const reg = new EtcdRegistry({ hosts: etcd.endpoint, prefix: '/bulwark-balancer-test' });
    const bal = new Balancer({ registry: reg, service: 'payments', strategy: 'round-robin' });
    try {
      await reg.register(inst('a', 1));
      await bal.ready();
      await until(() => ids(bal) === 'a');
      await reg.register(inst('b', 2));
      await until(() => ids(bal) === 'a,b');
      await reg.deregister(inst('a', 1));
      await until(() => ids(bal) === 'b');
      assert.equal(bal.pick().id, 'b');
    } finally {
      await bal.close();
      await reg.close();
      await etcd.stop();
    }
  });
});
