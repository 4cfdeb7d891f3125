/**
 * The Balancer on the real registries: MemoryRegistry (register, deregister, TTL expiry, a watcher
 * that falls behind and must resync) and EtcdRegistry on a real etcd.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Balancer } from '../src/balancer/index.js';
import { ManualClock } from '../src/core/clock.js';
import { AbortedError } from '../src/core/errors.js';
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

/** settled lets promise callbacks run (MemoryRegistry delivers through them; no timer is involved) until `cond()` holds. */
async function settled(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !cond(); i++) await new Promise((r) => setImmediate(r));
  assert.ok(cond(), 'condition not met');
}

/** until waits for a condition on a real server, polling, with a deadline. */
async function until(cond: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

const ids = (b: Balancer) =>
  b
    .instances()
    .map((i) => i.id)
    .sort()
    .join(',');

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
      await settled(() => ids(bal) === 'A,B,C,D');
      await reg.deregister(inst('D', 4));
      await settled(() => ids(bal) === 'A,B,C');
      assert.equal([seq(), seq(), seq(), seq()].join(''), 'ACAA', 'the cycle continues where it was');
      await reg.register(inst('B', 2, '3'));
      await settled(() => bal.instances().some((i) => i.metadata?.weight === '3'));
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
      await settled(() => ids(bal) === 'b');
    } finally {
      await bal.close();
      await reg.close();
    }
  });

  it('resyncs by listing again when its watcher falls behind', async () => {
    const clock = new ManualClock();
    const reg = new MemoryRegistry({ watchQueueSize: 2, clock });
    const bal = new Balancer({ registry: reg, service: 'payments', random: () => 0, clock });
    try {
      await bal.ready();
      // Many changes at once overflow the 2-event queue: the watch ends with WatchResyncError.
      await Promise.all(Array.from({ length: 20 }, (_, i) => reg.register(inst(`n${i}`, 1000 + i))));
      await clock.advanceAsync(100); // the backoff before watching and listing again (random 0: the shortest wait)
      await settled(() => bal.instances().length === 20);
    } finally {
      await bal.close();
      await reg.close();
    }
  });
});

describe('Balancer.ready with a signal', () => {
  it('rejects AbortedError when the signal aborts before the first listing, and the balancer still becomes ready', async () => {
    const clock = new ManualClock();
    const reg = new MemoryRegistry({ clock });
    await reg.register(inst('a', 1));
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const slow = { watch: reg.watch.bind(reg), getService: async (name: string) => (await held, reg.getService(name)) };
    const bal = new Balancer({ registry: slow as unknown as MemoryRegistry, service: 'payments', clock });
    try {
      await assert.rejects(bal.ready({ signal: AbortSignal.abort() }), AbortedError);
      const ac = new AbortController();
      const waiting = bal.ready({ signal: ac.signal });
      ac.abort();
      await assert.rejects(waiting, AbortedError);
      release();
      await bal.ready();
      assert.equal(ids(bal), 'a');
    } finally {
      await bal.close();
      await reg.close();
    }
  });
});

describe('Balancer on RegistryCache', () => {
  it('follows changes through the cache, and keeps its list while the registry stops answering', async () => {
    const clock = new ManualClock();
    const reg = new MemoryRegistry({ clock });
    await reg.register(inst('a', 1));
    await reg.register(inst('b', 2));
    const cache = new RegistryCache(reg, { clock });
    const bal = new Balancer({ registry: cache, service: 'payments', strategy: 'round-robin', clock });
    const other = new Balancer({ registry: cache, service: 'payments', clock });
    try {
      await bal.ready();
      await other.ready();
      assert.equal(ids(bal), 'a,b');
      assert.equal(reg.stats().watchers, 1, 'two balancers and the cache share one registry watch');
      await reg.register(inst('c', 3));
      await settled(() => ids(bal) === 'a,b,c' && ids(other) === 'a,b,c');
      const list = bal.instances();
      // The registry goes away: the cache's watch breaks and keeps retrying (backoff on the clock),
      // its lookups fail, and the balancer keeps its list and picks from it.
      await reg.close();
      for (let i = 0; i < 30; i++) await clock.advanceAsync(1_000);
      assert.ok(cache.stats().watchReconnects >= 3, 'the cache kept trying');
      assert.equal(bal.instances(), list);
      assert.ok(['a', 'b', 'c'].includes(bal.pick().id));
    } finally {
      await bal.close();
      await other.close();
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
