/**
 * EtcdRegistry against a real etcd: a dead process's instance expires with its lease, a lost lease is
 * replaced and everything re-registered, instances with their own TTL get a lease per TTL, registrations
 * come back after etcd is killed and restarted with the same data dir, a watch across that restart loses
 * and repeats nothing, a compacted resume revision leads to a resync with exactly the right events, bad
 * values are skipped with one warning, an unreachable (or stopped) etcd rejects RegistryUnavailableError
 * naming the endpoint within the dial timeout (RegistryPendingError for register/deregister, which are
 * carried out later), calls take an AbortSignal, close() revokes the leases, and a process whose watch
 * lost its stream exits promptly once it closed its registry.
 * (Clusters of three members: registry-etcd-cluster.test.ts.)
 *
 * The tests run four at a time: most wait on etcd's lease timers, dial timeouts and child processes, not
 * on the CPU. Those that stop, kill or compact etcd get an etcd of their own (`ownEtcd`); the others
 * share one, each under a prefix of its own.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { Etcd3 } from 'etcd3';
import { AbortedError, ClosedError, NotFoundError, RegistryPendingError, RegistryUnavailableError } from '../src/core/errors.js';
import { EtcdRegistry } from '../src/registry/etcd-registry.js';
import type { Registry, RegistryEvent, ServiceInstance } from '../src/registry/types.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { freePort, skipReason, waitFor } from './support/servers.js';
import { collect } from './support/collect-watch.js';
import { DelayProxy } from './support/netfault.js';

const skip = skipReason(etcdBinary, 'etcd');
/** The built EtcdRegistry, for child processes (plain node: what a user's process runs; scripts/test.mjs builds first). */
const REGISTRY_MODULE = new URL('../dist/registry/etcd-registry.js', import.meta.url).pathname;
let etcd: EtcdServer;
let raw: Etcd3;
let n = 0;
const prefix = () => `/bulwark-etcd-test/${process.pid}-${++n}`;
const inst = (name: string, id: string, extra: Partial<ServiceInstance> = {}): ServiceInstance => ({ id, name, address: '127.0.0.1:9000', ...extra });
const open: Registry[] = [];
type Options = Partial<ConstructorParameters<typeof EtcdRegistry>[0]>;
const make = (o: Options = {}) => {
  const r = new EtcdRegistry({ hosts: etcd.endpoint, ttlMs: 2000, dialTimeoutMs: 1500, ...o });
  open.push(r);
  return r;
};

/** Own is an etcd of one test's own, with a raw client and the registries the test made on it. */
interface Own {
  readonly etcd: EtcdServer;
  readonly raw: Etcd3;
  make(o?: Options): EtcdRegistry;
}

/**
 * ownEtcd runs `fn` with an etcd of its own, for a test that stops, kills or compacts etcd (which would
 * disturb the tests running beside it on the shared one); then closes what it made and stops that etcd.
 */
async function ownEtcd(fn: (own: Own) => Promise<void>): Promise<void> {
  const server = await startEtcd();
  const made: EtcdRegistry[] = [];
  const own: Own = {
    etcd: server,
    raw: new Etcd3({ hosts: server.endpoint }),
    make(o = {}) {
      const r = new EtcdRegistry({ hosts: server.endpoint, ttlMs: 2000, dialTimeoutMs: 1500, ...o });
      made.push(r);
      return r;
    },
  };
  try {
    await fn(own);
  } finally {
    try {
      server.process.signal('SIGCONT'); // if the test failed with etcd stopped
    } catch {
      // killed: nothing to continue
    }
    await Promise.all(made.map((r) => r.close().catch(() => {})));
    own.raw.close();
    await server.stop();
  }
}

const summary = (es: RegistryEvent[]) => es.map((e) => `${e.type} ${e.instance.id}${e.instance.version ? `@${e.instance.version}` : ''}`);

/**
 * sigstop stops etcd and waits until every thread of it is stopped: a stop takes effect when the thread
 * the kernel chose for the signal next runs, and on a busy machine another thread may answer a request first.
 */
async function sigstop(etcd: EtcdServer): Promise<void> {
  etcd.process.signal('SIGSTOP');
  const pid = etcd.process.pid!;
  const state = (task: string) => {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${task}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    } catch {
      return 'T'; // the thread is gone
    }
  };
  await waitFor('every etcd thread stopped', () => readdirSync(`/proc/${pid}/task`).every((t) => 'Tt'.includes(state(t))), 5000);
}

/** A TCP proxy in front of etcd that a test can cut and restore, to cut one client off. */
async function proxy(target: number): Promise<{ endpoint: string; cut(): void; restore(): void; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let refusing = false;
  const server: Server = createServer((down) => {
    if (refusing) return void down.destroy();
    const up = connect({ host: '127.0.0.1', port: target });
    sockets.add(down).add(up);
    const drop = () => {
      down.destroy();
      up.destroy();
      sockets.delete(down);
      sockets.delete(up);
    };
    down.on('error', drop).on('close', drop);
    up.on('error', drop).on('close', drop);
    down.pipe(up).pipe(down);
  });
  const port = await freePort();
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return {
    endpoint: `http://127.0.0.1:${port}`,
    cut() {
      refusing = true;
      for (const s of sockets) s.destroy();
      sockets.clear();
    },
    restore() {
      refusing = false;
    },
    close: () => {
      this_cut();
      return new Promise((r) => server.close(() => r()));
    },
  };
  function this_cut() {
    refusing = true;
    for (const s of sockets) s.destroy();
  }
}

describe('EtcdRegistry on a real etcd', { skip, concurrency: 4 }, () => {
  before(async () => {
    etcd = await startEtcd();
    raw = new Etcd3({ hosts: etcd.endpoint });
  });
  after(async () => {
    await Promise.all(open.map((r) => r.close().catch(() => {})));
    raw?.close();
    await etcd?.stop();
  });

  it('removes the instance of a process that dies without deregistering once its lease TTL passes', async () => {
    const p = prefix();
    const watcher = make({ prefix: p });
    const w = await collect(watcher, 'doomed');
    const code = `
      const { EtcdRegistry } = await import(${JSON.stringify(REGISTRY_MODULE)});
      const r = new EtcdRegistry({ hosts: ${JSON.stringify(etcd.endpoint)}, prefix: ${JSON.stringify(p)}, ttlMs: 2000 });
      await r.register({ id: 'd1', name: 'doomed', address: '127.0.0.1:1' });
      console.log('registered');
      setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((res, rej) => {
      child.stdout!.on('data', (b: Buffer) => b.toString().includes('registered') && res());
      child.once('exit', () => rej(new Error('child exited before registering')));
    });
    assert.deepEqual(
      (await watcher.getService('doomed')).map((i) => i.id),
      ['d1'],
    );
    child.kill('SIGKILL');
    const killedAt = Date.now();
    await waitFor(
      'the dead instance to expire',
      async () =>
        watcher.getService('doomed').then(
          () => false,
          (e) => e instanceof NotFoundError,
        ),
      20_000,
    );
    // etcd may raise a short TTL to its minimum and expires leases on its own schedule: only a loose lower bound
    assert.ok(Date.now() - killedAt >= 1000, 'expired no earlier than about its TTL');
    await waitFor('the delete event', () => w.events.some((e) => e.type === 'delete'), 5000);
    assert.deepEqual(summary(w.events), ['create d1', 'delete d1']);
    await w.stop();
  });

  it('notices a lost lease at the next keep-alive, takes a new one and writes every instance again', async () => {
    const p = prefix();
    const r = make({ prefix: p, ttlMs: 3000 });
    await r.register(inst('api', 'a1'));
    await r.register(inst('api', 'a2'));
    const { leases } = await raw.leaseClient.leaseLeases({});
    const res = await raw.get(`${p}/api/a1`).exec();
    const lease = res.kvs[0]!.lease;
    assert.ok(leases.some((l) => l.ID === lease));
    await raw.leaseClient.leaseRevoke({ ID: lease });
    await assert.rejects(r.getService('api'), NotFoundError);
    // a register meeting the dead lease replaces it at once instead of failing
    await r.register(inst('api', 'a3'));
    // keep-alive runs every TTL/3 = 1 s and writes the others again; give a loaded machine plenty
    await waitFor('all three instances back', async () => (await r.getService('api').catch(() => [])).length === 3, 10_000);
    const s = r.stats();
    assert.ok(s.leasesLost >= 1 && s.leasesGranted >= 2 && s.rewrites >= 1, JSON.stringify(s));
  });

  it('writes every instance again after a lost lease in transactions etcd accepts (more than 128 keys, more than 1.5 MiB)', async () => {
    const p = prefix();
    const r = make({ prefix: p, ttlMs: 3000 });
    const big = { blob: 'x'.repeat(50_000) };
    const all = Array.from({ length: 300 }, (_, n) => ({ ...inst('many', `m${n}`), ...(n % 7 === 0 ? { metadata: big } : {}) }));
    for (const i of all) await r.register(i);
    const lease = (await raw.get(`${p}/many/m0`).exec()).kvs[0]!.lease;
    await raw.leaseClient.leaseRevoke({ ID: lease });
    await waitFor('all 300 instances back', async () => (await r.getService('many').catch(() => [])).length === 300, 15_000);
    const back = await raw.getAll().prefix(`${p}/many/`).exec();
    assert.equal(back.kvs.length, 300);
    assert.ok(
      back.kvs.every((kv) => kv.lease !== lease && kv.lease === back.kvs[0]!.lease),
      'all under one new lease',
    );
    assert.equal((await r.getService('many')).filter((i) => i.metadata?.blob === big.blob).length, 43);
  });

  it('answers listings at a revision and watch events carrying theirs, so a listing tells which events it reflects', async () => {
    const p = prefix();
    const r = make({ prefix: p });
    await r.register(inst('rev', 'r1'));
    const w = await collect(r, 'rev');
    const before = await r.getServiceListing('rev');
    assert.deepEqual(
      before.instances.map((i) => i.id),
      ['r1'],
    );
    await r.register(inst('rev', 'r2'));
    await r.deregister(inst('rev', 'r1'));
    await waitFor('two events', () => w.events.length === 2, 5000);
    const after = await r.getServiceListing('rev');
    const [created, deleted] = w.events;
    assert.ok(created!.revision! > before.revision && deleted!.revision! > created!.revision!, JSON.stringify(w.events));
    assert.ok(after.revision >= deleted!.revision!);
    assert.deepEqual((await r.getServiceListing('nothing-here')).instances, []);
    await w.stop();
  });

  it('says the watch is established within milliseconds, and delivers every change made once it is (20 fresh registries)', async (t) => {
    // each registry already holds its lease: the change right after watch() is one put, which can reach
    // etcd before the watch's first listing does. Listed at the current revision, that put was taken into
    // the listing and delivered to nobody (1–2 of 20 with a serializable listing, 18 of 20 with a
    // linearizable one); listed at the newest revision the registry had seen when watch() was called, it
    // comes as an event, as every change made after onReady does.
    let lostBeforeReady = 0;
    let slowest = 0;
    for (let i = 0; i < 20; i++) {
      const r = make({ prefix: prefix() });
      await r.register(inst('base', 'b'));
      const t0 = performance.now();
      let readyMs = -1;
      const events: RegistryEvent[] = [];
      const ac = new AbortController();
      const done = (async () => {
        for await (const e of r.watch({ service: 'w', signal: ac.signal, onReady: () => (readyMs = performance.now() - t0) })) events.push(e);
      })();
      await r.register(inst('w', 'x'));
      await waitFor('the watch ready', () => readyMs >= 0, 5_000);
      await r.register(inst('w', 'y')); // after onReady: must come
      await waitFor('the create of y', () => events.some((e) => e.instance.id === 'y'), 5_000);
      if (!events.some((e) => e.instance.id === 'x')) lostBeforeReady++;
      slowest = Math.max(slowest, readyMs);
      ac.abort();
      await done;
      await r.close();
    }
    t.diagnostic(`slowest onReady ${Math.round(slowest)} ms`);
    assert.equal(lostBeforeReady, 0, `changes made by the registry right after watch() returned, not delivered: ${lostBeforeReady} of 20`);
    assert.ok(slowest < 500, `the slowest watch took ${Math.round(slowest)} ms to be established on a loopback etcd`);
  });

  it("delivers a change it makes right after watch() even when the watch's listing reaches etcd after it (one endpoint slowed by a proxy)", async () => {
    // two endpoints to the same etcd, one through a proxy holding each chunk 100 ms: calls take them in
    // turn, and the order of the two alternates, so in some rounds the listing goes the slow way and the
    // put the fast one, and etcd applies the put first. Listed at the current revision, that put was in the listing and came as no event.
    const proxy = await DelayProxy.start({ host: '127.0.0.1', port: Number(new URL(etcd.endpoint).port) }, { delayMs: 0 });
    try {
      const lost: number[] = [];
      for (let i = 0; i < 12; i++) {
        const hosts = [etcd.endpoint, `http://${proxy.address}`];
        const r = make({ prefix: prefix(), hosts: i % 2 === 0 ? hosts : hosts.reverse() });
        proxy.delayMs = 0;
        await r.register(inst('base', 'b'));
        proxy.delayMs = 100;
        let ready = false;
        const events: RegistryEvent[] = [];
        const ac = new AbortController();
        const done = (async () => {
          for await (const e of r.watch({ service: 'w', signal: ac.signal, onReady: () => (ready = true) })) events.push(e);
        })();
        await r.register(inst('w', 'x'));
        await waitFor('the watch ready', () => ready, 5_000);
        await r.register(inst('w', 'y'));
        await waitFor('the create of y', () => events.some((e) => e.instance.id === 'y'), 5_000);
        if (!events.some((e) => e.type === 'create' && e.instance.id === 'x')) lost.push(i);
        ac.abort();
        await done;
        proxy.delayMs = 0;
        await r.close();
      }
      assert.deepEqual(lost, [], 'rounds whose change made right after watch() was not delivered');
    } finally {
      await proxy.close();
    }
  });

  it('skips values that are not instances with one warning each, in lookups and watches', async () => {
    const p = prefix();
    const warnings: string[] = [];
    const r = make({ prefix: p, onWarning: (m) => warnings.push(m) });
    await r.register(inst('api', 'good'));
    await raw.put(`${p}/api/bad`).value('{not json');
    await raw.put(`${p}/api/other`).value(JSON.stringify(inst('api', 'someone-else')));
    await raw.put(`${p}/api/shape`).value(JSON.stringify({ id: 'shape', name: 'api', address: 42 }));
    assert.deepEqual(
      (await r.getService('api')).map((i) => i.id),
      ['good'],
    );
    assert.deepEqual(
      (await r.getService('api')).map((i) => i.id),
      ['good'],
    );
    assert.equal(warnings.length, 3, warnings.join('\n'));
    assert.ok(warnings.some((w) => w.includes('not JSON')));
    const w = await collect(r, 'api');
    await raw.put(`${p}/api/bad2`).value('[]');
    await r.register(inst('api', 'good2'));
    await waitFor('the good event', () => w.events.length > 0, 5000);
    assert.deepEqual(summary(w.events), ['create good2']);
    assert.equal(warnings.length, 4);
    await w.stop();
  });

  it('rejects RegistryUnavailableError naming the endpoint within the dial timeout when nothing listens', async () => {
    const port = await freePort();
    const r = new EtcdRegistry({ hosts: `http://127.0.0.1:${port}`, dialTimeoutMs: 1000 });
    open.push(r);
    for (const call of [() => r.getService('api'), () => r.listServices(), () => r.register(inst('api', 'a1'))]) {
      const t0 = Date.now();
      await assert.rejects(call(), (e: unknown) => e instanceof RegistryUnavailableError && e.message.includes(`127.0.0.1:${port}`));
      assert.ok(Date.now() - t0 < 5000, 'bounded by the dial timeout (with slack for a loaded machine)');
    }
    await assert.rejects(r.register(inst('api', 'a2')), { code: 'ERR_REGISTRY_PENDING' });
    const it = r.watch({ service: 'api' })[Symbol.asyncIterator]();
    await assert.rejects(it.next(), RegistryUnavailableError);
  });

  it('rejects within the dial timeout, never hangs, when etcd is stopped (SIGSTOP) mid-flight', () =>
    ownEtcd(async ({ etcd, make }) => {
      const r = make({ dialTimeoutMs: 1500, prefix: prefix() });
      await r.register(inst('api', 'a1'));
      await sigstop(etcd);
      try {
        const t0 = Date.now();
        await assert.rejects(r.getService('api'), (e: unknown) => e instanceof RegistryUnavailableError && e.message.includes(etcd.endpoint));
        assert.ok(Date.now() - t0 < 5000);
        const t1 = Date.now();
        await assert.rejects(r.register(inst('api', 'a2')), RegistryPendingError);
        await assert.rejects(r.deregister(inst('api', 'a1')), RegistryPendingError);
        assert.ok(Date.now() - t1 < 8000);
        assert.equal(r.stats().pending, 2);
        // the caller's signal ends the wait at once (the change is still carried out)
        const t2 = Date.now();
        await assert.rejects(r.getService('api', { signal: AbortSignal.timeout(50) }), AbortedError);
        await assert.rejects(r.register(inst('api', 'a3'), { signal: AbortSignal.timeout(50) }), AbortedError);
        await assert.rejects(r.deregister(inst('api', 'a3'), { signal: AbortSignal.timeout(50) }), AbortedError);
        assert.ok(Date.now() - t2 < 1000, 'aborted, not timed out');
      } finally {
        etcd.process.signal('SIGCONT');
      }
      // the register and the deregister made while etcd was stopped are carried out once it answers
      await waitFor('a2 written and a1 deleted', async () => (await r.getService('api').catch(() => [])).map((i) => i.id).join() === 'a2', 10_000);
      await waitFor('nothing pending', () => r.stats().pending === 0, 5000);
    }));

  it('keeps its lease through keep-alives no member answered, while the TTL has not passed', () =>
    ownEtcd(async ({ etcd, raw, make }) => {
      const p = prefix();
      const r = make({ prefix: p, ttlMs: 5000, dialTimeoutMs: 1500 });
      await r.register(inst('kept', 'k1'));
      const lease = (await raw.get(`${p}/kept/k1`).exec()).kvs[0]!.lease;
      await sigstop(etcd);
      try {
        // the keep-alive due at TTL/3 gets no answer within the 1.5 s call deadline
        await waitFor('a failed keep-alive', () => r.stats().keepAliveFailures >= 1, 10_000);
      } finally {
        etcd.process.signal('SIGCONT');
      }
      const failedAt = r.stats();
      assert.equal(failedAt.leasesLost, 0, 'one unanswered keep-alive is no reason to give the lease up');
      await waitFor('a keep-alive answered again', () => r.stats().keepAlives > failedAt.keepAlives, 10_000);
      const s = r.stats();
      assert.deepEqual({ lost: s.leasesLost, granted: s.leasesGranted, rewrites: s.rewrites }, { lost: 0, granted: 1, rewrites: 0 });
      assert.equal((await raw.get(`${p}/kept/k1`).exec()).kvs[0]!.lease, lease, 'the same lease');
    }));

  it('brings registrations back by themselves after etcd is killed and restarted, and a watch across it loses and repeats nothing', () =>
    ownEtcd(async ({ etcd, make }) => {
      const p = prefix();
      const writer = make({ prefix: p, ttlMs: 3000 });
      const reader = make({ prefix: p });
      const w = await collect(reader, 'api');
      await writer.register(inst('api', 'a1'));
      await writer.register(inst('api', 'a2'));
      await waitFor('two creates', () => w.events.length === 2, 5000);
      await etcd.kill();
      await assert.rejects(writer.register(inst('api', 'a3')), RegistryPendingError); // remembered, written on return
      await waitFor('the watch to lose its stream', () => reader.stats().watchMoves >= 1, 10_000);
      await etcd.restart();
      await waitFor('all three instances', async () => (await writer.getService('api').catch(() => [])).length === 3, 15_000);
      await writer.deregister(inst('api', 'a1'));
      await writer.register(inst('api', 'a2', { version: '2' }));
      // A last event marks the end: the stream delivers in revision order, so anything lost would be missing
      // before it and anything repeated (a replay from an older revision) would arrive before it.
      await writer.register(inst('api', 'end'));
      await waitFor('the watch to reach the last event', () => w.events.some((e) => e.instance.id === 'end'), 10_000);
      assert.deepEqual(summary(w.events), ['create a1', 'create a2', 'create a3', 'delete a1', 'update a2@2', 'create end']);
      assert.equal(w.failure, undefined);
      await w.stop();
    }));

  it('lets its process exit within 2 s of close() after a watch lost its stream to a dead etcd (etcd3 leaves no reconnect timer behind)', () =>
    ownEtcd(async ({ etcd }) => {
      // etcd3 sets a reconnect timer on every broken watch stream, doubling from 128 ms to 30 s; eight broken
      // streams make it several seconds long, which a process would wait out after close() if it were left.
      const code = `
      const { EtcdRegistry } = await import(${JSON.stringify(REGISTRY_MODULE)});
      const r = new EtcdRegistry({ hosts: ${JSON.stringify(etcd.endpoint)}, prefix: '/exit-test', dialTimeoutMs: 1000 });
      const events = r.watch({ service: 'w', onReady: () => console.log('watching') });
      void (async () => { try { for await (const _ of events) {} } catch {} })();
      setTimeout(() => { console.log('stuck ' + JSON.stringify(r.stats())); process.exit(3); }, 30_000).unref();
      const poll = setInterval(async () => {
        if (r.stats().watchMoves < 8) return;
        clearInterval(poll);
        await r.close();
        console.log('closed');
      }, 20);`;
      const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'pipe'] });
      const lines: string[] = [];
      let closedAt = 0;
      let stderr = '';
      child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
      child.stdout!.on('data', (b: Buffer) => {
        for (const l of b.toString().split('\n').filter(Boolean)) {
          lines.push(l);
          if (l === 'closed') closedAt = Date.now();
        }
      });
      const exited = new Promise<{ code: number | null; at: number }>((r) => child.once('exit', (code) => r({ code, at: Date.now() })));
      try {
        await waitFor('the child to watch', () => lines.includes('watching') || child.exitCode !== null, 20_000);
        assert.ok(lines.includes('watching'), `${lines.join('\n')}\n${stderr}`);
        await etcd.kill();
        await waitFor('the child to close its registry after eight broken watch streams', () => closedAt > 0 || child.exitCode !== null, 30_000);
        assert.ok(closedAt > 0, `${lines.join('\n')}\n${stderr}`);
        let timer: NodeJS.Timeout | undefined;
        const exit = await Promise.race([exited, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), 40_000)))]);
        clearTimeout(timer);
        assert.ok(exit !== undefined, 'the child was still running 40 s after close()');
        assert.equal(exit.code, 0, stderr);
        assert.ok(exit.at - closedAt < 2000, `the child exited ${exit.at - closedAt} ms after close()`);
      } finally {
        child.kill('SIGKILL');
      }
    }));

  it('resyncs with exactly the right events when the revision to resume from was compacted', () =>
    ownEtcd(async ({ etcd, raw, make }) => {
      const p = prefix();
      const px = await proxy(Number(new URL(etcd.endpoint).port));
      try {
        const writer = make({ prefix: p, ttlMs: 5000 });
        const reader = make({ prefix: p, hosts: px.endpoint, dialTimeoutMs: 1000 });
        await writer.register(inst('api', 'a1'));
        await writer.register(inst('api', 'a2'));
        await writer.register(inst('api', 'a3'));
        const w = await collect(reader, 'api');
        px.cut();
        await writer.deregister(inst('api', 'a2'));
        await writer.register(inst('api', 'a3', { version: '2' }));
        await writer.register(inst('api', 'b1'));
        await writer.register(inst('api', 'b2'));
        await writer.deregister(inst('api', 'b2'));
        const head = await raw.get(`${p}/api/b1`).exec();
        await raw.kv.compact({ revision: head.header.revision, physical: true });
        px.restore();
        await waitFor('the resync events', () => w.events.length >= 3, 15_000);
        await writer.register(inst('api', 'c1'));
        await waitFor('the event after the resync', () => w.events.length >= 4, 10_000);
        const resync = summary(w.events.slice(0, 3)).sort();
        assert.deepEqual(resync, ['create b1', 'delete a2', 'update a3@2']);
        assert.deepEqual(summary(w.events.slice(3)), ['create c1']);
        assert.equal(w.failure, undefined);
        assert.ok(reader.stats().watchResyncs >= 1);
        await w.stop();
      } finally {
        await px.close();
      }
    }));

  it('lists at the current revision when the revision the registry last saw was compacted before watch()', () =>
    ownEtcd(async ({ raw, make }) => {
      const p = prefix();
      const r = make({ prefix: p });
      await r.register(inst('api', 'a1')); // the registry's newest revision: compacted below
      await raw.put(`${p}/api/a2`).value(JSON.stringify(inst('api', 'a2')));
      const head = await raw.put(`${p}/other`).value('x');
      await raw.kv.compact({ revision: head.header.revision, physical: true });
      let ready = false;
      const events: RegistryEvent[] = [];
      let failure: unknown;
      const ac = new AbortController();
      const done = (async () => {
        for await (const e of r.watch({ service: 'api', signal: ac.signal, onReady: () => (ready = true) })) events.push(e);
      })().catch((err: unknown) => (failure = err));
      await waitFor('the watch ready', () => ready || failure !== undefined, 5_000);
      assert.equal(failure, undefined);
      await r.register(inst('api', 'b1'));
      await waitFor('the create of b1', () => events.length > 0, 5_000);
      assert.deepEqual(
        events.map((e) => `${e.type} ${e.instance.id}`),
        ['create b1'],
        'a2 was in the listing (at the current revision), not an event',
      );
      assert.equal(r.stats().watchResyncs, 0);
      ac.abort();
      await done;
    }));

  it('gives instances with their own ttlMs a lease of that TTL (one lease per distinct TTL), and drops a lease nothing uses', async () => {
    const p = prefix();
    const r = make({ prefix: p, ttlMs: 2000 });
    await r.register(inst('ttl', 'short'));
    await r.register(inst('ttl', 'long1'), { ttlMs: 5000 });
    await r.register(inst('ttl', 'long2'), { ttlMs: 4500 }); // rounded up to 5 s, etcd's unit: the same lease
    const lease = async (id: string) => (await raw.get(`${p}/ttl/${id}`).exec()).kvs[0]!.lease;
    const [short, long1, long2] = await Promise.all([lease('short'), lease('long1'), lease('long2')]);
    assert.notEqual(short, long1);
    assert.equal(long1, long2);
    const ttl = async (id: string) => Number((await raw.leaseClient.leaseTimeToLive({ ID: id })).grantedTTL);
    assert.deepEqual([await ttl(short), await ttl(long1)], [2, 5]);
    assert.equal(r.stats().leases, 2);
    await r.deregister(inst('ttl', 'short'));
    // the next keep-alive tick (every TTL/3) finds the 2 s lease unused and revokes it
    await waitFor('the unused lease revoked', async () => r.stats().leases === 1 && (await ttl(short)) <= 0, 5000);
    assert.deepEqual((await r.getService('ttl')).map((i) => i.id).sort(), ['long1', 'long2']);
  });

  it('rejects a ttlMs etcd cannot hold with a RangeError (TypeError for a non-number) and records nothing', async () => {
    const r = make({ prefix: prefix() });
    for (const ttlMs of [999, 0, -1, Number.NaN, Infinity, 86_400_001]) {
      await assert.rejects(r.register(inst('bad', 'b1'), { ttlMs }), RangeError, String(ttlMs));
    }
    await assert.rejects(r.register(inst('bad', 'b1'), { ttlMs: '5000' as unknown as number }), TypeError);
    assert.equal(r.stats().pending, 0);
    await assert.rejects(r.getService('bad'), NotFoundError);
  });

  it('rejects AbortedError for a signal aborted before the call, and records nothing', async () => {
    const r = make({ prefix: prefix() });
    const signal = AbortSignal.abort();
    await assert.rejects(r.getService('api', { signal }), AbortedError);
    await assert.rejects(r.getServiceListing('api', { signal }), AbortedError);
    await assert.rejects(r.register(inst('api', 'x1'), { signal }), AbortedError);
    await assert.rejects(r.deregister(inst('api', 'x1'), { signal }), AbortedError);
    assert.equal(r.stats().pending, 0);
  });

  it('uses the endpoints that answer when one of its hosts is dead', async () => {
    const dead = `http://127.0.0.1:${await freePort()}`;
    // a long cooldown: however slowly the calls run beside the other tests, the dead host stays skipped
    const r = make({ prefix: prefix(), hosts: [dead, etcd.endpoint], cooldownMs: 30_000 });
    for (let i = 0; i < 20; i++) await r.register(inst('two', `t${i}`));
    for (let i = 0; i < 20; i++) assert.equal((await r.getService('two')).length, 20);
    const s = r.stats();
    assert.equal(s.unavailable, 0);
    assert.deepEqual(
      s.members.map((m) => m.live),
      [false, true],
    );
    assert.ok(s.members[0]!.failures >= 1 && s.members[0]!.failures <= 3, `the dead host is skipped while cooling down: ${JSON.stringify(s.members)}`);
  });

  it('revokes its leases on close (await using), and rejects ClosedError after', async () => {
    const p = prefix();
    let closed: EtcdRegistry;
    {
      await using r = new EtcdRegistry({ hosts: etcd.endpoint, prefix: p, ttlMs: 30_000 });
      closed = r;
      await r.register(inst('bye', 'b1'));
      assert.equal((await raw.getAll().prefix(`${p}/`).keys()).length, 1);
    }
    assert.equal((await raw.getAll().prefix(`${p}/`).keys()).length, 0, 'the lease went, and its key with it');
    await assert.rejects(closed.getService('bye'), ClosedError);
    await assert.rejects(closed.register(inst('bye', 'b2')), ClosedError);
    await closed.close();
  });
});
