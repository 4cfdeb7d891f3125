/**
 * Membership from a registry: cache nodes register themselves and follow the service's watch; the ring
 * moves about 1/n of the keys when one of n nodes joins or leaves. Once with MemoryRegistry, once with
 * EtcdRegistry on a real etcd.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryRegistry } from '../src/registry/memory-registry.js';
import { EtcdRegistry } from '../src/registry/etcd-registry.js';
import type { Registry } from '../src/registry/types.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { skipReason, waitFor } from './support/servers.js';
import { startNode, type CacheNode } from './cache-nodes.js';

const KEYS = Array.from({ length: 2_000 }, (_, i) => `item:${i}`);

function owners(node: CacheNode): string[] {
  return KEYS.map((k) => node.pool.owner(k));
}

async function membershipScenario(makeRegistry: (i: number) => Registry, service: string): Promise<void> {
  const registries: Registry[] = [];
  const nodes: CacheNode[] = [];
  const memberships: { close(): Promise<void> }[] = [];
  const join = async () => {
    const i = nodes.length;
    const registry = makeRegistry(i);
    registries.push(registry);
    const node = await startNode({}, { name: 'g', cacheBytes: 1 << 20, getter: (k) => `${k}@${i}` });
    nodes.push(node);
    memberships.push(await node.pool.bindRegistry(registry, { service }));
    return node;
  };
  const converged = (live: CacheNode[]) =>
    waitFor(
      `${live.length} nodes to agree on membership`,
      () => {
        const want = live
          .map((n) => n.url)
          .sort()
          .join(',');
        return live.every((n) => n.pool.members().join(',') === want);
      },
      15_000,
    );
  try {
    for (let i = 0; i < 3; i++) await join();
    await converged(nodes);
    const before3 = owners(nodes[0]!);
    for (const n of nodes) assert.deepEqual(owners(n), before3, 'every node names the same owners');

    // A fourth node joins: about 1/4 of the keys move, all of them to the new node.
    const fourth = await join();
    await converged(nodes);
    const after4 = owners(nodes[0]!);
    const moved = after4.filter((o, i) => o !== before3[i]);
    assert.ok(
      moved.every((o) => o === fourth.url),
      'keys move only to the node that joined',
    );
    const share = moved.length / KEYS.length;
    assert.ok(share > 0.1 && share < 0.45, `moved share ${share} should be about 1/4`);

    // Values flow between the nodes that found each other through the registry.
    const key = KEYS[after4.indexOf(fourth.url)]!;
    assert.equal((await nodes[0]!.group.get(key)).toString(), `${key}@3`);

    // The second node leaves (deregisters): only its keys move, and the others stop asking it.
    const leaving = nodes[1]!;
    await memberships[1]!.close();
    const live = nodes.filter((n) => n !== leaving);
    await converged(live);
    const after3 = owners(live[0]!);
    for (let i = 0; i < KEYS.length; i++) {
      if (after4[i] !== leaving.url) assert.equal(after3[i], after4[i], `${KEYS[i]} moved though its owner stayed`);
      else assert.notEqual(after3[i], leaving.url);
    }
  } finally {
    await Promise.all(memberships.map((m) => m.close()));
    await Promise.all(nodes.map((n) => n.stop()));
    await Promise.all(registries.map((r) => r.close()));
  }
}

describe('cache membership', () => {
  it('through MemoryRegistry: nodes find each other, and about 1/n of keys move on join and leave', async () => {
    const registry = new MemoryRegistry();
    // One registry shared by every node (close() on it is idempotent).
    await membershipScenario(() => registry, 'bulwark-cache');
  });

  describe('through a real etcd', { skip: skipReason(etcdBinary, 'etcd') }, () => {
    let etcd: EtcdServer | undefined;
    before(async () => {
      etcd = await startEtcd();
    });
    after(async () => {
      await etcd?.stop();
    });

    it('nodes with their own EtcdRegistry find each other, and about 1/n of keys move on join and leave', async () => {
      const prefix = `/bulwark-cache-test/${process.pid}`;
      await membershipScenario(() => new EtcdRegistry({ hosts: etcd!.endpoint, prefix, ttlMs: 5_000 }), 'bulwark-cache');
    });
  });
});
