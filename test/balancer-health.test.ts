/**
 * Active health checks against real HTTP servers on loopback: a server that goes down (its process
 * stops listening) is marked down after 3 failed probes and comes back after 2 good ones; status
 * codes, timeouts, refused connections and IPv6 addresses through the real node:http probe.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Balancer, type BalancerEvent } from '../src/balancer/index.js';
import { httpProbe } from '../src/balancer/health/active.js';
import { ManualClock } from '../src/core/clock.js';
import { freePort } from './support/servers.js';
import type { ServiceInstance } from '../src/registry/types.js';

interface TestServer {
  port: number;
  hits: number;
  status: number;
  start(): Promise<void>;
  stop(): Promise<void>;
}

function server(port: number, host = '127.0.0.1'): TestServer {
  let srv: http.Server | undefined;
  const s: TestServer = {
    port,
    hits: 0,
    status: 200,
    start: () =>
      new Promise((resolve, reject) => {
        srv = http.createServer((req, res) => {
          s.hits++;
          if (req.url === '/hang') return; // never answers
          res.writeHead(req.url === '/health' ? s.status : 404).end('ok');
        });
        srv.on('error', reject);
        srv.listen(s.port, host, () => {
          s.port = (srv!.address() as AddressInfo).port;
          resolve();
        });
      }),
    stop: () =>
      new Promise((resolve) => {
        srv?.closeAllConnections();
        srv?.close(() => resolve());
      }),
  };
  return s;
}

async function until(cond: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

const instance = (id: string, port: number, host = '127.0.0.1'): ServiceInstance => ({
  id,
  name: 'web',
  address: `${host.includes(':') ? `[${host}]` : host}:${port}`,
});

describe('active health checks on real HTTP servers', () => {
  it('marks a server down when it stops and up again when it comes back', async () => {
    const a = server(await freePort());
    const b = server(await freePort());
    await a.start();
    await b.start();
    const bal = new Balancer({
      instances: [instance('a', a.port), instance('b', b.port)],
      strategy: 'round-robin',
      activeHealth: { path: '/health', intervalMs: 25, timeoutMs: 1_000 },
    });
    const events: BalancerEvent[] = [];
    bal.onChange((e) => events.push(e));
    try {
      await until(() => a.hits >= 2 && b.hits >= 2);
      assert.deepEqual(
        bal.healthy().map((i) => i.id),
        ['a', 'b'],
      );

      await a.stop();
      await until(() => events.some((e) => e.type === 'down' && e.id === 'a'));
      assert.deepEqual(
        bal.healthy().map((i) => i.id),
        ['b'],
      );
      for (let i = 0; i < 10; i++) assert.equal(bal.pick().id, 'b');

      await a.start();
      await until(() => events.some((e) => e.type === 'up' && e.id === 'a'));
      assert.deepEqual(
        bal.healthy().map((i) => i.id),
        ['a', 'b'],
      );
      const downAt = events.findIndex((e) => e.type === 'down');
      assert.ok(events.findIndex((e) => e.type === 'up') > downAt);
    } finally {
      await bal.close();
      await a.stop();
      await b.stop();
    }
  });

  it('stops probing an instance as soon as it leaves the list', async () => {
    const a = server(await freePort());
    await a.start();
    const clock = new ManualClock();
    const bal = new Balancer({ instances: [instance('a', a.port)], activeHealth: { intervalMs: 20 }, clock });
    try {
      // Probes run on the balancer's clock: step it until two have reached the server.
      for (let end = Date.now() + 10_000; a.hits < 2;) {
        if (Date.now() > end) throw new Error('no probes in time');
        await clock.advanceAsync(20);
        await new Promise((r) => setTimeout(r, 5)); // let the probe's request reach the server
      }
      assert.ok(clock.pendingTimers >= 1, 'the next probe is scheduled');
      bal.update([]);
      // The schedule is cleared at once; a probe still on the wire is aborted and then clears its timeout.
      await until(() => clock.pendingTimers === 0, 2_000);
      const hits = a.hits;
      await clock.advanceAsync(1_000); // fifty intervals
      assert.ok(a.hits <= hits + 1, `probes after removal: ${a.hits - hits}`); // at most one already on the wire
    } finally {
      await bal.close();
      await a.stop();
    }
  });

  it('the node:http probe passes 2xx and 3xx and fails 5xx, 404, timeouts and refused connections', async () => {
    const s = server(await freePort());
    await s.start();
    const refused = await freePort();
    const probe = (path: string, port = s.port, ms = 2_000) => httpProbe(path)(instance('x', port), AbortSignal.timeout(ms));
    try {
      assert.equal(await probe('/health'), true);
      s.status = 302;
      assert.equal(await probe('/health'), true);
      s.status = 503;
      assert.equal(await probe('/health'), false);
      assert.equal(await probe('/missing'), false);
      assert.equal(await probe('/hang', s.port, 100), false);
      assert.equal(await probe('/health', refused), false);
    } finally {
      await s.stop();
    }
  });

  it('probes an IPv6 loopback address', async (t) => {
    const s = server(0, '::1');
    try {
      await s.start();
    } catch {
      t.skip('::1 is not available here');
      return;
    }
    try {
      assert.equal(await httpProbe('/health')(instance('v6', s.port, '::1'), AbortSignal.timeout(2_000)), true);
      assert.equal(s.hits, 1);
    } finally {
      await s.stop();
    }
  });
});
