/**
 * A Redis Cluster master cut off from the rest of the cluster (packets dropped by iptables,
 * test/support/netfault.ts) while clients still reach it, until its replica is promoted: no caller sees an
 * error, and the token bucket of a key on that master admits more than its rate only by what the
 * partition hides: the tokens the cut-off master handed out before it stopped taking writes, at most
 * `cluster-node-timeout` of them at `rate` (the promoted replica never saw them). The promoted replica's
 * bucket refills while decisions are made in process, but the tokens the rescue admitted meanwhile are
 * charged to it when decisions return to Redis (see rescue.ts), so that refill is not admitted twice.
 * Each node has its own loopback address and sends from it, so only the traffic between the cut-off
 * master and the other nodes is dropped.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Cluster } from 'ioredis';
import { RedisTokenLimiter } from '../src/limit/index.js';
import { keySlot } from '../src/limit/redis-cluster.js';
import { netfaultSkip, PacketFilter } from './support/netfault.js';
import { redisBinary } from './support/redis.js';
import { redisCliBinary, startRedisCluster, type RedisCluster } from './support/redis-cluster.js';
import { skipReason, waitFor } from './support/servers.js';

const skip = skipReason(redisBinary, 'redis-server') ?? skipReason(redisCliBinary, 'redis-cli') ?? netfaultSkip;
process.on('warning', () => {}); // the rescue's warnings are expected here

/** The cluster's node timeout: how long a master cut off from the majority keeps taking writes, and how soon its replica takes over. */
const NODE_TIMEOUT_MS = 1_000;
/** The key's rate (tokens per second) and bucket. */
const RATE = 100;

describe('Redis limiter on a Cluster whose master is partitioned away', { skip }, () => {
  let cluster: RedisCluster;
  before(async () => {
    cluster = await startRedisCluster({ masters: 3, replicas: 1, nodeTimeoutMs: NODE_TIMEOUT_MS, address: (i) => `127.0.0.${51 + i}` });
  });
  after(async () => {
    await cluster?.stop();
  });

  it('no caller sees an error, and over-admission stays within rate × node timeout', async (t) => {
    const client = new Cluster(cluster.seeds, {
      redisOptions: { maxRetriesPerRequest: 1, connectTimeout: 1_000 },
      clusterRetryStrategy: () => 100,
      retryDelayOnFailover: 100,
      slotsRefreshTimeout: 1_000,
    });
    client.on('error', () => {});
    const lim = new RedisTokenLimiter({ redis: client, prefix: 'cp:', rate: RATE, timeoutMs: 250 });
    const filter = await PacketFilter.open();
    const switches: string[] = [];
    let running = true;
    const admitted: number[] = [];
    let made = 0;
    let failed = 0;
    let longest = 0;
    const callers: Promise<void>[] = [];
    try {
      await waitFor('the slot map', () => client.status === 'ready' && client.slots.length > 0, 20_000);
      const slot = keySlot('cp:{hot}');
      const victimKey = client.slots[slot]![0]!;
      const victim = cluster.nodes.find((n) => `${n.host}:${n.port}` === victimKey)!;
      assert.ok(victim !== undefined, `the slot's master ${victimKey} is one of the cluster's nodes`);
      await waitFor('the limiter on Redis', async () => lim.mode === 'redis' && (await lim.takeDecision('warm')).limit > 0, 10_000);
      let firstRescueAt = NaN;
      lim.onModeChange((e) => {
        switches.push(e.mode);
        if (e.mode === 'rescue' && Number.isNaN(firstRescueAt)) firstRescueAt = performance.now();
      });
      // Empty the bucket, then ask far above the rate: what is admitted from now on is what the bucket lets through.
      while (await lim.take('hot'));
      for (let c = 0; c < 2; c++) {
        callers.push(
          (async () => {
            for (let i = 0; running && i < 20_000; i++) {
              const t0 = performance.now();
              try {
                if (await lim.take('hot')) admitted.push(performance.now());
              } catch {
                failed++;
              }
              longest = Math.max(longest, performance.now() - t0);
              made++;
              await new Promise((r) => setTimeout(r, 2));
            }
          })(),
        );
      }
      await waitFor('calls before the cut', () => made > 50);
      const cutAt = performance.now();
      for (const other of cluster.nodes) if (other !== victim) await filter.dropBetween({ host: victim.host }, { host: other.host });
      await waitFor(
        "the replica to take over the key (in the client's slot map) and the limiter back on Redis",
        () => client.slots[slot]?.[0] !== victimKey && lim.mode === 'redis',
        30_000,
      );
      const backAt = performance.now();
      const redisBefore = lim.stats().redisDecisions;
      await waitFor('decisions on the new master', () => lim.stats().redisDecisions > redisBefore + 20, 10_000);
      // One more second on the new master: its bucket's refill shows by then.
      await waitFor('a second on the new master', () => performance.now() - backAt > 1_000, 5_000);
      running = false;
      await Promise.all(callers);
      const endAt = performance.now();

      const windowS = (endAt - cutAt) / 1_000;
      const got = admitted.filter((at) => at >= cutAt).length;
      const ideal = RATE * windowS;
      const over = got - ideal;
      const s = lim.stats();
      t.diagnostic(
        `cluster master partitioned: ${made} calls, ${failed} failed, longest ${longest.toFixed(0)} ms; rescue ${(firstRescueAt - cutAt).toFixed(0)} ms after the cut; replica took over and decisions back on Redis ${(backAt - cutAt).toFixed(0)} ms after the cut; ${got} admitted in ${windowS.toFixed(2)} s at rate ${RATE}/s (ideal ${ideal.toFixed(0)}): over-admission ${over.toFixed(0)} = ${((over / RATE) * 1000).toFixed(0)} ms of rate (node timeout ${NODE_TIMEOUT_MS} ms); switches ${switches.join(' ')}; outages ${s.outages}`,
      );
      assert.equal(failed, 0, 'no caller sees an error');
      // What the partition can hide: the cut-off master's writes until it stops taking them (rate × node
      // timeout). The replica's refill over the rescue time is charged back with what the rescue admitted.
      const bound = RATE * (NODE_TIMEOUT_MS / 1_000);
      assert.ok(over <= bound, `over-admission ${over.toFixed(0)} tokens exceeds rate × node timeout (${bound})`);
    } finally {
      running = false;
      await Promise.all(callers);
      await filter.close();
      await lim.close();
      client.disconnect();
    }
  });
});
