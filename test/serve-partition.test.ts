/**
 * A `bulwark serve` node cut off from its peers while its clients and etcd still reach it (packets
 * dropped by iptables, test/support/netfault.ts): each node listens on its own loopback address and runs
 * as its own uid, so that only the traffic between the cut-off node and the others is dropped. Its
 * clients keep getting answers from the origin, no request waits past the peer deadline, and after the
 * heal every node has the same ring again and each key is loaded once cluster-wide.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { HttpPool } from '../src/cache/index.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { netfaultSkip, nobodyUid, PacketFilter } from './support/netfault.js';
import { skipReason, waitFor } from './support/servers.js';
import { get, startOrigin, startServe, stopAll, waitMembers, type ServeProc, type TestOrigin } from './serve-harness.js';

/** The peer deadline the nodes run with (--peer-timeout): short, so that a waited-out peer shows in seconds. */
const PEER_TIMEOUT_MS = 1_000;

/** Requests is a bounded client loop against one node: every request a fresh key (a cached key would hide the peer path). */
interface Requests {
  made: number;
  failed: string[];
  /** [start (ms since the test's t0), duration, source, key] of each request. */
  log: [number, number, string, string][];
  stop(): Promise<void>;
}

function requests(node: ServeProc, loops: number, t0: number, prefix: string, max = 4_000): Requests {
  let running = true;
  let n = 0;
  const r: Requests = {
    made: 0,
    failed: [],
    log: [],
    stop: async () => {
      running = false;
      await all;
    },
  };
  const one = async () => {
    while (running && r.made < max) {
      const key = `${prefix}-${n++}`;
      const start = performance.now();
      try {
        const a = await get(node.url, key);
        if (a.status !== 200 || !a.body.endsWith(`:${key}`)) r.failed.push(`${node.host} ${key}: ${a.status} ${a.body.slice(0, 80)}`);
        r.log.push([start - t0, performance.now() - start, a.source ?? '', key]);
      } catch (err) {
        r.failed.push(`${node.host} ${key}: ${(err as Error).message}`);
      }
      r.made++;
      await new Promise((res) => setTimeout(res, 20));
    }
  };
  const all = Promise.all(Array.from({ length: loops }, one));
  return r;
}

describe('bulwark serve: a node cut off from its peers', { skip: skipReason(etcdBinary, 'etcd') ?? netfaultSkip }, () => {
  let etcd: EtcdServer;
  let origin: TestOrigin;
  let nodes: ServeProc[] = [];
  before(async () => {
    etcd = await startEtcd();
    origin = await startOrigin();
    const args = [
      '--registry',
      `etcd://${etcd.endpoint.replace('http://', '')}`,
      '--etcd-prefix',
      `/serve-partition-${process.pid}`,
      '--lease-ttl',
      '2s',
      '--origin',
      `${origin.url}/items/{key}`,
      '--peer-timeout',
      `${PEER_TIMEOUT_MS}ms`,
      '--quiet',
    ];
    // Each node its own address and uid: the filter drops what the cut-off node and its peers send each
    // other, and nothing the clients (this process, root) or etcd send.
    const started = await Promise.allSettled([1, 2, 3].map((i) => startServe(args, { host: `127.0.0.${30 + i}`, uid: nobodyUid + 1 - i })));
    nodes = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    await waitMembers(
      nodes,
      nodes.map((n) => n.url),
    );
  });
  after(async () => {
    await stopAll(nodes);
    await origin?.close();
    await etcd?.stop();
  });

  it('the cut-off node answers from the origin within the peer deadline, and after the heal each key is loaded once', async (t) => {
    const [cut, b, c] = nodes as [ServeProc, ServeProc, ServeProc];
    const filter = await PacketFilter.open();
    const loads: Requests[] = [];
    try {
      const t0 = performance.now();
      loads.push(requests(cut, 4, t0, 'cut'), requests(b, 2, t0, 'b'));
      await waitFor('requests before the partition', () => loads.every((l) => l.made > 10));
      const cutAt = performance.now() - t0;
      for (const peer of [b, c]) {
        await filter.drop({ uid: cut.uid, to: peer.host });
        await filter.drop({ uid: peer.uid, to: cut.host });
      }
      // The partition's length is what is under test: a timed wait, not a condition.
      await new Promise((r) => setTimeout(r, 5_000 - (performance.now() - t0 - cutAt)));
      const healAt = performance.now() - t0;
      await filter.heal();
      for (const l of loads) await l.stop();

      // After the heal: the same ring everywhere, and fresh keys asked on every node loaded once each.
      await waitMembers(
        nodes,
        nodes.map((n) => n.url),
        5_000,
      );
      let round = 0;
      await waitFor(
        'each key loaded once cluster-wide',
        async () => {
          const keys = Array.from({ length: 30 }, (_, i) => `healed-${round}-${i}`);
          round++;
          for (const node of [cut, b, c]) await Promise.all(keys.map((k) => get(node.url, k)));
          return keys.every((k) => origin.loads.get(k) === 1);
        },
        15_000,
      );
      const recoverMs = performance.now() - t0 - healAt;

      // Which keys the cut-off node asks a peer for: its ring, computed as the node computes it.
      const ring = new HttpPool({ self: cut.url });
      ring.setPeers(...nodes.map((n) => n.url));
      const peerOwned = (key: string) => ring.owner(key) !== cut.url;
      await ring.close();
      const during = loads[0]!.log.filter(([start, , , key]) => start >= cutAt && start < healAt && peerOwned(key));
      const longest = Math.max(...loads.flatMap((l) => l.log.map(([, ms]) => ms)));
      const waited = during.filter(([, ms]) => ms > 200).length;
      // Detected: the first request on the cut-off node that waited on a peer gave up (it then loaded from the origin).
      const firstGaveUp = during.find(([, ms]) => ms > 200);
      const detectMs = firstGaveUp === undefined ? 0 : firstGaveUp[0] + firstGaveUp[1] - cutAt;
      const made = loads.reduce((n, l) => n + l.made, 0);
      const failed = loads.flatMap((l) => l.failed);
      t.diagnostic(
        `cache node partition 5 s: ${made} requests, ${failed.length} failed, longest ${longest.toFixed(0)} ms; the cut-off node's ${during.length} requests for its peers' keys: ${waited} waited over 200 ms; the first wait on a peer ended ${detectMs.toFixed(0)} ms after the cut; each key loaded once again ${recoverMs.toFixed(0)} ms after the heal (${round} rounds)`,
      );
      assert.deepEqual(failed.slice(0, 5), [], `${failed.length} of ${made} failed`);
      // The peer deadline, plus what a node takes to load from the origin and answer on a busy machine.
      assert.ok(longest <= PEER_TIMEOUT_MS + 500, `a request took ${longest.toFixed(0)} ms (peer deadline ${PEER_TIMEOUT_MS} ms)`);
      // Only the requests in flight when the partition began, and then one request per cut-off peer per
      // PEER_DOWN_MS (1 s) that tries it again, wait on a peer: time bounds them (4 loops, 2 peers, 5 s),
      // and the other requests for the peers' keys load from the origin at once.
      assert.ok(waited <= 4 * 2 + 2 * 5, `${waited} requests on the cut-off node waited on peers it could not reach`);
      assert.ok(
        during.length - waited >= waited,
        `of ${during.length} requests for the peers' keys, ${waited} waited on them: the node kept waiting on peers it could not reach`,
      );
    } finally {
      for (const l of loads) await l.stop();
      await filter.close();
    }
  });
});
