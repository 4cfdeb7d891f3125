/**
 * Issue 24 §2 with real parts: two payments instances as processes of their own, registered in a real
 * etcd, called through ResilientClient.fetch with the defaults — one answering every request, one
 * failing every other one. The healthy one is killed with SIGKILL; of the next 1 000 calls (16 in
 * flight), at least half must be answered by an instance, not the fallback. Before the cap covered the
 * instance breakers and the service breaker heard whole calls, the fallback answered nearly all of them.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { ResilientClient } from '../src/client/index.js';
import { EtcdRegistry } from '../src/registry/index.js';
import { Balancer } from '../src/balancer/index.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { canConnect, freePort, ServerProcess, skipReason } from './support/servers.js';
import { tsNodeArgs } from './support/ts-node.js';

const CHILD = fileURLToPath(new URL('./support/http-instance-child.ts', import.meta.url));
const IN_FLIGHT = 16;

/** startInstance runs one instance process on a free loopback port. */
async function startInstance(mode: 'ok' | 'flaky'): Promise<{ proc: ServerProcess; address: string }> {
  const port = await freePort();
  const proc = new ServerProcess(`payments-${mode}`, process.execPath, tsNodeArgs(CHILD, String(port), mode), process.cwd());
  await proc.start(() => canConnect(port));
  return { proc, address: `127.0.0.1:${port}` };
}

/** run makes `calls` calls, IN_FLIGHT at a time, bounded in time too; answers how many an instance answered. */
async function run(client: ResilientClient, calls: number, deadlineMs: number): Promise<{ made: number; byInstance: number }> {
  let next = 0;
  let byInstance = 0;
  const deadline = Date.now() + deadlineMs;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < calls && Date.now() < deadline) {
        next++;
        const res = await client.fetch('http://payments/pay', { fallback: () => new Response('fallback', { status: 299 }) });
        if (res.status === 200 && (await res.text()) === 'paid') byInstance++;
      }
    }),
  );
  return { made: next, byInstance };
}

describe('a half-healthy service over real processes and etcd', { skip: skipReason(etcdBinary, 'etcd') }, () => {
  let etcd: EtcdServer;
  before(async () => {
    etcd = await startEtcd();
  });
  after(async () => {
    await etcd?.stop();
  });

  it('answers at least half of 1 000 calls from an instance after the healthy one is killed with SIGKILL and the other fails every other request', async (t) => {
    const healthy = await startInstance('ok');
    const flaky = await startInstance('flaky');
    const registry = new EtcdRegistry({ hosts: etcd.endpoint, prefix: `/half-healthy-${process.pid}` });
    const client = new ResilientClient({ registry, timeoutMs: 2_000 });
    try {
      await registry.register({ id: 'pay-1', name: 'payments', address: healthy.address });
      await registry.register({ id: 'pay-2', name: 'payments', address: flaky.address });
      const warm = await run(client, 200, 30_000); // pay-2's breaker opens on its 50 % failures
      assert.equal(warm.made, 200);
      await healthy.proc.kill('SIGKILL'); // still registered: nobody deregistered it
      const { made, byInstance } = await run(client, 1_000, 60_000);
      const s = await client.service('payments');
      assert.ok(s.balancer instanceof Balancer);
      t.diagnostic(
        `${byInstance} of ${made} answered by an instance; balancer ${JSON.stringify(s.balancer.stats())}; client ${JSON.stringify(client.stats())}`,
      );
      assert.equal(made, 1_000, 'every call made in time');
      assert.ok(byInstance >= 500, `${byInstance} of ${made} calls answered by an instance`);
    } finally {
      await client.close();
      await registry.close();
      await healthy.proc.kill();
      await flaky.proc.kill();
    }
  });
});
