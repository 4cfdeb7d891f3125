/**
 * The Redis limiters' rescue on a Cluster, driven by a ManualClock against a hand-written fake of the
 * few ioredis Cluster members they use (slot map, masters, EVALSHA, PING, refreshSlotsCache): a dead
 * master sends only its slots to rescue; the probe asks the slot map's current owner (a refresh while
 * the map names the dead one) and brings the slots back after two PONGs in a row — one switch out, one
 * back; a relapse soon after a return doubles the probes the next return needs.
 * The real-cluster failover is in limit-cluster.test.ts.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { ManualClock } from '../src/core/clock.js';
import { RedisTokenLimiter, type RedisClient } from '../src/limit/index.js';
import { keySlot, SLOTS } from '../src/limit/redis-cluster.js';

process.on('warning', () => {}); // the rescue's warnings are expected here

class FakeNode {
  readonly options: { host: string; port: number };
  up = true;
  pings = 0;
  scripts = 0;
  constructor(port: number) {
    this.options = { host: '127.0.0.1', port };
  }
  get key(): string {
    return `127.0.0.1:${this.options.port}`;
  }
  ping(): Promise<string> {
    this.pings++;
    return this.up ? Promise.resolve('PONG') : Promise.reject(new Error('connect ECONNREFUSED'));
  }
  script(): Promise<string> {
    return Promise.resolve('sha');
  }
}

/** FakeCluster: a ready client whose slots are split over `masters`; a call to a master that is down never answers. */
class FakeCluster extends EventEmitter {
  readonly status = 'ready';
  readonly slots: string[][] = [];
  refreshes = 0;
  readonly calls = new Map<string, number>();
  constructor(readonly masters: FakeNode[]) {
    super();
    for (let s = 0; s < SLOTS; s++) this.slots[s] = [masters[Math.floor((s * masters.length) / SLOTS)]!.key];
  }
  /** As ioredis, a master whose connection ended is no longer in the pool. */
  nodes(): FakeNode[] {
    return this.masters.filter((n) => n.up);
  }
  evalsha(_sha: string, _numkeys: number, key: string): Promise<unknown> {
    const owner = this.slots[keySlot(key)]![0]!;
    this.calls.set(owner, (this.calls.get(owner) ?? 0) + 1);
    const node = this.masters.find((n) => n.key === owner)!;
    return node.up ? Promise.resolve(1) : new Promise(() => {});
  }
  eval(sha: string, numkeys: number, key: string): Promise<unknown> {
    return this.evalsha(sha, numkeys, key);
  }
  refreshSlotsCache(cb?: () => void): void {
    this.refreshes++;
    cb?.();
  }
  /** failover hands every slot of `from` to `to`. */
  failover(from: FakeNode, to: FakeNode): void {
    if (!this.masters.includes(to)) this.masters.push(to);
    for (const s of this.slots) if (s[0] === from.key) s[0] = to.key;
  }
}

/** keyOn answers a client key whose Redis key (`prefix{key}`) lives on `node`. */
function keyOn(c: FakeCluster, node: FakeNode, prefix: string): string {
  for (let i = 0; ; i++) if (c.slots[keySlot(`${prefix}{u${i}}`)]![0] === node.key) return `u${i}`;
}

describe('Redis limiter rescue on a Cluster (fake cluster, ManualClock)', () => {
  it('rescues only the dead master’s keys, and brings them back after two PONGs from the promoted replica: one switch out, one back', async () => {
    const clock = new ManualClock();
    const [a, b, c] = [new FakeNode(7000), new FakeNode(7001), new FakeNode(7002)];
    const cluster = new FakeCluster([a!, b!, c!]);
    const lim = new RedisTokenLimiter({ redis: cluster as unknown as RedisClient, prefix: 'p:', rate: 1e6, burst: 1e9, timeoutMs: 50, probeIntervalMs: 100, clock });
    const flips: string[] = [];
    lim.onModeChange((e) => flips.push(e.mode));
    try {
      const ka = keyOn(cluster, a!, 'p:');
      const kb = keyOn(cluster, b!, 'p:');
      assert.equal(await lim.take(ka), true);
      assert.equal(lim.stats().redisDecisions, 1);

      a!.up = false;
      const waiting = lim.take(ka);
      await clock.advanceAsync(50); // the deadline: answered from rescue
      assert.equal(await waiting, true);
      assert.equal(lim.mode, 'rescue');
      const callsToA = cluster.calls.get(a!.key);
      assert.equal(await lim.take(ka), true, 'decided in process');
      assert.equal(cluster.calls.get(a!.key), callsToA, 'no call to the dead master');
      const r0 = lim.stats().redisDecisions;
      assert.equal(await lim.take(kb), true);
      assert.equal(lim.stats().redisDecisions, r0 + 1, 'the live masters’ keys stay on Redis');

      // The map still names the dead master: every probe asks for a new map, none brings the keys back.
      await clock.advanceAsync(1_000);
      assert.equal(lim.mode, 'rescue');
      assert.ok(cluster.refreshes >= 5, `refreshes: ${cluster.refreshes}`);

      const replica = new FakeNode(7003);
      cluster.failover(a!, replica);
      await clock.advanceAsync(100);
      assert.equal(replica.pings, 1);
      assert.equal(lim.mode, 'rescue', 'one PONG is not enough');
      await clock.advanceAsync(100);
      assert.equal(lim.mode, 'redis', 'two PONGs in a row');
      assert.deepEqual(flips, ['rescue', 'redis']);
      assert.equal(await lim.take(ka), true);
      assert.equal(cluster.calls.get(replica.key), 1, 'the key goes to the promoted replica');
      assert.equal(lim.stats().outages, 1);
    } finally {
      await lim.close();
    }
  });

  it('needs twice the PONGs to return after a relapse soon after a return', async () => {
    const clock = new ManualClock();
    const a = new FakeNode(7000);
    const cluster = new FakeCluster([a]);
    const lim = new RedisTokenLimiter({ redis: cluster as unknown as RedisClient, prefix: 'p:', rate: 1e6, burst: 1e9, timeoutMs: 50, probeIntervalMs: 100, clock });
    const outage = async () => {
      a.up = false;
      const p = lim.take('k');
      await clock.advanceAsync(50);
      await p;
      assert.equal(lim.mode, 'rescue');
      a.up = true;
    };
    /** probesToReturn counts the probe intervals until decisions are back on Redis. */
    const probesToReturn = async () => {
      for (let n = 1; n <= 20; n++) {
        await clock.advanceAsync(100);
        if (lim.mode === 'redis') return n;
      }
      return Infinity;
    };
    try {
      await outage();
      assert.equal(await probesToReturn(), 2);
      await outage(); // at once after the return: a relapse
      assert.equal(await probesToReturn(), 4);
      await outage();
      assert.equal(await probesToReturn(), 8);
      await clock.advanceAsync(5_000); // a quiet while: the next outage is a fresh one
      await outage();
      assert.equal(await probesToReturn(), 2);
    } finally {
      await lim.close();
    }
  });
});
