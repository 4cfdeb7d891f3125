/**
 * The Redis limiters on a real Redis Cluster on loopback (3 masters, each with a replica, started and
 * stopped by the test): client keys spread over the masters and each is decided exactly, a tick's keys
 * go as one script call per master; SIGKILL a master → no caller sees an error, only the dead master's
 * keys go to rescue, and they return to Redis once the replica has taken over — one switch out and one
 * back, no flapping.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Cluster, Redis } from 'ioredis';
import { RedisPeriodLimiter, RedisTokenLimiter } from '../src/limit/index.js';
import { redisBinary } from './support/redis.js';
import { redisCliBinary, startRedisCluster, type RedisCluster } from './support/redis-cluster.js';
import { skipReason, waitFor } from './support/servers.js';
import { scriptCalls } from './support/use-redis.js';
import { keySlot } from '../src/limit/redis-cluster.js';

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

/** scriptCallsOn is how many EVALSHA + EVAL calls the masters on `ports` have run so far. */
async function scriptCallsOn(ports: number[]): Promise<number> {
  let n = 0;
  for (const port of ports) {
    const r = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
    try {
      n += await scriptCalls(r);
    } finally {
      r.disconnect();
    }
  }
  return n;
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
      const masters = await cluster.masterPorts();
      const calls0 = await scriptCallsOn(masters);
      const answers = await Promise.all(keys.map((k) => Promise.all([lim.take(k), lim.take(k), lim.take(k), lim.take(k)])));
      const calls = (await scriptCallsOn(masters)) - calls0;
      // A lone first caller goes at once; the 1 199 callers of its tick behind it are one call per master.
      assert.ok(calls <= 1 + 3, `1 200 decisions on 300 keys took ${calls} script calls: one per master, not one per key`);
      for (const a of answers) assert.deepEqual(a, [true, true, true, false]);
      const periods = await Promise.all(keys.slice(0, 60).map(async (k) => [await per.takeAnswer(k), await per.takeAnswer(k), await per.takeAnswer(k)]));
      for (const p of periods) assert.deepEqual(p, ['allowed', 'hit-quota', 'over-quota']);
      assert.equal(lim.stats().rescueDecisions + per.stats().rescueDecisions, 0, 'every decision made in Redis');
      assert.equal(masters.length, 3);
      const counts = await Promise.all(masters.map(keysOn));
      process.stdout.write(`# keys per master: ${counts.join(', ')}\n`);
      for (const n of counts) assert.ok(n >= 50, `every master holds a share of the 360 keys: ${counts.join(', ')}`);
      // The slots the limiter groups keys by are the cluster's own.
      const admin = new Redis({ host: '127.0.0.1', port: masters[0]!, maxRetriesPerRequest: 1 });
      try {
        for (const k of [...keys.slice(0, 50), 'é', '🙂', 'a{b}c', '{}x', 'ü{ñ}']) {
          const key = `ct:{${k}}`;
          assert.equal(keySlot(key), Number(await admin.call('CLUSTER', 'KEYSLOT', key)), key);
        }
      } finally {
        admin.disconnect();
      }
    } finally {
      client.disconnect();
    }
  });

  it("sends a node's keys one by one when its slot map is stale (a key's slot moved): every caller decided on Redis", async () => {
    const client = clusterClient(cluster);
    try {
      await using lim = new RedisTokenLimiter({ redis: client, prefix: 'cm:', rate: 0.001, burst: 2, timeoutMs: 2_000 });
      await waitFor('the limiter on the cluster', () => lim.mode === 'redis', 10_000);
      // Two keys on different masters; the client's map is made to say the second's slot is the first's master's.
      const keys = Array.from({ length: 50 }, (_, i) => `moved:${i}`);
      const a = keys[0]!;
      const ownerA = client.slots[keySlot(`cm:{${a}}`)]![0];
      const b = keys.find((k) => client.slots[keySlot(`cm:{${k}}`)]![0] !== ownerA)!;
      client.slots[keySlot(`cm:{${b}}`)] = [ownerA!];
      const first = lim.take('lone'); // in flight: the next tick's callers batch
      const answers = await Promise.all([a, b].map((k) => Promise.all([lim.take(k), lim.take(k), lim.take(k)])));
      await first;
      assert.deepEqual(answers, [
        [true, true, false],
        [true, true, false],
      ]);
      const s = lim.stats();
      assert.equal(s.rescueDecisions, 0, 'no decision in rescue');
      assert.equal(s.outages, 0);
      assert.equal(s.redisDecisions, 7);
    } finally {
      client.disconnect();
    }
  });

  it('SIGKILL a master: no caller sees an error, only its keys go to rescue, one switch out and one back soon after the replica takes over', async () => {
    const client = clusterClient(cluster);
    // timeoutMs 1 s: on a shared 2-core machine at load 20+, healthy masters were seen taking > 250 ms,
    // and this test counts every switch; a dead master is found by its closed connection anyway.
    const lim = new RedisTokenLimiter({ redis: client, prefix: 'cf:', rate: 1e6, burst: 1e9, timeoutMs: 1_000, probeIntervalMs: 100 });
    const flips: { mode: string; redisDecisions: number; atMs: number; cause: string }[] = [];
    const t0 = performance.now();
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
        await new Promise((r) => setTimeout(r, 1)); // paced: a bounded load, not a busy loop
      }
    };
    const callers: Promise<void>[] = [];
    try {
      await waitFor('the limiter on the cluster', () => lim.mode === 'redis', 10_000);
      lim.onModeChange((e) =>
        flips.push({
          mode: e.mode,
          redisDecisions: lim.stats().redisDecisions,
          atMs: Math.round(performance.now() - t0),
          cause: e.cause instanceof Error ? e.cause.message : '',
        }),
      );
      callers.push(...Array.from({ length: 8 }, caller));
      await waitFor('decisions in Redis', () => lim.stats().redisDecisions > 500, 10_000);
      const before = await cluster.masterPorts();
      const victim = before[0]!;
      await cluster.kill(victim);
      const killedAt = performance.now();
      await waitFor('the dead master’s keys to go to rescue', () => lim.mode === 'rescue', 10_000);
      await waitFor(
        'the replica to take over',
        async () => {
          const now = await cluster.masterPorts();
          return now.length === 3 && !now.includes(victim);
        },
        30_000,
      );
      const promotedAt = performance.now();
      await waitFor('decisions back on Redis within 3 s of the promotion', () => lim.mode === 'redis', 3_000);
      const back = performance.now();
      // And staying there: 2 000 more decisions, all in Redis.
      const s0 = lim.stats();
      await waitFor('2 000 more decisions in Redis', () => lim.stats().redisDecisions - s0.redisDecisions >= 2_000, 30_000);
      const s1 = lim.stats();
      process.stdout.write(
        `# killed master ${victim}: ${s1.outages} outage(s), ${flips.length} switch(es), ${s1.rescueDecisions} decisions in rescue, ` +
          `${flips[1] !== undefined ? flips[1].redisDecisions - flips[0]!.redisDecisions : '?'} in Redis meanwhile; promoted ${(promotedAt - killedAt).toFixed(0)} ms after the kill, ` +
          `back on Redis ${Math.max(0, back - promotedAt).toFixed(0)} ms after that\n`,
      );
      assert.equal(errors, 0, 'no caller saw an error');
      assert.deepEqual(
        flips.map((f) => f.mode),
        ['rescue', 'redis'],
        `one switch out and one back, no flapping: ${JSON.stringify(flips)} (killed at ${Math.round(killedAt - t0)} ms)`,
      );
      assert.equal(s1.outages, 1);
      assert.ok(flips[1]!.redisDecisions > flips[0]!.redisDecisions, 'the live masters’ keys stayed on Redis during the failover');
      assert.equal(s1.rescueDecisions, s0.rescueDecisions, 'no decision in rescue after the return');
      assert.equal(s1.mode, 'redis');
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
