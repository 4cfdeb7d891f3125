/**
 * bulwark:/// discovery on a real etcd with real grpc-js servers in child processes: a server killed
 * with SIGKILL leaves rotation, its in-flight calls retried on the others within the retry budget (a
 * call fails only where the budget refused its retry), a new one gets calls within 1 s, and a server
 * stopped with SIGTERM (NOT_SERVING → deregistered → drained) fails no call.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { credentials } from '@grpc/grpc-js';
import { GrpcDiscovery } from '../src/grpc/index.js';
import { EtcdRegistry } from '../src/registry/etcd-registry.js';
import { RegistryCache } from '../src/registry/registry-cache.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { skipReason, waitFor } from './support/servers.js';
import { GreeterClientCtor, sayHello, type GreeterClient } from './support/grpc-greeter.js';
import { spawnGreeter, type GreeterChild } from './support/grpc-children.js';
import { startLoad } from './support/grpc-load.js';

describe('bulwark:///greeter on etcd', { skip: skipReason(etcdBinary, 'etcd') }, () => {
  let etcd: EtcdServer;
  const children: GreeterChild[] = [];
  let registry: EtcdRegistry;
  let cache: RegistryCache;
  let discovery: GrpcDiscovery;
  let client: GreeterClient;
  const prefix = `/grpc-test-${process.pid}`;

  before(async () => {
    etcd = await startEtcd();
    children.push(...(await Promise.all(['s1', 's2', 's3'].map((id) => spawnGreeter(etcd.endpoint, prefix, id)))));
    registry = new EtcdRegistry({ hosts: etcd.endpoint, prefix });
    cache = new RegistryCache(registry);
    discovery = new GrpcDiscovery({ registry: cache, health: { intervalMs: 200 } });
    client = new GreeterClientCtor('bulwark:///greeter', credentials.createInsecure(), discovery.channelOptions());
  });

  after(async () => {
    client?.close();
    await discovery?.close();
    await cache?.close();
    await registry?.close();
    for (const c of children) c.child.kill('SIGKILL');
    await Promise.all(children.map((c) => c.exited));
    await etcd?.stop();
  });

  async function seen(ids: string[], timeoutMs: number): Promise<void> {
    const got = new Set<string>();
    await waitFor(
      `calls to ${ids.join(', ')}`,
      async () => {
        for (let i = 0; i < 6; i++) got.add((await sayHello(client, { name: 'x' }, { deadline: Date.now() + 2_000 })).server);
        return ids.every((id) => got.has(id));
      },
      timeoutMs,
    );
  }

  it('spreads calls over the three registered servers', async () => {
    await seen(['s1', 's2', 's3'], 15_000);
  });

  it('SIGKILL: the calls it drops are retried on the others within the retry budget (none fails), it leaves rotation; a new server gets calls within 1 s', async () => {
    const workers = 4;
    const load = startLoad(client, { workers, maxMs: 20_000, maxCalls: 200_000, request: { name: 'x', delayMs: 5 } });
    await waitFor('load running', () => load.records.length > 50, 10_000);
    const victim = children[0]!;
    const killedAt = performance.now();
    victim.child.kill('SIGKILL');
    await victim.exited;
    // after the kill: the calls in flight on the victim fail UNAVAILABLE and are retried on the others
    await waitFor('calls after the kill', () => load.records.filter((r) => r.at > killedAt + 500).length > 200, 15_000);
    const s4 = await spawnGreeter(etcd.endpoint, prefix, 's4');
    children.push(s4);
    const registeredAt = performance.now();
    await waitFor('a call served by s4', () => load.records.some((r) => r.server === 's4'), 5_000);
    const firstS4 = Math.min(...load.records.filter((r) => r.server === 's4').map((r) => r.at + r.ms));
    load.stop();
    const records = await load.done;
    const failed = records.filter((r) => r.code !== undefined && r.at >= killedAt - 100);
    const budget = discovery.stats().services.find((s) => s.service === 'greeter')!.retryBudget!;
    console.log(`SIGKILL: ${failed.length} failed calls of ${records.filter((r) => r.at >= killedAt).length}; retry budget ${JSON.stringify(budget)}`);
    // A call fails only when the budget refused its retry (each refusal fails at most one call): none here.
    assert.ok(
      failed.length <= budget.refused,
      `${failed.length} calls failed after the kill with ${budget.refused} retries refused: ${JSON.stringify(failed.slice(0, 5))}`,
    );
    assert.equal(budget.refused, 0, 'the budget (20 % of calls + 10/s) covers one wave of retries');
    assert.equal(failed.length, 0);
    assert.equal(records.filter((r) => r.server === 's1' && r.at > killedAt).length, 0);
    assert.ok(firstS4 - registeredAt < 1_000, `s4 got its first call ${Math.round(firstS4 - registeredAt)} ms after it registered`);
  });

  it('SIGTERM: NOT_SERVING, deregistered, in-flight calls finish, zero calls fail', async () => {
    const load = startLoad(client, { workers: 6, maxMs: 20_000, maxCalls: 100_000, request: { name: 'x', delayMs: 50 } });
    await waitFor('load running', () => load.records.length > 30, 10_000);
    const victim = children.find((c) => c.id === 's2')!;
    const termAt = performance.now();
    victim.child.kill('SIGTERM');
    await victim.exited;
    assert.match(victim.output(), /stopped/);
    const gone = await registry.getService('greeter').then((l) => !l.some((i) => i.id === 's2'));
    assert.ok(gone, 's2 deregistered');
    await waitFor('calls after the stop', () => load.records.filter((r) => r.at > performance.now() - 300 && r.at > termAt).length > 20, 10_000);
    load.stop();
    const records = await load.done;
    const failed = records.filter((r) => r.code !== undefined);
    assert.equal(failed.length, 0, `failed: ${JSON.stringify(failed.slice(0, 5))}`);
    assert.ok(
      records.some((r) => r.server === 's2'),
      's2 served calls of this load before it stopped',
    );
  });
});
