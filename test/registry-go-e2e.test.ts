/**
 * A service registered in the go-zero layout, called end to end on a real etcd: a bulwark ResilientClient
 * calls HTTP servers that a Go process registers as go-zero's publisher does, and a bulwark gRPC client
 * (`bulwark:///greeter`) calls greeters that bulwark registers in the go-zero layout. A server killed
 * with SIGKILL leaves rotation within its lease TTL + 2 s (etcd's expiry lags the TTL), and no call fails.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { credentials } from '@grpc/grpc-js';
import { ResilientClient } from '../src/client/index.js';
import { GrpcDiscovery } from '../src/grpc/index.js';
import { EtcdRegistry } from '../src/registry/etcd-registry.js';
import { RegistryCache } from '../src/registry/registry-cache.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { buildGo, startGo, type GoBuild, type GoProcess } from './support/go-program.js';
import { spawnGreeter, type GreeterChild } from './support/grpc-children.js';
import { GreeterClientCtor, sayHello, type GreeterClient } from './support/grpc-greeter.js';
import { startLoad } from './support/grpc-load.js';
import { skipReason, waitFor } from './support/servers.js';

const SOURCE = fileURLToPath(new URL('./support/go-registry-peer.go', import.meta.url));
const etcdSkip = skipReason(etcdBinary, 'etcd');
const build: GoBuild =
  etcdSkip !== undefined ? { skip: etcdSkip } : await buildGo(SOURCE, [{ importPath: 'go.etcd.io/etcd/clientv3', debian: 'golang-etcd-server-dev' }]);
const skip = 'skip' in build ? build.skip : undefined;
/** The lease TTL both sides register with, and the bound on leaving rotation after a SIGKILL. */
const TTL_MS = 2_000;
const LEAVES_WITHIN_MS = TTL_MS + 2_000;

describe('a service in the go-zero layout, end to end', { skip }, () => {
  let etcd: EtcdServer;
  const procs: GoProcess[] = [];
  const children: GreeterChild[] = [];

  before(async () => {
    etcd = await startEtcd();
  });
  after(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    for (const c of children) c.child.kill('SIGKILL');
    await Promise.all(children.map((c) => c.exited));
    await etcd?.stop();
    if ('remove' in build) build.remove();
  });

  /** leftWithin waits until `cache` no longer lists `address`, and answers how long after `since` that was. */
  async function leftAfter(
    cache: { getService(n: string): Promise<readonly { address: string }[]> },
    service: string,
    address: string,
    since: number,
  ): Promise<number> {
    await waitFor(`${address} out of rotation`, async () => !(await cache.getService(service)).some((i) => i.address === address), LEAVES_WITHIN_MS + 5_000);
    return performance.now() - since;
  }

  it('ResilientClient: calls what a go-zero publisher registered; SIGKILL → it leaves rotation within the TTL + 2 s, no call fails', async () => {
    const svc = `zhttp-${process.pid}`;
    const servers = [0, 1].map(() =>
      startGo((build as { binary: string }).binary, ['-etcd', etcd.endpoint, '-mode', 'zero-pub', '-serve', '-key', svc, '-ttl', String(TTL_MS / 1000)]),
    );
    procs.push(...servers);
    const addresses = await Promise.all(servers.map(async (p) => (await p.expect(/^LISTENING (\S+)$/))[1]!));
    await Promise.all(servers.map((p) => p.expect(/^REGISTERED /)));
    const registry = new EtcdRegistry({ hosts: etcd.endpoint, layout: 'go-zero' });
    const client = new ResilientClient({ registry, timeoutMs: 2_000 });
    const answered = new Map<string, number>();
    let failed: string[] = [];
    let stop = false;
    const loop = (async () => {
      const end = performance.now() + 30_000;
      for (let n = 0; n < 20_000 && !stop && performance.now() < end; n++) {
        try {
          const res = await client.fetch(`http://${svc}/`);
          const pid = await res.text();
          answered.set(pid, (answered.get(pid) ?? 0) + 1);
        } catch (err) {
          failed.push(String(err));
        }
      }
    })();
    try {
      await waitFor('calls to both servers', () => answered.size === 2, 10_000);
      const victim = servers[0]!;
      const victimPid = String(victim.child.pid);
      failed = [];
      const killedAt = performance.now();
      await victim.stop();
      const leftMs = await leftAfter(client.registry, svc, addresses[0]!, killedAt);
      const before = answered.get(victimPid);
      await waitFor('calls after it left', () => (answered.get(String(servers[1]!.child.pid)) ?? 0) > 50, 5_000);
      stop = true;
      await loop;
      console.log(`ResilientClient: the killed go-zero server left rotation ${Math.round(leftMs)} ms after SIGKILL (TTL ${TTL_MS} ms)`);
      assert.ok(leftMs < LEAVES_WITHIN_MS, `left rotation ${Math.round(leftMs)} ms after the kill`);
      assert.equal(answered.get(victimPid), before, 'no answer from the killed server after it left');
      assert.deepEqual(failed, [], 'every call after the kill was retried on the live server');
    } finally {
      stop = true;
      await loop;
      await client.close();
      await registry.close();
    }
  });

  it('bulwark:///greeter: calls greeters registered in the go-zero layout; SIGKILL → it leaves rotation within the TTL + 2 s, no call fails', async () => {
    const prefix = `/zgrpc-${process.pid}`;
    children.push(...(await Promise.all(['s1', 's2'].map((id) => spawnGreeter(etcd.endpoint, prefix, id, ['layout=go-zero'])))));
    const registry = new EtcdRegistry({ hosts: etcd.endpoint, prefix, layout: 'go-zero' });
    const cache = new RegistryCache(registry);
    const discovery = new GrpcDiscovery({ registry: cache, health: { intervalMs: 200 } });
    const client: GreeterClient = new GreeterClientCtor('bulwark:///greeter', credentials.createInsecure(), discovery.channelOptions());
    try {
      const got = new Set<string>();
      await waitFor(
        'calls to s1 and s2',
        async () => {
          for (let i = 0; i < 6; i++) got.add((await sayHello(client, { name: 'x' }, { deadline: Date.now() + 2_000 })).server);
          return got.has('s1') && got.has('s2');
        },
        15_000,
      );
      const load = startLoad(client, { workers: 4, maxMs: 20_000, maxCalls: 200_000, request: { name: 'x', delayMs: 5 } });
      await waitFor('load running', () => load.records.length > 50, 10_000);
      const victim = children[0]!;
      const killedAt = performance.now();
      victim.child.kill('SIGKILL');
      await victim.exited;
      const leftMs = await leftAfter(cache, 'greeter', victim.address, killedAt);
      const leftAt = performance.now();
      await waitFor('calls after it left', () => load.records.filter((r) => r.at > leftAt).length > 100, 10_000);
      load.stop();
      const records = await load.done;
      console.log(`bulwark:///: the killed greeter left rotation ${Math.round(leftMs)} ms after SIGKILL (TTL ${TTL_MS} ms)`);
      assert.ok(leftMs < LEAVES_WITHIN_MS, `left rotation ${Math.round(leftMs)} ms after the kill`);
      const failed = records.filter((r) => r.code !== undefined && r.at >= killedAt - 100);
      assert.deepEqual(failed.slice(0, 5), [], `${failed.length} calls failed after the kill`);
      assert.equal(records.filter((r) => r.server === 's1' && r.at > killedAt).length, 0);
    } finally {
      client.close();
      await discovery.close();
      await cache.close();
      await registry.close();
    }
  });
});
