/**
 * EtcdRegistry on a real 3-member etcd cluster (three `etcd` processes on loopback, killed and restarted
 * by PID): a dead follower costs no failed call and no lease; a dead leader costs no failed lookup (those
 * in the election wait, within their deadline), the registry ends equal to the truth and a watch delivers
 * exactly etcd's history; a watch whose member dies moves on without listing again; a restarted member
 * gets its share of the calls again.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Etcd3, type IWatchResponse } from 'etcd3';
import { RegistryPendingError } from '../src/core/errors.js';
import { EtcdRegistry } from '../src/registry/etcd-registry.js';
import { RegistryCache } from '../src/registry/registry-cache.js';
import type { RegistryEvent, ServiceInstance } from '../src/registry/types.js';
import { etcdBinary } from './support/etcd.js';
import { startEtcdCluster, type EtcdCluster, type EtcdMember } from './support/etcd-cluster.js';
import { skipReason, waitFor } from './support/servers.js';
import { collect } from './support/collect-watch.js';

const skip = skipReason(etcdBinary, 'etcd');
let cluster: EtcdCluster;
let n = 0;
const prefix = () => `/bulwark-cluster-test/${process.pid}-${++n}`;
const inst = (name: string, id: string, version?: string): ServiceInstance => ({ id, name, address: '127.0.0.1:9000', ...(version ? { version } : {}) });
const open: EtcdRegistry[] = [];
const make = (p: string, o: Partial<ConstructorParameters<typeof EtcdRegistry>[0]> = {}) => {
  const r = new EtcdRegistry({ hosts: cluster.endpoints, prefix: p, ttlMs: 3000, ...o });
  open.push(r);
  return r;
};

/** run calls `fn(i)` for i < count, `concurrency` at a time, and answers the failures. */
async function run(count: number, concurrency: number, fn: (i: number) => Promise<unknown>): Promise<unknown[]> {
  const failures: unknown[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        await fn(i).catch((err: unknown) => failures.push(err));
      }
    }),
  );
  return failures;
}

const show = (es: RegistryEvent[]) => es.map((e) => `${e.type} ${e.instance.id}${e.instance.version ? `@${e.instance.version}` : ''} r${e.revision}`);

/** restartDead brings every killed member back, so that each test starts with the whole cluster. */
async function restartDead(): Promise<void> {
  for (const m of cluster.members) if (!m.alive) await m.restart();
  await cluster.leader();
}

const memberStats = (r: EtcdRegistry, m: EtcdMember) => r.stats().members.find((s) => s.endpoint === m.endpoint)!;

describe('EtcdRegistry on a 3-member etcd cluster', { skip }, () => {
  before(async () => {
    cluster = await startEtcdCluster(3);
  });
  after(async () => {
    for (const r of open) await r.close().catch(() => {});
    await cluster?.stop();
  });

  it('loses no getService, register or deregister (200 each) and no lease when a follower is SIGKILLed', async () => {
    const p = prefix();
    const r = make(p);
    await r.register(inst('base', 'b1'));
    const before = r.stats();
    const [follower] = await cluster.followers();
    await follower!.kill();
    try {
      const keepAlivesAtKill = r.stats().keepAlives;
      const lookups = await run(200, 8, () => r.getService('base'));
      const registers = await run(200, 8, (i) => r.register(inst('many', `m${i}`)));
      const deregisters = await run(200, 8, (i) => r.deregister(inst('many', `m${i}`)));
      // keep-alives run every TTL/3 = 1 s, in turn over the members: let several go by with one member dead
      await waitFor('three keep-alives with the follower dead', () => r.stats().keepAlives >= keepAlivesAtKill + 3, 10_000);
      assert.deepEqual(
        { lookups: lookups.length, registers: registers.length, deregisters: deregisters.length },
        { lookups: 0, registers: 0, deregisters: 0 },
        String(lookups[0] ?? registers[0] ?? deregisters[0]),
      );
      const s = r.stats();
      assert.equal(s.leasesGranted, before.leasesGranted, 'no lease granted again');
      assert.equal(s.leasesLost, 0);
      assert.equal(s.unavailable, 0);
      assert.ok(memberStats(r, follower!).failures >= 1, 'the dead follower was tried, and skipped');
      assert.deepEqual(
        (await r.getService('base')).map((i) => i.id),
        ['b1'],
      );
      await assert.rejects(r.getService('many'), { code: 'ERR_NOT_FOUND' });
    } finally {
      await restartDead();
    }
  });

  it("answers every lookup across a leader SIGKILL (those in the election wait, within their deadline), ends equal to the truth, and the watch delivers exactly etcd's history", async () => {
    const p = prefix();
    // keep-alives every 2 s: one due during the election (followers answer them once the new leader serves)
    const writer = make(p, { ttlMs: 6000 });
    const reader = make(p);
    const cachedReader = make(p);
    const watcher = make(p, { onWarning: () => {} }); // the end-of-history sentinel is not an instance
    const cache = new RegistryCache(cachedReader, { ttlMs: 200, minRetryIntervalMs: 100 });
    try {
      for (let i = 0; i < 5; i++) await writer.register(inst('lookup', `l${i}`));
      const start = await writer.getServiceListing('ops');
      const w = await collect(watcher, 'ops');
      const truth = new Map<string, string>();
      let pending = 0;
      const opsDone = (async () => {
        for (let i = 0; i < 100; i++) {
          const id = `o${i % 10}`;
          const op = i % 3 === 2 ? 'deregister' : 'register';
          if (op === 'register') truth.set(id, String(i));
          else truth.delete(id);
          const call = op === 'register' ? writer.register(inst('ops', id, String(i))) : writer.deregister(inst('ops', id));
          await call.catch((err: unknown) => {
            if (!(err instanceof RegistryPendingError)) throw err;
            pending++; // not confirmed in time: the registry carries it out on its own
          });
        }
      })();
      let killedAt = 0;
      let electedAt = 0;
      let afterElection = 0;
      let elected: Promise<void> | undefined;
      const latencies: number[] = [];
      const failures: unknown[] = [];
      // Lookups go on, 16 at a time, from before the kill until 1 000 more were sent once the cluster agrees
      // on a new leader (at most 20 000 in all): every one sent during the election is among them.
      const lookups = run(20_000, 16, async (i) => {
        if (i === 1_000) {
          const leader = await cluster.leader();
          killedAt = performance.now();
          await leader.kill();
          elected = cluster.leader().then(() => void (electedAt = performance.now()));
        }
        if (electedAt > 0 && ++afterElection > 1_000) return;
        const t0 = performance.now();
        try {
          await reader.getService('lookup');
        } catch (err) {
          failures.push(err);
        }
        latencies.push(performance.now() - t0);
      });
      const cached = run(2_000, 4, () => cache.getService('lookup'));
      await lookups;
      await elected;
      const cachedFailures = await cached;
      await opsDone;
      assert.ok(killedAt > 0 && electedAt > killedAt);
      assert.ok(afterElection >= 1_000, `only ${afterElection} lookups after the election`);
      assert.equal(failures.length, 0, `failed lookups: ${failures.length}, first: ${String(failures[0])}; writer ${JSON.stringify(writer.stats())}`);
      assert.equal(cachedFailures.length, 0, `failed cached lookups: ${String(cachedFailures[0])}`);
      assert.ok(Math.max(...latencies) < 3000 + 500, `the slowest lookup waited ${Math.round(Math.max(...latencies))} ms, within its 3 000 ms deadline`);
      // the registry ends equal to the truth, whatever was pending
      const want = [...truth]
        .map(([id, v]) => `${id}@${v}`)
        .sort()
        .join();
      const got = async () =>
        (await writer.getServiceListing('ops')).instances
          .map((i) => `${i.id}@${i.version}`)
          .sort()
          .join();
      await waitFor('the registry to equal the truth', async () => (await got()) === want, 15_000);
      // the watch delivered exactly etcd's history of the service since it started: nothing lost, nothing repeated
      // The oracle reads over the live members only: etcd3's own watch, opened on the dead one, waits out
      // its reconnect backoff (once over 10 s in a loaded full run), which says nothing of bulwark's.
      const oracle = new Etcd3({ hosts: cluster.members.filter((m) => m.alive).map((m) => m.endpoint) });
      let history: RegistryEvent[];
      try {
        history = await etcdHistory(oracle, `${p}/ops/`, start.revision + 1);
      } finally {
        oracle.close();
      }
      await waitFor('the watch to reach the last revision', () => (w.events.at(-1)?.revision ?? 0) >= (history.at(-1)?.revision ?? 0), 10_000);
      assert.deepEqual(show(w.events), show(history));
      assert.equal(w.failure, undefined);
      assert.equal(watcher.stats().watchResyncs, 0);
      await w.stop();
      const ws = writer.stats();
      assert.equal(ws.leasesLost, 0, `the writer kept its lease through the election: ${JSON.stringify(ws)}`);
      process.stdout.write(
        `# leader kill: ${latencies.length} lookups, a new leader ${Math.round(electedAt - killedAt)} ms after the kill; ${pending} of 100 register/deregister pending at first, slowest lookup ${Math.round(Math.max(...latencies))} ms, writer leases lost ${ws.leasesLost}, keep-alive failures ${ws.keepAliveFailures}\n`,
      );
    } finally {
      await cache.close();
      await restartDead();
    }
  });

  it('moves a watch to another member when the member serving it dies, without listing again', async () => {
    const p = prefix();
    const writer = make(p);
    const watcher = make(p);
    const w = await collect(watcher, 'wm');
    await writer.register(inst('wm', 'w1'));
    await waitFor('the first event', () => w.events.length === 1, 5000);
    const serving = cluster.members.find((m) => memberStats(watcher, m).watches === 1)!;
    assert.ok(serving, JSON.stringify(watcher.stats().members));
    try {
      await serving.kill();
      await writer.register(inst('wm', 'w2'));
      await writer.register(inst('wm', 'w1', '2'));
      await writer.deregister(inst('wm', 'w2'));
      await waitFor('the events after the kill', () => w.events.length >= 4, 10_000);
      assert.deepEqual(
        show(w.events).map((e) => e.split(' r')[0]),
        ['create w1', 'create w2', 'update w1@2', 'delete w2'],
      );
      const s = watcher.stats();
      assert.equal(s.watchResyncs, 0, 'no resync');
      assert.ok(s.watchMoves >= 1);
      assert.equal(memberStats(watcher, serving).watches, 0, 'served by another member now');
      assert.equal(
        s.members.reduce((a, m) => a + m.watches, 0),
        1,
      );
      assert.equal(w.failure, undefined);
      await w.stop();
    } finally {
      await restartDead();
    }
  });

  it('spreads calls back to a member once it is restarted', async () => {
    const p = prefix();
    const r = make(p);
    await r.register(inst('spread', 's1'));
    const [follower] = await cluster.followers();
    await follower!.kill();
    assert.equal((await run(60, 4, () => r.getService('spread'))).length, 0);
    await follower!.restart();
    const restartedAt = Date.now();
    const answered = () => {
      const m = memberStats(r, follower!);
      return m.attempts - m.failures;
    };
    const before = answered();
    // calls go on; the member is tried again when its cooldown ends and answers once gRPC has reconnected
    await waitFor(
      'a call answered by the restarted member',
      async () => {
        await r.getService('spread');
        return answered() > before;
      },
      10_000,
    );
    const tookMs = Date.now() - restartedAt;
    const attemptsBefore = r.stats().members.map((m) => m.attempts);
    assert.equal((await run(300, 4, () => r.getService('spread'))).length, 0);
    const share = r.stats().members.map((m, i) => m.attempts - attemptsBefore[i]!);
    const mine = share[cluster.members.indexOf(follower!)]!;
    assert.ok(mine >= 60, `the restarted member got ${mine} of 300 calls (${share.join('/')})`);
    process.stdout.write(`# restarted member answered again ${tookMs} ms after its restart; share of the next 300 calls: ${share.join('/')}\n`);
  });
});

/**
 * etcdHistory answers the events etcd recorded under `key` from revision `from` on, as a registry watch
 * reports them (a put of the value already there is no event). A sentinel key written last marks the end.
 */
async function etcdHistory(raw: Etcd3, key: string, from: number): Promise<RegistryEvent[]> {
  const out: RegistryEvent[] = [];
  const current = new Map<string, string>();
  const before = await raw
    .getAll()
    .prefix(key)
    .revision(String(from - 1))
    .exec();
  for (const kv of before.kvs) current.set(kv.key.toString(), kv.value.toString());
  const sentinel = `${key}~end`;
  const watcher = await raw.watch().prefix(key).startRevision(String(from)).create();
  let ended = false;
  watcher.on('data', (res: IWatchResponse) => {
    for (const ev of res.events) {
      const k = ev.kv.key.toString();
      const rev = Number(ev.kv.mod_revision);
      if (k === sentinel) ended = true;
      if (ended) continue;
      const old = current.get(k);
      if (ev.type === 'Delete') {
        if (old !== undefined) out.push({ type: 'delete', instance: JSON.parse(old) as ServiceInstance, revision: rev });
        current.delete(k);
      } else {
        const value = ev.kv.value.toString();
        if (old !== value) out.push({ type: old === undefined ? 'create' : 'update', instance: JSON.parse(value) as ServiceInstance, revision: rev });
        current.set(k, value);
      }
    }
  });
  await raw.put(sentinel).value('end');
  await waitFor('etcd history up to the sentinel', () => ended, 10_000);
  await watcher.cancel();
  await raw.delete().key(sentinel);
  return out;
}
