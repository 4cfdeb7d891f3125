/**
 * Chaos: RegistryCache over EtcdRegistry while etcd is SIGKILLed and restarted with the same data dir.
 * 10 000 lookups over 20 cached services must all succeed (stale answers while etcd is gone), and an
 * instance registered while etcd was down must be seen through the cache within 2 s of etcd's return.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EtcdRegistry } from '../src/registry/etcd-registry.js';
import { RegistryCache } from '../src/registry/registry-cache.js';
import { RegistryUnavailableError } from '../src/core/errors.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { skipReason, waitFor } from './support/servers.js';

const SERVICES = 20;
const LOOKUPS = 10_000;
const BATCH = 50;

describe('RegistryCache over EtcdRegistry while etcd dies and returns', { skip: skipReason(etcdBinary, 'etcd') }, () => {
  let etcd: EtcdServer;
  before(async () => {
    etcd = await startEtcd();
  });
  after(async () => {
    await etcd?.stop();
  });

  it('answers 10 000 lookups over 20 services with 0 failures, and sees an instance registered during the outage within 2 s of etcd returning', async (t) => {
    const prefix = `/bulwark-chaos/${process.pid}`;
    const writer = new EtcdRegistry({ hosts: etcd.endpoint, prefix, ttlMs: 3000 });
    const reader = new EtcdRegistry({ hosts: etcd.endpoint, prefix, ttlMs: 3000 });
    // short TTLs so that lookups really go to etcd (and fail over to stale) during the outage
    const cache = new RegistryCache(reader, { ttlMs: 300, minRetryIntervalMs: 200 });
    try {
      const names = Array.from({ length: SERVICES }, (_, i) => `svc${i}`);
      for (const name of names) {
        await writer.register({ id: `${name}-a`, name, address: '127.0.0.1:9001' });
        await writer.register({ id: `${name}-b`, name, address: '127.0.0.1:9002' });
      }
      for (const name of names) assert.equal((await cache.getService(name)).length, 2);

      let failed = 0;
      let done = 0;
      let lateSeenMs = -1;
      let returnedAt = 0;
      let restartedAt = 0;
      const errors = new Set<string>();
      const chaos = (async () => {
        await waitFor('lookups before the outage', () => done >= 1_000, 20_000); // the outage comes amid the lookups
        await etcd.kill();
        await assert.rejects(writer.register({ id: 'late', name: 'svc0', address: '127.0.0.1:9003' }), RegistryUnavailableError);
        await new Promise((r) => setTimeout(r, 1500)); // the outage's length: the scenario, not a wait for something
        restartedAt = Date.now(); // the process starts again
        await etcd.restart();
        // etcd accepts TCP before it serves (a restarted member first elects itself, ~1 s with the default
        // election timeout, longer on a loaded machine): "returned" is when an independent client is answered
        // (polled every 10 ms with a 200 ms deadline per try, so the first answer is timed to about 10 ms)
        const probe = new EtcdRegistry({ hosts: etcd.endpoint, prefix: `${prefix}-probe`, dialTimeoutMs: 200 });
        let answeredAt = 0;
        while (answeredAt === 0 && Date.now() - restartedAt < 15_000) {
          // at most 20 tries in flight: each gives up after 200 ms
          void probe.listServices().then(
            () => void (answeredAt ||= Date.now()),
            () => {},
          );
          await new Promise((r) => setTimeout(r, 10));
        }
        await probe.close();
        returnedAt = answeredAt || Date.now();
        for (;;) {
          const got = await cache.getService('svc0').catch(() => []);
          // (the lookups above keep running meanwhile)
          if (got.some((i) => i.id === 'late')) {
            lateSeenMs = Date.now() - returnedAt;
            return;
          }
          if (Date.now() - returnedAt > 15_000) return;
          await new Promise((r) => setTimeout(r, 20));
        }
      })();
      const deadline = Date.now() + 60_000;
      while (done < LOOKUPS && Date.now() < deadline) {
        const batch = Array.from({ length: BATCH }, (_, i) => cache.getService(names[(done + i) % SERVICES]!));
        for (const r of await Promise.allSettled(batch)) {
          done++;
          if (r.status === 'rejected') {
            failed++;
            errors.add(String(r.reason));
          }
        }
        await new Promise((r) => setTimeout(r, 15)); // spread the lookups over the outage (~3 s in all)
      }
      await chaos;
      // from the restart, etcd's own start and self-election dominate (1–2 s on a loaded machine); what is
      // ours (reconnect, rewrite, watch) is the time from its first answer
      t.diagnostic(
        `etcd served ${returnedAt - restartedAt} ms after its restart; late instance seen ${lateSeenMs} ms after that (${returnedAt - restartedAt + lateSeenMs} ms after the restart); stats ${JSON.stringify(cache.stats())}`,
      );
      assert.equal(done, LOOKUPS);
      assert.equal(failed, 0, [...errors].join('\n'));
      assert.ok(cache.stats().stale > 0, 'the outage was seen: some answers were stale');
      assert.ok(lateSeenMs >= 0, 'the instance registered during the outage was never seen');
      assert.ok(lateSeenMs <= 2000, `seen ${lateSeenMs} ms after etcd returned`);
    } finally {
      await cache.close();
      await reader.close();
      await writer.close();
    }
  });
});
