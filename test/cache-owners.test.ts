/**
 * Replicated ownership (HttpPool `owners`) over HTTP: with R = 2 each key lives on its first two
 * distinct nodes, so a scale-out from 3 to 5 nodes and a node's death leave most keys (death: every
 * key) with an owner that still holds them, where R = 1 sends ~40 % (scale-out) / ~33 % (death) back
 * to the origin. And a key is still loaded once cluster-wide.
 */
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startNode, type CacheNode } from './cache-nodes.js';

let nodes: CacheNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  nodes = [];
});

const KEYS = Array.from({ length: 300 }, (_, i) => `item:${i}`);

async function cluster(owners: number, loads: Map<string, number>): Promise<{ add(): Promise<CacheNode>; setAll(): void }> {
  const add = async () => {
    const node = await startNode(
      { owners },
      {
        name: 'g',
        cacheBytes: 1 << 22,
        hotCacheSample: 0,
        getter: (key) => {
          loads.set(key, (loads.get(key) ?? 0) + 1);
          return `v:${key}`;
        },
      },
    );
    nodes.push(node);
    return node;
  };
  return { add, setAll: () => nodes.forEach((n) => n.pool.setPeers(...nodes.map((m) => m.url))) };
}

/** readAll gets every key from every node (concurrently per key) and answers the origin loads it caused. */
async function readAll(loads: Map<string, number>): Promise<number> {
  const before = [...loads.values()].reduce((a, b) => a + b, 0);
  for (const key of KEYS) {
    const values = await Promise.all(nodes.map((n) => n.group.get(key)));
    for (const v of values) assert.equal(v.toString(), `v:${key}`);
  }
  return [...loads.values()].reduce((a, b) => a + b, 0) - before;
}

describe('replicated ownership', () => {
  for (const owners of [1, 2]) {
    it(`R = ${owners}: loads each key once, then keeps ${owners === 2 ? 'most' : 'only some'} keys through a 3 → 5 scale-out and a death`, async () => {
      const loads = new Map<string, number>();
      const c = await cluster(owners, loads);
      for (let i = 0; i < 3; i++) await c.add();
      c.setAll();
      assert.equal(await readAll(loads), KEYS.length, 'each key loaded once cluster-wide');
      assert.ok([...loads.values()].every((n) => n === 1));
      // With R = 2, every key is in the main cache of both its owners.
      const held = nodes.reduce((a, n) => a + n.group.cacheStats().main.length, 0);
      assert.equal(held, KEYS.length * owners);

      await c.add();
      await c.add();
      c.setAll();
      const scaleOut = await readAll(loads);

      const dead = nodes.splice(1, 1)[0]!;
      await dead.stop();
      c.setAll();
      const death = await readAll(loads);
      if (owners === 1) {
        // About 2/5 of keys move to the two new nodes; about 1/5 lived on the dead one.
        assert.ok(scaleOut > KEYS.length * 0.25, `scale-out reloads ${scaleOut}`);
        assert.ok(death > KEYS.length * 0.1, `death reloads ${death}`);
      } else {
        // Only keys whose two owners are both new (about 2/5 × 1/4) are reloaded; none after a death.
        assert.ok(scaleOut < KEYS.length * 0.2, `scale-out reloads ${scaleOut}`);
        assert.equal(death, 0, 'every key had a surviving owner that held it');
      }
    });
  }

  it('R = 2 reads from the other owner when one is down, without loading again', async () => {
    const loads = new Map<string, number>();
    const c = await cluster(2, loads);
    for (let i = 0; i < 3; i++) await c.add();
    c.setAll();
    await readAll(loads);
    // Kill a node but do not tell the others: their requests to it fail, and they ask the other owner.
    const dead = nodes[0]!;
    await dead.stop();
    nodes = nodes.slice(1);
    const before = [...loads.values()].reduce((a, b) => a + b, 0);
    for (const n of nodes) for (const key of KEYS) assert.equal((await n.group.get(key)).toString(), `v:${key}`);
    assert.equal([...loads.values()].reduce((a, b) => a + b, 0) - before, 0);
  });
});
