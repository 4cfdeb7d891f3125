// Traffic shifting on real HTTP servers on loopback: a ResilientClient's weight overrides (setWeights)
// split 10 000 calls 95/5 with P2C (the default) and with weighted round robin, and a drained instance
// (weight 0) takes no new calls while the one in flight to it finishes.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MemoryRegistry } from '../src/registry/memory-registry.js';
import { ResilientClient } from '../src/client/index.js';

async function serve(id: string, hold?: (res: ServerResponse) => boolean) {
  let hits = 0;
  const server = createServer((_req, res) => {
    hits++;
    if (hold?.(res) === true) return;
    res.writeHead(200).end(id);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    hits: () => hits,
    close: () => new Promise<void>((r) => (server.close(() => r()), server.closeAllConnections())),
  };
}

async function fleet(strategy: 'p2c' | 'weighted-round-robin', held?: (res: ServerResponse) => boolean) {
  const registry = new MemoryRegistry();
  const stable = await serve('stable');
  const canary = await serve('canary', held);
  await registry.register({ id: 'stable', name: 'shop', address: stable.address });
  await registry.register({ id: 'canary', name: 'shop', address: canary.address });
  const client = new ResilientClient({ registry, balancer: { strategy } });
  return {
    client,
    stable,
    canary,
    async close() {
      await client.close();
      await registry.close();
      await Promise.all([stable.close(), canary.close()]);
    },
  };
}

describe('ResilientClient weight overrides on real servers', () => {
  for (const strategy of ['p2c', 'weighted-round-robin'] as const) {
    it(`splits 10 000 calls 95/5 within ±2 percentage points with ${strategy}`, async (t) => {
      const f = await fleet(strategy);
      f.client.setWeights('shop', { stable: 95, canary: 5 });
      // Eight calls at a time, so that P2C's in-flight counts take part.
      let left = 10_000;
      const worker = async () => {
        while (left-- > 0) {
          const res = await f.client.fetch('http://shop/');
          assert.equal(res.status, 200);
        }
      };
      await Promise.all(Array.from({ length: 8 }, worker));
      const share = f.canary.hits() / 10_000;
      assert.equal(f.stable.hits() + f.canary.hits(), 10_000);
      t.diagnostic(`${strategy}: canary share ${share}`);
      assert.ok(Math.abs(share - 0.05) <= 0.02, `${strategy}: canary share ${share}`);
      await f.close();
    });
  }

  it('drains an instance set to 0: no new calls, the call in flight to it finishes', async () => {
    let release: (() => void) | undefined;
    const f = await fleet('p2c', (res) => {
      if (release !== undefined) return false;
      release = () => res.writeHead(200).end('canary');
      return true;
    });
    f.client.setWeights('shop', { stable: 1, canary: 1_000_000 }); // the first call goes to the canary, held there
    const inFlight = f.client.fetch('http://shop/');
    for (let t = Date.now(); release === undefined && Date.now() - t < 5_000;) await new Promise((r) => setImmediate(r));
    assert.ok(release !== undefined, 'the canary has a call in flight');
    f.client.setWeights('shop', { canary: 0 });
    const before = f.canary.hits();
    for (let i = 0; i < 500; i++) assert.equal(await (await f.client.fetch('http://shop/')).text(), 'stable');
    assert.equal(f.canary.hits(), before, 'no new call reached the drained canary');
    release();
    assert.equal(await (await inFlight).text(), 'canary');
    await f.close();
  });
});
