/**
 * Three `bulwark serve` processes on a real 3-member etcd cluster: killing the etcd leader during
 * traffic costs no client request, and the nodes' membership stays what it was (their leases are kept
 * alive through the election).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startEtcdCluster, type EtcdCluster } from './support/etcd-cluster.js';
import { etcdBinary } from './support/etcd.js';
import { skipReason } from './support/servers.js';
import { startNodes, startOrigin, status, stopAll, traffic, waitMembers, type ServeProc, type TestOrigin } from './serve-harness.js';

describe('bulwark serve on a 3-member etcd cluster', { skip: skipReason(etcdBinary, 'etcd') }, () => {
  let cluster: EtcdCluster;
  let origin: TestOrigin;
  let nodes: ServeProc[] = [];
  before(async () => {
    cluster = await startEtcdCluster(3);
    origin = await startOrigin();
    const registry = `etcd://${cluster.endpoints.map((e) => e.replace('http://', '')).join(',')}`;
    nodes = await startNodes(3, () => ['--registry', registry, '--lease-ttl', '6s', '--origin', `${origin.url}/items/{key}`, '--quiet']);
    await waitMembers(
      nodes,
      nodes.map((n) => n.url),
    );
  });
  after(async () => {
    await stopAll(nodes);
    await origin?.close();
    await cluster?.stop();
  });

  it('kill the etcd leader during traffic: no client request fails and membership is unchanged', async (t) => {
    const keys = Array.from({ length: 500 }, (_, i) => `leader-${i}`);
    const load = traffic(() => nodes, keys, 16, false);
    // Watch the rings while the cluster elects a new leader: they must never lose a member.
    let shrunk = '';
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        for (const n of nodes) {
          const members = (await status(n.url)).membership.members;
          if (members.length !== 3) shrunk ||= `${n.url} saw ${members.join(',')}`;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    await load.more(16); // the cluster under load (every loop under way) when its leader dies
    const leader = await cluster.leader();
    await leader.kill();
    const next = await cluster.leader(15_000);
    assert.notEqual(next.name, leader.name);
    // Past the 6 s lease TTL: a lease not kept alive through the election would have expired by now.
    await new Promise((r) => setTimeout(r, 7_000));
    watching = false;
    await watcher;
    await load.stop();
    t.diagnostic(`${load.ok} requests, ${load.failed.length} failed; leader ${leader.name} killed, ${next.name} elected`);
    assert.deepEqual(load.failed.slice(0, 5), [], `${load.failed.length} failed of ${load.ok + load.failed.length}`);
    assert.ok(load.ok > 100, `only ${load.ok} requests`);
    assert.equal(shrunk, '', shrunk);
    await waitMembers(
      nodes,
      nodes.map((n) => n.url),
      1_000,
    );
    await leader.restart();
  });
});
