/**
 * The Redis limiters on a real Redis Cluster on loopback (3 masters, each with a replica, started and
 * stopped by the test): client keys spread over the masters and each is decided exactly; SIGKILL a
 * master → no caller sees an error (rescue while the cluster fails over), and decisions return to Redis
 * once the replica has taken over.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Cluster, Redis } from 'ioredis';
import { RedisPeriodLimiter, RedisTokenLimiter } from '../src/limit/index.js';
import { redisBinary } from './support/redis.js';
import { redisCliBinary, startRedisCluster, type RedisCluster } from './support/redis-cluster.js';
import { skipReason, waitFor } from './support/servers.js';

const skip = skipReason(redisBinary, 'redis-server') ?? skipReason(redisCliBinary, 'redis-cli');
process.on('warning', () => {}); // the rescue's warnings are expected here

function clusterClient(c: RedisCluster): Cluster {
  const client = new Cluster(c.seeds, {
    redisOptions: { maxRetriesPerRequest: 1, connectTimeout: 1_000 },
    clusterRetryStrategy: () => 100,
    retryDelayOnFailover: 100,
    slotsRefreshTimeout: 1_000,
  });
  client.on('error', () => {});
  return client;
}

async function keysOn(port: number): Promise<number> {
  const r = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
  try {
    return await r.dbsize();
  } finally {
    r.disconnect();
  }
}

describe('Redis limiters on a real Redis Cluster', { skip }, () => {
  let cluster: RedisCluster;
  before(async () => {
    cluster = await startRedisCluster({ masters: 3, replicas: 1, nodeTimeoutMs: 1_000 });
  });
  after(async () => {
    await cluster?.stop();
  });

  it('spreads client keys over the 3 masters and decides each key exactly (token and period limiters)', async () => {
    const client = clusterClient(cluster);
    try {
      await using lim = new RedisTokenLimiter({ redis: client, prefix: 'ct:', rate: 0.001, burst: 3, timeoutMs: 2_000 });
      await using per = new RedisPeriodLimiter({ redis: client, prefix: 'cp:', periodMs: 60_000, quota: 2, timeoutMs: 2_000 });
      await waitFor('the limiters on the cluster', () => lim.mode === 'redis' && per.mode === 'redis', 10_000);
      const keys = Array.from({ length: 300 }, (_, i) => `user:${i}`);
      const answers = await Promise.all(keys.map((k) => Promise.all([lim.take(k), lim.take(k), lim.take(k), lim.take(k)])));
      for (const a of answers) assert.deepEqual(a, [true, true, true, false]);
      const periods = await Promise.all(keys.slice(0, 60).map(async (k) => [await per.takeAnswer(k), await per.takeAnswer(k), await per.takeAnswer(k)]));
      for (const p of periods) assert.deepEqual(p, ['allowed', 'hit-quota', 'over-quota']);
      assert.equal(lim.stats().rescueDecisions + per.stats().rescueDecisions, 0, 'every decision made in Redis');
      const masters = await cluster.masterPorts();
      assert.equal(masters.length, 3);
      const counts = await Promise.all(masters.map(keysOn));
      process.stdout.write(`# keys per master: ${counts.join(', ')}\n`);
      for (const n of counts) assert.ok(n >= 50, `every master holds a share of the 360 keys: ${counts.join(', ')}`);
    } finally {
      client.disconnect();
    }
  });

  it('SIGKILL a master: no caller sees an error, and decisions return to Redis after the replica takes over', async () => {
    const client = clusterClient(cluster);
    const lim = new RedisTokenLimiter({ redis: client, prefix: 'cf:', rate: 1e6, burst: 1e9, timeoutMs: 100, probeIntervalMs: 100 });
    let errors = 0;
    let stop = false;
    let i = 0;
    const caller = async () => {
      while (!stop) {
        try {
          await lim.take(`user:${i++ % 1_000}`);
        } catch {
          errors++;
        }
        await new Promise((r) => setTimeout(r, 1));
      }
    };
    const callers: Promise<void>[] = [];
    try {
      await waitFor('the limiter on the cluster', () => lim.mode === 'redis', 10_000);
      callers.push(...Array.from({ length: 8 }, caller));
      await waitFor('decisions in Redis', () => lim.stats().redisDecisions > 500, 10_000);
      const before = await cluster.masterPorts();
      const victim = before[0]!;
      await cluster.kill(victim);
      const killedAt = performance.now();
      await waitFor('the replica to take over', async () => {
        const now = await cluster.masterPorts();
        return now.length === 3 && !now.includes(victim);
      }, 30_000);
      // Back on Redis, and staying there: while ioredis learns the new slot map, decisions may go back
      // to rescue a few times; then a run of 1 000 decisions is made in Redis with no outage.
      let s0 = lim.stats();
      let s1 = s0;
      let back = 0;
      await waitFor('1 000 decisions in a row in Redis', async () => {
        if (lim.mode !== 'redis') return false;
        if (back === 0) back = performance.now() - killedAt;
        await waitFor('1 000 more decisions', () => lim.stats().redisDecisions - s0.redisDecisions >= 1_000 || lim.stats().outages !== s0.outages, 30_000);
        s1 = lim.stats();
        const stable = s1.outages === s0.outages && s1.rescueDecisions === s0.rescueDecisions && s1.mode === 'redis';
        s0 = s1;
        return stable;
      }, 60_000);
      process.stdout.write(`# killed master ${victim}: ${s1.outages} outage(s), ${s1.rescueDecisions} decisions in rescue, first back on Redis ${back.toFixed(0)} ms after the kill\n`);
      assert.equal(s1.mode, 'redis');
      assert.equal(errors, 0, 'no caller saw an error');
      const promoted = (await cluster.masterPorts()).filter((p) => !before.includes(p));
      assert.equal(promoted.length, 1);
      assert.ok((await keysOn(promoted[0]!)) > 0, 'the promoted replica holds (and takes) its slots’ keys');
    } finally {
      stop = true;
      await Promise.all(callers);
      await lim.close();
      client.disconnect();
    }
  });
});
