/**
 * EtcdRegistry and RegistryCache when an etcd member is cut off from its peers but still reachable by its
 * clients (packets dropped, not refused: test/support/netfault.ts). Each member runs under its own uid;
 * the cut member's peer port is isolated and every connection it opened to its peers' ports is dropped
 * both ways (owner match where it sends, connection mark where its peers answer). Its client port keeps
 * answering — serializable reads and watch streams, with no leader behind them.
 *
 * Six RegistryCaches whose watches sit on that member (as leader, then as follower) must converge within
 * 5 s of the partition (etcd's election timeout is 1 s); 100 register / deregister operations are made
 * during the partition through a registry that knows every member; the leases of a registry that knows
 * every member stay alive; and the truth check: every cache's final view, and every registry's uncached
 * lookup, equals what etcd holds — no instance lost, none resurrected — during the partition and after
 * the heal. Each scenario prints one line of numbers (`partition-row`) for docs/reliability.md.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EtcdRegistry } from '../src/registry/etcd-registry.js';
import { RegistryCache } from '../src/registry/registry-cache.js';
import type { ServiceInstance } from '../src/registry/types.js';
import { etcdBinary } from './support/etcd.js';
import { startEtcdCluster, type EtcdCluster, type EtcdMember } from './support/etcd-cluster.js';
import { netfaultSkip, PacketFilter } from './support/netfault.js';
import { skipReason, waitFor } from './support/servers.js';

const skip = skipReason(etcdBinary, 'etcd') ?? netfaultSkip;
/** Members' uids: none of them a login (numbers are enough for setuid and for iptables' owner match). */
const UIDS = [41_001, 41_002, 41_003];
const CACHES = 6;
const OPERATIONS = 100;
const CONVERGE_MS = 5_000;

let cluster: EtcdCluster;
let filter: PacketFilter;
/** What a scenario opened, closed at its end (caches before their registries). */
const open: Array<{ close(): Promise<void> }> = [];

const inst = (name: string, id: string): ServiceInstance => ({ id, name, address: '127.0.0.1:9000' });
const ids = (l: readonly ServiceInstance[]) => l.map((i) => i.id).sort();

/** cut isolates `x` from its peers; its client port stays reachable. */
async function cut(x: EtcdMember): Promise<void> {
  await filter.isolate(x.peerPort); // every connection to its peer port, both ways
  for (const peer of cluster.members) {
    if (peer !== x) await filter.dropConnections({ uid: x.uid!, toPort: peer.peerPort }); // the ones it opened
  }
}

/** cacheOn answers a RegistryCache (over a registry that knows every member) whose watch of `service` sits on `x`. */
async function cacheOn(x: EtcdMember, prefix: string, service: string): Promise<{ registry: EtcdRegistry; cache: RegistryCache }> {
  const others = cluster.members.filter((m) => m !== x);
  // the member a watch lands on follows from the pool's turn; rotate the hosts until it is `x` (at most 3 tries)
  for (let rot = 0; rot < 3; rot++) {
    const hosts = [...others.map((m) => m.endpoint), x.endpoint];
    for (let i = 0; i < rot; i++) hosts.push(hosts.shift()!);
    const registry = new EtcdRegistry({ hosts, prefix, ttlMs: 5_000 });
    const cache = new RegistryCache(registry, { onWarning: () => {} });
    await cache.getService(service);
    await waitFor('the cache to watch', () => registry.stats().members.some((m) => m.watches === 1), 5_000);
    if (registry.stats().members.find((m) => m.endpoint === x.endpoint)!.watches === 1) {
      open.push(registry, cache);
      return { registry, cache };
    }
    await cache.close();
    await registry.close();
  }
  throw new Error(`no rotation of the hosts put the watch on ${x.name}`);
}

describe('EtcdRegistry: a member cut off from its peers, still reachable by clients', { skip, concurrency: 1 }, () => {
  before(async () => {
    filter = await PacketFilter.open();
  });
  after(async () => {
    await filter?.close();
  });

  for (const role of ['leader', 'follower'] as const) {
    it(`as ${role}: the ${CACHES} caches watching it converge within ${CONVERGE_MS} ms, ${OPERATIONS} changes made meanwhile, every view equal to etcd's`, async () => {
      // a cluster of its own: a member healed from a partition comes back with the terms it campaigned
      // for meanwhile (etcd 3.4 has no pre-vote by default) and may depose the leader a little later
      cluster = await startEtcdCluster(3, { uids: UIDS });
      try {
        await scenario(role);
      } finally {
        await filter.heal();
        for (const c of open.splice(0).reverse()) await c.close().catch(() => {});
        await cluster.stop();
      }
    });
  }
});

/** scenario cuts the leader or a follower off from its peers under 6 caches watching it; see the module comment. */
async function scenario(role: 'leader' | 'follower'): Promise<void> {
  const leader = await cluster.leader();
  const x = role === 'leader' ? leader : cluster.members.find((m) => m !== leader)!;
  const prefix = `/bulwark-partition/${process.pid}-${role}`;
  const service = 'svc';
  const writer = new EtcdRegistry({ hosts: cluster.endpoints, prefix, ttlMs: 5_000 });
  // a 6 s lease, kept alive every 2 s: a keep-alive that first tries the cut member (1 s to give up on
  // it) still has 3 s to reach another, on a machine as loaded as CI's
  const announcer = new EtcdRegistry({ hosts: cluster.endpoints, prefix, ttlMs: 6_000 });
  open.push(writer, announcer);
  for (let i = 0; i < 3; i++) await announcer.register(inst(service, `base-${i}`));
  const caches: Array<{ registry: EtcdRegistry; cache: RegistryCache }> = [];
  for (let i = 0; i < CACHES; i++) caches.push(await cacheOn(x, prefix, service));
  for (const c of caches) assert.deepEqual(ids(await c.cache.getService(service)), ['base-0', 'base-1', 'base-2']);

  const calls = { made: 0, failed: 0, longestMs: 0 };
  const failures: unknown[] = [];
  const timed = async (fn: () => Promise<unknown>) => {
    const t = performance.now();
    calls.made++;
    try {
      await fn();
    } catch (err) {
      calls.failed++;
      failures.push(err);
    } finally {
      calls.longestMs = Math.max(calls.longestMs, performance.now() - t);
    }
  };
  const truth = async () => ids((await writer.getServiceListing(service)).instances);
  const seen = (c: { cache: RegistryCache }) => ids(c.cache.peek(service) ?? []);

  await cut(x);
  const t0 = performance.now();
  let detectMs = -1;
  let recoverMs = -1;
  try {
    const detected = waitFor(
      'every cache to leave the cut member',
      () => caches.every((c) => c.registry.stats().members.find((m) => m.endpoint === x.endpoint)!.watches === 0),
      15_000,
    ).then(() => (detectMs = performance.now() - t0));
    // the first change of the partition: every cache must show it within CONVERGE_MS
    await timed(() => writer.register(inst(service, 'marker')));
    await waitFor('every cache to show the first change of the partition', () => caches.every((c) => seen(c).includes('marker')), 15_000);
    recoverMs = performance.now() - t0;
    await detected;

    // 100 operations during the partition, 4 at a time: registers of p0..p59, deregisters of p0..p39
    const ops: Array<() => Promise<unknown>> = [];
    for (let i = 0; i < 60; i++) {
      ops.push(() => writer.register(inst(service, `p${i}`)));
      if (i >= 20) ops.push(() => writer.deregister(inst(service, `p${i - 20}`)));
    }
    assert.equal(ops.length, OPERATIONS);
    let next = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (next < ops.length) await timed(ops[next++]!);
      }),
    );
    // uncached lookups go to members with a leader too (the registry of each cache: 5 each)
    for (const c of caches) for (let i = 0; i < 5; i++) await timed(() => c.registry.getService(service));

    const want = ['base-0', 'base-1', 'base-2', 'marker', ...Array.from({ length: 20 }, (_, i) => `p${40 + i}`)].sort();
    assert.deepEqual(await truth(), want, 'etcd holds every change, once');
    await waitFor('every cache to equal etcd during the partition', () => caches.every((c) => JSON.stringify(seen(c)) === JSON.stringify(want)), 10_000);
    for (const c of caches) assert.deepEqual(ids(await c.registry.getService(service)), want);
    assert.equal(announcer.stats().leasesLost, 0, `the leases stayed alive through a member with a leader: ${JSON.stringify(announcer.stats())}`);
  } finally {
    await filter.heal();
  }
  const healedAt = performance.now();
  // after the heal: every member agrees on a leader again, and every view still equals etcd's (nothing resurrected)
  await cluster.leader();
  const after = await truth();
  await waitFor('every cache to equal etcd after the heal', () => caches.every((c) => JSON.stringify(seen(c)) === JSON.stringify(after)), 10_000);
  const healMs = performance.now() - healedAt;
  const row = {
    scenario: `etcd member partitioned from its peers (${role})`,
    caches: CACHES,
    calls: calls.made,
    failed: calls.failed,
    longestMs: Math.round(calls.longestMs),
    detectMs: Math.round(detectMs),
    recoverMs: Math.round(recoverMs),
    healMs: Math.round(healMs),
    truth: 'equal',
    errors: failures.map((e) => String(e).slice(0, 160)),
    leaderChecks: caches.map((c) => c.registry.stats().leaderCheckFailures),
  };
  console.log(`partition-row ${JSON.stringify(row)}`);
  // A write made while the cluster elects a new leader (or on a machine this loaded) may outlast its
  // deadline: it rejects "pending" (still being written; the truth check above found it written), never anything else.
  for (const err of failures) assert.equal((err as { code?: string }).code, 'ERR_REGISTRY_PENDING', String(err));

  assert.ok(recoverMs <= CONVERGE_MS, `the caches converged ${Math.round(recoverMs)} ms after the partition`);
}
