/**
 * The Registry contract: one suite, run against MemoryRegistry and against EtcdRegistry on a real etcd in
 * each of its layouts. What a layout cannot carry (go-zero: no version, no metadata, the id is the
 * address's) is a capability it declares: the suite expects such fields absent, never an error. A
 * RegistryCache over each subject is checked the same way (watch, stale answers, throttled refreshes).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { NotFoundError } from '../src/core/errors.js';
import { MemoryRegistry } from '../src/registry/memory-registry.js';
import { EtcdRegistry } from '../src/registry/etcd-registry.js';
import { addressId, etcdLayout, type EtcdLayoutName, type LayoutCapabilities } from '../src/registry/etcd-layout.js';
import { RegistryCache } from '../src/registry/registry-cache.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { skipReason, waitFor } from './support/servers.js';
import type { Registry, RegistryEvent, ServiceInstance } from '../src/registry/types.js';

/** Subject builds a fresh registry for one test, under its own namespace. */
export type Subject = () => Promise<Registry>;

let seq = 0;
const svc = () => `svc-${process.pid}-${++seq}`;
const inst = (name: string, id: string, extra: Partial<ServiceInstance> = {}): ServiceInstance => ({
  id,
  name,
  address: `127.0.0.1:${9000 + Number(id.replace(/\D/g, '') || 0)}`,
  ...extra,
});

/** watchReady opens a watch and resolves once it is established. */
async function watchReady(r: Registry, service?: string, signal?: AbortSignal) {
  let ready!: () => void;
  const p = new Promise<void>((res) => (ready = res));
  const it = r.watch({ service, signal, onReady: ready })[Symbol.asyncIterator]();
  const first = it.next(); // start the watch (lazy implementations start on first next())
  await p;
  let pending: Promise<IteratorResult<RegistryEvent>> | undefined = first;
  return {
    async next(timeoutMs = 10_000): Promise<RegistryEvent> {
      const n = pending ?? it.next();
      pending = undefined;
      const t = new Promise<never>((_, rej) => setTimeout(() => rej(new Error('no event within timeout')), timeoutMs).unref());
      const r = await Promise.race([n, t]);
      if (r.done) throw new Error('watch ended');
      return r.value;
    },
    async end(timeoutMs = 10_000): Promise<boolean> {
      const n = pending ?? it.next();
      pending = undefined;
      const t = new Promise<never>((_, rej) => setTimeout(() => rej(new Error('watch did not end')), timeoutMs).unref());
      return (await Promise.race([n, t])).done === true;
    },
    return: () => it.return?.(),
  };
}

/** Everything carried: MemoryRegistry, and EtcdRegistry's bulwark layout. */
const ALL: LayoutCapabilities = { version: true, metadata: true, stringIds: true };

/** contract registers the shared suite for one implementation. */
export function contract(label: string, make: Subject, options: { skip?: string | undefined; capabilities?: LayoutCapabilities } = {}): void {
  const caps = options.capabilities ?? ALL;
  /** readBack is `i` as the subject answers it: without what it cannot carry. */
  const readBack = (i: ServiceInstance): ServiceInstance => {
    const out: { -readonly [K in keyof ServiceInstance]: ServiceInstance[K] } = { ...i };
    if (!caps.version) delete out.version;
    if (!caps.metadata) delete out.metadata;
    if (!caps.stringIds) out.id = addressId(i.address);
    return out;
  };
  const byId = (a: ServiceInstance, b: ServiceInstance) => a.id.localeCompare(b.id);
  describe(`Registry contract: ${label}`, { skip: options.skip }, () => {
    const open: Registry[] = [];
    const fresh = async () => {
      const r = await make();
      open.push(r);
      return r;
    };
    after(async () => {
      for (const r of open) await r.close();
    });

    it('answers what was registered, and lists the service', async () => {
      const r = await fresh();
      const name = svc();
      await r.register(inst(name, 'a1', { version: '1.0', metadata: { zone: 'z1' } }));
      await r.register(inst(name, 'a2'));
      const got = [...(await r.getService(name))].sort(byId);
      assert.deepEqual(got, [inst(name, 'a1', { version: '1.0', metadata: { zone: 'z1' } }), inst(name, 'a2')].map(readBack).sort(byId));
      assert.ok((await r.listServices()).includes(name));
    });

    it('rejects NotFoundError for a service with no instances', async () => {
      const r = await fresh();
      await assert.rejects(r.getService(svc()), NotFoundError);
    });

    it('updates an instance registered again with new data, and removes it on deregister', async () => {
      const r = await fresh();
      const name = svc();
      await r.register(inst(name, 'a1'));
      await r.register(inst(name, 'a1', { address: '127.0.0.1:7777' }));
      assert.deepEqual(
        (await r.getService(name)).map((i) => i.address),
        ['127.0.0.1:7777'],
      );
      await r.deregister(inst(name, 'a1'));
      await assert.rejects(r.getService(name), NotFoundError);
      assert.ok(!(await r.listServices()).includes(name));
    });

    it('rejects bad instances with a TypeError naming the field, before writing anything', async () => {
      const r = await fresh();
      const name = svc();
      await assert.rejects(r.register({ id: 'a/1', name, address: '127.0.0.1:1' }), (e: unknown) => e instanceof TypeError && /instance\.id/.test(e.message));
      await assert.rejects(r.register({ id: 'a1', name, address: 'nowhere' }), (e: unknown) => e instanceof TypeError && /instance\.address/.test(e.message));
      await assert.rejects(r.getService('bad name'), TypeError);
      await assert.rejects(r.getService(name), NotFoundError);
    });

    it('hands out results a caller cannot use to corrupt the registry', async () => {
      const r = await fresh();
      const name = svc();
      await r.register(inst(name, 'a1', { metadata: { w: '1' } }));
      const got = (await r.getService(name)) as ServiceInstance[];
      try {
        got.length = 0; // typed read-only; a registry may hand out a copy (allowed) or a frozen array (throws)
      } catch {
        // frozen: fine
      }
      assert.equal((await r.getService(name)).length, 1);
      assert.equal((await r.getService(name))[0]!.metadata?.w, caps.metadata ? '1' : undefined);
    });

    it('watches one service: create, update, delete in order, and nothing of other services', async () => {
      const r = await fresh();
      const name = svc();
      const other = svc();
      const w = await watchReady(r, name);
      await r.register(inst(other, 'x1'));
      await r.register(inst(name, 'a1'));
      await r.register(inst(name, 'a1', { version: '2' }));
      await r.deregister(inst(name, 'a1'));
      // a layout without versions stores nothing new for the second register: no update
      const expected = caps.version
        ? ([
            ['create', inst(name, 'a1')],
            ['update', inst(name, 'a1', { version: '2' })],
            ['delete', inst(name, 'a1', { version: '2' })],
          ] as const)
        : ([
            ['create', inst(name, 'a1')],
            ['delete', inst(name, 'a1')],
          ] as const);
      const got: RegistryEvent[] = [];
      for (let i = 0; i < expected.length; i++) got.push(await w.next());
      assert.deepEqual(
        got.map((e) => [e.type, e.instance.name, e.instance.id, e.instance.version]),
        expected.map(([type, i]) => [type, name, readBack(i).id, readBack(i).version]),
      );
      await w.return();
    });

    it('watches every service when none is given', async () => {
      const r = await fresh();
      const a = svc();
      const b = svc();
      const w = await watchReady(r);
      await r.register(inst(a, 'a1'));
      await r.register(inst(b, 'b1'));
      const got = [await w.next(), await w.next()].filter((e) => e.instance.name === a || e.instance.name === b);
      assert.deepEqual(got.map((e) => e.instance.name).sort(), [a, b].sort());
      await w.return();
    });

    it('ends a watch when its signal aborts and when the registry closes', async () => {
      const r = await fresh();
      const ac = new AbortController();
      const w1 = await watchReady(r, svc(), ac.signal);
      const w2 = await watchReady(r, svc());
      ac.abort();
      assert.equal(await w1.end(), true);
      await r.close();
      assert.equal(await w2.end(), true);
    });

    it('behind a RegistryCache: watch events keep lookups fresh, refreshes are throttled, a failing registry answers stale', async () => {
      const r = await fresh();
      const name = svc();
      const cache = new RegistryCache(r, { ttlMs: 300, minRetryIntervalMs: 60_000 });
      try {
        await r.register(inst(name, 'a1'));
        assert.deepEqual(
          (await cache.getService(name)).map((i) => i.id),
          [readBack(inst(name, 'a1')).id],
        );
        // the watch brings a2 in without another registry call
        await r.register(inst(name, 'a2'));
        await waitFor('a2 through the watch', async () => (await cache.getService(name)).length === 2, 10_000);
        await r.deregister(inst(name, 'a1'));
        await waitFor('a1 gone through the watch', async () => (await cache.getService(name)).length === 1, 10_000);
        assert.equal(cache.stats().registryCalls <= 2, true, `registry calls ${cache.stats().registryCalls}`); // the first lookup, at most one TTL refresh
        // an unknown service: asked once (and once more if its watch was established only after that
        // listing began, which a lookup then joins), then throttled
        const missing = svc();
        const before = cache.stats().registryCalls;
        await assert.rejects(cache.getService(missing), NotFoundError);
        await waitFor(
          'a throttled lookup',
          async () => {
            await assert.rejects(cache.getService(missing), NotFoundError);
            return cache.stats().throttled >= 1;
          },
          10_000,
        );
        assert.ok(cache.stats().registryCalls - before <= 2, `registry calls for an unknown service: ${cache.stats().registryCalls - before}`);
        // the registry fails (closed): once the entry expires, the last list is answered stale
        await r.close();
        await waitFor('a stale answer', async () => (await cache.getService(name)).length === 1 && cache.stats().stale > 0, 10_000);
        assert.deepEqual(
          (await cache.getService(name)).map((i) => i.id),
          [readBack(inst(name, 'a2')).id],
        );
      } finally {
        await cache.close();
      }
    });
  });
}

contract('MemoryRegistry', async () => new MemoryRegistry({ sweepIntervalMs: 0 }));

// EtcdRegistry runs the same suite against a real etcd (started once for this file).
let etcd: EtcdServer | undefined;
before(async () => {
  if (etcdBinary !== undefined) etcd = await startEtcd();
});
after(async () => {
  await etcd?.stop();
});
let prefixes = 0;
for (const layout of ['bulwark', 'go-zero', 'go-micro'] as EtcdLayoutName[]) {
  contract(
    `EtcdRegistry (${layout} layout)`,
    async () => new EtcdRegistry({ hosts: etcd!.endpoint, layout, prefix: `/bulwark-contract/${process.pid}-${++prefixes}`, ttlMs: 5000 }),
    { skip: skipReason(etcdBinary, 'etcd'), capabilities: etcdLayout('contract', layout).capabilities },
  );
}
