/**
 * The Redis limiters' rescue on a Cluster, driven by a ManualClock against a hand-written fake of the
 * few ioredis Cluster members they use (slot map, masters, EVALSHA, PING, refreshSlotsCache): a dead
 * master sends only its slots to rescue; the probe asks the slot map's current owner (a refresh while
 * the map names the dead one) and brings the slots back after two PONGs in a row — one switch out, one
 * back; a relapse soon after a return doubles the probes the next return needs; and, for any sequence
 * of deaths, revivals, failovers and calls, every call is answered, switches alternate, and once every
 * master is up all keys are back on Redis (property).
 * The real-cluster failover is in limit-cluster.test.ts.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import fc from 'fast-check';
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
  /** evalsha answers as the token script would with an endless bucket: every decision admitted. */
  evalsha(_sha: string, _numkeys: number, key: string, ...args: string[]): Promise<unknown> {
    const owner = this.slots[keySlot(key)]![0]!;
    this.calls.set(owner, (this.calls.get(owner) ?? 0) + 1);
    const node = this.masters.find((n) => n.key === owner)!;
    if (!node.up) return new Promise(() => {});
    const [, , n, mode] = args;
    if (mode === 'a' || n === undefined) return Promise.resolve(1); // a lone take() sends interval and burst alone
    if (mode === '1') return Promise.resolve([Number(n), 1_000, 0, 0, 0]); // a batch: all n admitted
    // A node batch: key, callers pairs after the first key's callers.
    const admitted = [Number(n)];
    for (let i = 4; i < args.length; i += 2) admitted.push(Number(args[i]));
    return Promise.resolve(admitted);
  }
  eval(sha: string, numkeys: number, key: string, ...args: string[]): Promise<unknown> {
    return this.evalsha(sha, numkeys, key, ...args);
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
    const lim = new RedisTokenLimiter({
      redis: cluster as unknown as RedisClient,
      prefix: 'p:',
      rate: 1e6,
      burst: 1e9,
      timeoutMs: 50,
      probeIntervalMs: 100,
      clock,
    });
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
      await clock.advanceAsync(0);
      assert.equal(cluster.calls.get(replica.key), 1, 'the 2 tokens the rescue admitted for the key are charged to the promoted replica, in one call');
      assert.equal(await lim.take(ka), true);
      assert.equal(cluster.calls.get(replica.key), 2, 'the key goes to the promoted replica');
      assert.equal(lim.stats().outages, 1);
    } finally {
      await lim.close();
    }
  });

  it('needs twice the PONGs to return after a relapse soon after a return', async () => {
    const clock = new ManualClock();
    const a = new FakeNode(7000);
    const cluster = new FakeCluster([a]);
    const lim = new RedisTokenLimiter({
      redis: cluster as unknown as RedisClient,
      prefix: 'p:',
      rate: 1e6,
      burst: 1e9,
      timeoutMs: 50,
      probeIntervalMs: 100,
      clock,
    });
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

  it('answers every call, alternates switches, and returns every key to Redis once all masters are up, whatever happens (property)', async () => {
    type Cmd = { op: 'take'; key: number } | { op: 'kill' | 'revive' | 'failover'; node: number } | { op: 'advance'; ms: number };
    const cmd: fc.Arbitrary<Cmd> = fc.oneof(
      { weight: 5, arbitrary: fc.record({ op: fc.constant('take' as const), key: fc.integer({ min: 0, max: 29 }) }) },
      {
        weight: 1,
        arbitrary: fc.record({ op: fc.constantFrom('kill' as const, 'revive' as const, 'failover' as const), node: fc.integer({ min: 0, max: 2 }) }),
      },
      { weight: 3, arbitrary: fc.record({ op: fc.constant('advance' as const), ms: fc.constantFrom(10, 50, 100, 300) }) },
    );
    await fc.assert(
      fc.asyncProperty(fc.array(cmd, { minLength: 1, maxLength: 60 }), async (cmds) => {
        const clock = new ManualClock();
        let port = 7000;
        const masters = [new FakeNode(port++), new FakeNode(port++), new FakeNode(port++)];
        const cluster = new FakeCluster([...masters]);
        const lim = new RedisTokenLimiter({
          redis: cluster as unknown as RedisClient,
          prefix: 'p:',
          rate: 1e6,
          burst: 1e9,
          timeoutMs: 50,
          probeIntervalMs: 100,
          clock,
        });
        const flips: string[] = [];
        lim.onModeChange((e) => flips.push(e.mode));
        const answers: Promise<boolean>[] = [];
        try {
          for (const c of cmds) {
            if (c.op === 'take') answers.push(lim.take(`u${c.key}`));
            else if (c.op === 'advance') await clock.advanceAsync(c.ms);
            else if (c.op === 'kill') masters[c.node]!.up = false;
            else if (c.op === 'revive') masters[c.node]!.up = true;
            else if (!masters[c.node]!.up) {
              const next = new FakeNode(port++);
              cluster.failover(masters[c.node]!, next);
              masters[c.node] = next;
            }
          }
          for (const m of masters) m.up = true;
          await clock.advanceAsync(60); // every waiting call past its deadline
          const settled = await Promise.all(answers);
          assert.ok(
            settled.every((x) => x === true),
            'every call answered (all admitted at this rate)',
          );
          await clock.advanceAsync(100 * 2 ** 6 * 2); // longer than the longest hold after relapses
          assert.equal(lim.mode, 'redis');
          for (let i = 0; i < flips.length; i++) assert.equal(flips[i], i % 2 === 0 ? 'rescue' : 'redis', `switches alternate: ${flips.join(' ')}`);
          const s0 = lim.stats();
          assert.equal(s0.redisDecisions + s0.rescueDecisions, answers.length, 'each call counted once');
          for (let k = 0; k < 30; k++) assert.equal(await lim.take(`u${k}`), true);
          assert.equal(lim.stats().redisDecisions, s0.redisDecisions + 30, 'every key back on Redis');
        } finally {
          await lim.close();
        }
      }),
      { numRuns: 60 },
    );
  });
});
