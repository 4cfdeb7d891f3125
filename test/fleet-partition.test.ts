/**
 * A fleet-aware breaker cut off from its etcd store by a real partition (packets dropped, not refused:
 * test/support/netfault.ts), issue 28. Three callers share one dependency, each a CircuitBreaker with
 * its own EtcdFleetStore (its own etcd client). One of them reaches etcd through a TCP forwarder on its
 * own loopback address (the harness's DelayProxy, without delay), so that dropping every packet to and
 * from the forwarder's port cuts that caller, and only it, off from etcd: its TCP sees nothing but
 * silence, as across a real partition, while the other two keep talking to etcd.
 *
 * - while cut off: no call of the cut caller fails or is refused because of it; its view says
 *   `available: false` (with store errors counted); its breaker is its own — a dependency that starts
 *   failing then opens it on its own evidence (reason `local`), as without a fleet;
 * - the others drop the cut caller from their reporters once its lease runs out;
 * - once the partition heals, its view is available again and sees every reporter, and the others see it.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CircuitBreaker } from '../src/breaker/index.js';
import { EtcdFleetStore } from '../src/fleet/index.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { DelayProxy, netfaultSkip, PacketFilter } from './support/netfault.js';
import { skipReason, waitFor } from './support/servers.js';

const skip = skipReason(etcdBinary, 'etcd') ?? netfaultSkip;
const RATE = 20;
const TTL_MS = 2_000;

describe('a fleet-aware breaker partitioned from etcd', { skip, timeout: 120_000 }, () => {
  let etcd: EtcdServer;
  let proxy: DelayProxy;
  let filter: PacketFilter;
  const stores: EtcdFleetStore[] = [];
  const breakers: CircuitBreaker[] = [];

  before(async () => {
    etcd = await startEtcd();
    const port = Number(new URL(etcd.endpoint).port);
    proxy = await DelayProxy.start({ host: '127.0.0.1', port }, { delayMs: 0, host: '127.0.0.41' });
    filter = await PacketFilter.open();
    stores.push(new EtcdFleetStore({ etcd: `http://${proxy.address}`, callerId: 'cut' }));
    for (const id of ['a', 'b']) stores.push(new EtcdFleetStore({ etcd: etcd.endpoint, callerId: id }));
    for (const store of stores) {
      breakers.push(
        new CircuitBreaker({
          name: 'payments',
          minimumCalls: 20,
          failureRate: 0.5,
          windowMs: 10_000,
          buckets: 10,
          openMs: 1_000,
          halfOpenCalls: 2,
          fleet: { store, publishMs: 25, ttlMs: TTL_MS },
        }),
      );
    }
  });

  after(async () => {
    await filter?.close();
    await Promise.all(breakers.map((b) => b.close()));
    await Promise.all(stores.map((s) => s.close()));
    await proxy?.close();
    await etcd?.stop();
  });

  it('fails no call because of it, keeps its own breaker, says the view is unavailable, and sees the fleet again when the partition heals', async () => {
    const dep = { dead: false };
    const counts = breakers.map(() => ({ ok: 0, failed: 0, refused: 0, other: 0 }));
    const timer = setInterval(() => {
      breakers.forEach((b, i) => {
        b.execute(async () => {
          if (dep.dead) throw new Error('HTTP 503');
          return 'ok';
        }).then(
          () => counts[i]!.ok++,
          (err: { code?: string; message?: string }) => {
            if (err.code === 'ERR_BREAKER_OPEN') counts[i]!.refused++;
            else if (err.message === 'HTTP 503') counts[i]!.failed++;
            else counts[i]!.other++; // anything else is a failure the store caused
          },
        );
      });
    }, 1_000 / RATE);
    try {
      const cut = breakers[0]!;
      await waitFor(
        'every view available, with the three reporters',
        () => breakers.every((b) => b.stats().fleet?.available === true && b.stats().fleet?.reporters === 3),
        15_000,
      );

      await filter.isolate(proxy.port);
      const cutAt = performance.now();
      await waitFor('the cut view unavailable', () => cut.stats().fleet?.available === false, 15_000);
      const unavailableIn = Math.round(performance.now() - cutAt);
      await waitFor('the others drop the cut caller after its lease', () => breakers.slice(1).every((b) => b.stats().fleet?.reporters === 2), 15_000);
      const goneIn = Math.round(performance.now() - cutAt);
      const during = { ...counts[0]! };
      assert.equal(during.failed + during.refused + during.other, 0, `no call of the cut caller failed: ${JSON.stringify(during)}`);
      assert.ok(during.ok > 0);
      assert.equal(cut.state, 'closed');
      assert.ok(cut.stats().fleet!.storeErrors > 0, 'the failed store operations are counted');

      // Its breaker is its own while cut off: a dependency that fails opens it on its own evidence.
      dep.dead = true;
      await waitFor('the cut caller open on its own evidence', () => cut.state === 'open', 10_000);
      assert.equal(cut.stats().reason, 'local');
      assert.equal(cut.stats().fleet?.available, false);
      assert.ok(counts[0]!.failed >= 20, `opened after minimumCalls of its own: ${counts[0]!.failed} failed`);
      dep.dead = false;
      await waitFor('the cut caller closed again (its own probes)', () => cut.state === 'closed', 10_000);
      assert.equal(counts[0]!.other, 0);

      await filter.heal();
      const healedAt = performance.now();
      await waitFor(
        'the cut view available again with every reporter',
        () => cut.stats().fleet?.available === true && cut.stats().fleet?.reporters === 3,
        30_000,
      );
      const backIn = Math.round(performance.now() - healedAt);
      await waitFor('the others see the cut caller again', () => breakers.slice(1).every((b) => b.stats().fleet?.reporters === 3), 15_000);
      process.stdout.write(
        `# fleet partition: view unavailable ${unavailableIn} ms after the cut, the others dropped it after ${goneIn} ms (ttlMs ${TTL_MS}); ` +
          `back ${backIn} ms after the heal; the cut caller ${JSON.stringify(counts[0])}, store errors ${cut.stats().fleet!.storeErrors}\n`,
      );
      assert.equal(counts[0]!.other, 0, 'no call failed because of the partition');
      for (const c of counts.slice(1)) assert.equal(c.other, 0);
    } finally {
      clearInterval(timer);
    }
  });
});
