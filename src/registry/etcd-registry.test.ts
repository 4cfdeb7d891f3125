/**
 * EtcdRegistry's lease and confirmation rules on a ManualClock, against a fake of three etcd members that
 * share one store (the real thing: test/registry-etcd*.test.ts).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EtcdLeaseInvalidError, GRPCUnavailableError, type IDeleteRangeRequest, type IPutRequest, type IRangeRequest, type ITxnRequest } from 'etcd3';
import { ManualClock } from '../core/clock.js';
import { RegistryPendingError } from '../core/errors.js';
import { EtcdRegistry } from './etcd-registry.js';
import type { EtcdClient } from './etcd-client.js';

/** Store is the state the fake members share: keys (with their lease) and leases (with their TTL). */
class Store {
  revision = 1;
  readonly keys = new Map<string, { value: string; lease: string }>();
  readonly leases = new Map<string, number>();
  private next = 100;

  grant(ttl: number): string {
    const id = String(this.next++);
    this.leases.set(id, ttl);
    return id;
  }
  put(key: Buffer, value: Buffer, lease: unknown): void {
    const id = String(lease ?? '');
    if (id !== '' && !this.leases.has(id)) throw new EtcdLeaseInvalidError('etcdserver: requested lease not found');
    this.keys.set(key.toString(), { value: value.toString(), lease: id });
    this.revision++;
  }
  revoke(id: string): void {
    this.leases.delete(id);
    for (const [k, v] of this.keys) if (v.lease === id) this.keys.delete(k);
  }
  leaseOf(key: string): string | undefined {
    return this.keys.get(key)?.lease;
  }
}

/** Member is one fake etcd member: `up` answers from the store, `down` refuses like a dead process. */
interface Member {
  mode: 'up' | 'down';
  keepAlives: number;
}

function fakeClient(store: Store, m: Member): EtcdClient {
  const header = () => ({ revision: String(store.revision) });
  const answer = <T>(fn: () => T): Promise<T> =>
    m.mode === 'down' ? Promise.reject(new GRPCUnavailableError('14 UNAVAILABLE: No connection established')) : Promise.resolve().then(fn);
  return {
    kv: {
      range: (req: IRangeRequest) =>
        answer(() => {
          const from = req.key!.toString();
          const to = req.range_end!.toString();
          const kvs = [...store.keys]
            .filter(([k]) => k >= from && k < to)
            .map(([k, v]) => ({ key: Buffer.from(k), value: Buffer.from(v.value), mod_revision: '1', lease: v.lease }));
          return { header: header(), kvs, more: false, count: String(kvs.length) } as never;
        }),
      put: (req: IPutRequest) => answer(() => (store.put(req.key as Buffer, req.value as Buffer, req.lease), { header: header() } as never)),
      txn: (req: ITxnRequest) =>
        answer(() => {
          for (const op of req.success ?? []) store.put(op.request_put!.key as Buffer, op.request_put!.value as Buffer, op.request_put!.lease);
          return { header: header(), succeeded: true, responses: [] } as never;
        }),
      deleteRange: (req: IDeleteRangeRequest) => answer(() => (store.keys.delete(req.key!.toString()), { header: header() } as never)),
    },
    leaseClient: {
      leaseGrant: (req) => answer(() => ({ header: header(), ID: store.grant(Number(req.TTL)), TTL: String(req.TTL) }) as never),
      leaseRevoke: (req) => answer(() => (store.revoke(String(req.ID)), { header: header() } as never)),
    },
    keepAlive: (id) =>
      answer(() => {
        m.keepAlives++;
        return store.leases.get(id) ?? 0;
      }),
    watch: () => {
      throw new Error('the fake has no watch');
    },
    close: () => {},
  };
}

function setup(o: { ttlMs?: number; dialTimeoutMs?: number; layout?: 'go-zero' } = {}) {
  const clock = new ManualClock();
  const store = new Store();
  const members: Member[] = [0, 1, 2].map(() => ({ mode: 'up', keepAlives: 0 }));
  const hosts = ['http://a', 'http://b', 'http://c'];
  const registry = new EtcdRegistry({
    hosts,
    prefix: '/t',
    ttlMs: o.ttlMs ?? 3000,
    dialTimeoutMs: o.dialTimeoutMs ?? 3000,
    clock,
    ...(o.layout === undefined ? {} : { layout: o.layout }),
    createClient: (h) => fakeClient(store, members[hosts.indexOf(h)]!),
  });
  const all = (mode: Member['mode']) => members.forEach((m) => (m.mode = mode));
  return { clock, store, members, registry, all };
}

const inst = (id: string) => ({ id, name: 'api', address: '127.0.0.1:9000' });

describe('EtcdRegistry leases and confirmations (fake members, ManualClock)', () => {
  it('keeps its lease alive every TTL/3, in turn over the members', async () => {
    const { clock, members, registry } = setup();
    await registry.register(inst('a1'));
    await clock.advanceAsync(999);
    assert.equal(registry.stats().keepAlives, 0);
    await clock.advanceAsync(1);
    assert.equal(registry.stats().keepAlives, 1);
    await clock.advanceAsync(5000);
    assert.equal(registry.stats().keepAlives, 6);
    assert.ok(
      members.every((m) => m.keepAlives >= 1),
      `spread: ${members.map((m) => m.keepAlives).join('/')}`,
    );
    await registry.close();
  });

  it('keeps the lease when one member is down: keep-alives go to the others', async () => {
    const { clock, members, registry } = setup();
    await registry.register(inst('a1'));
    members[1]!.mode = 'down';
    await clock.advanceAsync(30_000);
    const s = registry.stats();
    assert.deepEqual({ granted: s.leasesGranted, lost: s.leasesLost, failures: s.keepAliveFailures }, { granted: 1, lost: 0, failures: 0 });
    assert.equal(s.keepAlives, 30);
    await registry.close();
  });

  it('keeps the lease while no member answers until its TTL has passed since the last confirmed keep-alive, then replaces it and writes again', async () => {
    const { clock, store, registry, all } = setup({ dialTimeoutMs: 500 });
    await registry.register(inst('a1'));
    const first = store.leaseOf('/t/api/a1')!;
    all('down');
    await clock.advanceAsync(2000); // the keep-alive due at 1 000 failed at 1 500: the TTL (3 000) has not passed
    assert.ok(registry.stats().keepAliveFailures >= 1);
    assert.equal(registry.stats().leasesLost, 0);
    await clock.advanceAsync(2000); // failures go on past 3 000: the lease counts as lost
    assert.equal(registry.stats().leasesLost, 1);
    assert.equal(store.leaseOf('/t/api/a1'), first, 'nothing could be written meanwhile');
    all('up');
    await clock.advanceAsync(500);
    const s = registry.stats();
    assert.equal(s.leasesGranted, 2);
    assert.equal(s.rewrites, 1);
    const second = store.leaseOf('/t/api/a1')!;
    assert.notEqual(second, first, 'written again under the new lease');
    assert.ok(!store.leases.has(first), 'the old lease revoked once the instance was under the new one');
    await registry.close();
  });

  it('loses the lease at once when etcd answers a keep-alive with TTL 0, and writes every instance again', async () => {
    const { clock, store, registry } = setup();
    await registry.register(inst('a1'));
    await registry.register(inst('a2'));
    store.leases.delete(store.leaseOf('/t/api/a1')!); // etcd expired it (the process was paused)
    await clock.advanceAsync(1000);
    const s = registry.stats();
    assert.deepEqual({ lost: s.leasesLost, granted: s.leasesGranted, rewrites: s.rewrites }, { lost: 1, granted: 2, rewrites: 1 });
    const lease = store.leaseOf('/t/api/a1');
    assert.ok(lease !== undefined && store.leases.has(lease) && store.leaseOf('/t/api/a2') === lease);
    await registry.close();
  });

  it('rejects RegistryPendingError when a register is not confirmed in time, then writes it by itself', async () => {
    const { clock, store, registry, all } = setup();
    all('down');
    const pending = assert.rejects(registry.register(inst('a1')), RegistryPendingError);
    await clock.advanceAsync(3000);
    await pending;
    assert.equal(registry.stats().pending, 1);
    all('up');
    await clock.advanceAsync(1000);
    assert.ok(store.keys.has('/t/api/a1'));
    assert.equal(registry.stats().pending, 0);
    // the same for a deregister
    all('down');
    const gone = assert.rejects(registry.deregister(inst('a1')), RegistryPendingError);
    await clock.advanceAsync(3000);
    await gone;
    assert.ok(store.keys.has('/t/api/a1'));
    all('up');
    await clock.advanceAsync(1000);
    assert.ok(!store.keys.has('/t/api/a1'));
    assert.equal(registry.stats().pending, 0);
    await registry.close();
  });

  it('puts instances with their own TTL under a lease of that TTL, and revokes a lease nothing uses any more', async () => {
    const { clock, store, registry } = setup();
    await registry.register(inst('a1'));
    await registry.register(inst('a2'), { ttlMs: 9000 });
    const [l1, l2] = [store.leaseOf('/t/api/a1')!, store.leaseOf('/t/api/a2')!];
    assert.notEqual(l1, l2);
    assert.deepEqual([store.leases.get(l1), store.leases.get(l2)], [3, 9]);
    await registry.deregister(inst('a1'));
    await clock.advanceAsync(1000);
    assert.ok(!store.leases.has(l1));
    assert.equal(registry.stats().leases, 1);
    await registry.close();
    assert.ok(!store.leases.has(l2), 'close revokes the rest');
  });
});

describe('EtcdRegistry in the go-zero layout (fake members, ManualClock)', () => {
  const zinst = (id: string, port: number) => ({ id, name: 'api', address: `127.0.0.1:${port}` });

  it('gives each instance a lease of its own, its key <prefix>/<name>/<lease id> and its value the address', async () => {
    const { store, registry } = setup({ layout: 'go-zero' });
    await registry.register(zinst('a1', 9001));
    await registry.register(zinst('a2', 9002));
    const keys = [...store.keys].map(([k, v]) => [k, v.value, v.lease]);
    assert.deepEqual(keys, [
      ['/t/api/100', '127.0.0.1:9001', '100'],
      ['/t/api/101', '127.0.0.1:9002', '101'],
    ]);
    assert.equal(registry.stats().leases, 2);
    // registered again with a new address: same lease, same key, new value
    await registry.register(zinst('a1', 9011));
    assert.equal(store.keys.get('/t/api/100')?.value, '127.0.0.1:9011');
    assert.equal(registry.stats().leasesGranted, 2);
    await registry.close();
  });

  it('replaces a lost lease with a new one and writes the instance under the new key; the old key goes with the old lease', async () => {
    const { clock, store, registry } = setup({ layout: 'go-zero' });
    await registry.register(zinst('a1', 9001));
    store.revoke('100'); // etcd lost it (expired while paused): key and lease gone
    await clock.advanceAsync(1000); // the keep-alive answers TTL 0: a new lease, the instance written again
    assert.deepEqual(
      [...store.keys].map(([k, v]) => [k, v.value]),
      [['/t/api/101', '127.0.0.1:9001']],
    );
    assert.deepEqual({ granted: registry.stats().leasesGranted, lost: registry.stats().leasesLost }, { granted: 2, lost: 1 });
    await registry.close();
  });

  it('deregisters by deleting the key of its lease, then revokes the lease nothing uses', async () => {
    const { clock, store, registry } = setup({ layout: 'go-zero' });
    await registry.register(zinst('a1', 9001));
    await registry.register(zinst('a2', 9002));
    await registry.deregister(zinst('a1', 9001));
    assert.deepEqual([...store.keys.keys()], ['/t/api/101']);
    await clock.advanceAsync(1000);
    assert.deepEqual([...store.leases.keys()], ['101']);
    assert.equal(registry.stats().leases, 1);
    await registry.deregister(zinst('never', 9003)); // not registered here: nothing to delete, resolves
    await registry.close();
  });

  it('moves an instance registered again with another TTL to a new lease and key; the old key goes with the old lease', async () => {
    const { clock, store, registry } = setup({ layout: 'go-zero' });
    await registry.register(zinst('a1', 9001));
    await registry.register(zinst('a1', 9001), { ttlMs: 6_000 });
    assert.equal(store.keys.get('/t/api/101')?.lease, '101');
    assert.equal(store.leases.get('101'), 6);
    await clock.advanceAsync(1000);
    assert.deepEqual([...store.keys.keys()], ['/t/api/101']);
    assert.deepEqual([...store.leases.keys()], ['101']);
    await registry.close();
  });

  it('rejects what the layout cannot do with a TypeError: listing every service without a prefix, and a prefix of "" for another layout', async () => {
    const r = new EtcdRegistry({ hosts: 'http://x', layout: 'go-zero', createClient: () => fakeClient(new Store(), { mode: 'up', keepAlives: 0 }) });
    await assert.rejects(r.listServices(), /EtcdRegistry.listServices: the go-zero layout without a prefix/);
    assert.throws(() => r.watch(), /EtcdRegistry.watch: the go-zero layout without a prefix needs a service/);
    await r.close();
    assert.throws(() => new EtcdRegistry({ hosts: 'http://x', prefix: '' }), /EtcdRegistry: prefix must be a key path/);
    assert.throws(() => new EtcdRegistry({ hosts: 'http://x', layout: 'consul' as never }), /EtcdRegistry: layout must be one of/);
  });
});
