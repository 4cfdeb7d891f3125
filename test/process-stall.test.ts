/**
 * A process blocked past its deadlines (a long GC pause, synchronous work) must not blame the
 * dependency that answered in time: the answer sits unread in the socket while the deadline passes,
 * and Node runs due timers before it polls for I/O. The instance is a process of its own, so that it
 * answers while this one is blocked; the request is written before the block, as in a real stall, and
 * the block lasts until the instance has answered and BLOCK_MS (6 deadlines) have passed, so that the
 * test does not depend on how fast the machine is. Covered: the resilient client's attempts, the policy
 * Timeout (shared deadlines and with a caller signal), and a cache peer request (HttpPool). Without core
 * DeadlineTimer every call here fails with TimeoutError (the peer request with PeerError).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import diagnostics from 'node:diagnostics_channel';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { ResilientClient } from '../src/client/index.js';
import { MemoryRegistry } from '../src/registry/index.js';
import { Timeout } from '../src/policy/index.js';
import { HttpPool } from '../src/cache/index.js';
import { canConnect, freePort, ServerProcess } from './support/servers.js';
import { tsNodeArgs } from './support/ts-node.js';

const CHILD = fileURLToPath(new URL('./support/http-instance-child.ts', import.meta.url));
/** The deadline, and the least the process blocks: 6 deadlines. */
const TIMEOUT_MS = 50;
const BLOCK_MS = 300;
/** The most it blocks waiting for the instance's answer: a bound, not a wait the test relies on. */
const MAX_BLOCK_MS = 10_000;

/** answers reads how many answers the instance has handed to the kernel (its answered-file). */
function answers(file: string): number {
  return existsSync(file) ? readFileSync(file, 'utf8').length / 'answered\n'.length : 0;
}

/**
 * blockAfterNextRequest blocks the process once undici has written the next request's headers (its
 * channel publishes just before the write; the block runs on the next tick, after it), until the
 * instance has answered it and BLOCK_MS have passed (bounded by MAX_BLOCK_MS).
 */
function blockAfterNextRequest(file: string): void {
  const expected = answers(file) + 1;
  const onSend = (): void => {
    diagnostics.unsubscribe('undici:client:sendHeaders', onSend);
    process.nextTick(() => {
      const start = performance.now();
      for (let now = start; now < start + MAX_BLOCK_MS && (now < start + BLOCK_MS || answers(file) < expected); now = performance.now());
    });
  };
  diagnostics.subscribe('undici:client:sendHeaders', onSend);
}

/** Instance is a server process of its own, and the file where it notes each answer. */
interface Instance {
  proc: ServerProcess;
  address: string;
  answered: string;
}

/** startInstance starts http-instance-child in `mode` on a free loopback port. */
async function startInstance(dir: string, mode: 'ok' | 'peer'): Promise<Instance> {
  const answered = join(dir, `answered-${mode}`);
  const port = await freePort();
  const proc = new ServerProcess(`payments-${mode}`, process.execPath, tsNodeArgs(CHILD, String(port), mode, answered), process.cwd());
  await proc.start(() => canConnect(port));
  return { proc, address: `127.0.0.1:${port}`, answered };
}

describe('a process blocked past its deadlines', () => {
  let dir: string;
  let instance: Instance;
  let peer: Instance;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'bulwark-stall-'));
    [instance, peer] = await Promise.all([startInstance(dir, 'ok'), startInstance(dir, 'peer')]);
  });
  after(async () => {
    await Promise.all([instance?.proc.kill(), peer?.proc.kill()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('HttpPool: a peer that answered during the block is read, not marked down', async () => {
    const pool = new HttpPool({ self: 'http://127.0.0.1:1', timeoutMs: TIMEOUT_MS });
    try {
      const url = `http://${peer.address}`;
      pool.setPeers('http://127.0.0.1:1', url);
      let key = 'k0';
      for (let i = 1; pool.owner(key) !== url; i++) key = `k${i}`;
      const getter = pool.pickPeer(key)!;
      // The connection is opened first, bounded in tries: a loaded machine may miss 50 ms then.
      for (let tries = 0; ; tries++) {
        const ok = await getter.get('g', key).then(
          () => true,
          () => false,
        );
        if (ok) break;
        assert.ok(tries < 50, 'the peer never answered within 50 ms');
      }
      for (let round = 0; round < 3; round++) {
        blockAfterNextRequest(peer.answered);
        assert.equal((await getter.get('g', key)).value, 'paid');
        assert.equal(getter.healthy?.(), true);
      }
    } finally {
      await pool.close();
    }
  });

  it('ResilientClient: a call answered during the block succeeds, counted against nobody', async () => {
    const registry = new MemoryRegistry();
    const client = new ResilientClient({ registry, timeoutMs: TIMEOUT_MS, maxAttempts: 1 });
    try {
      await registry.register({ id: 'pay-1', name: 'payments', address: instance.address });
      // The connection is opened with a deadline a loaded machine cannot miss; the rounds need none.
      assert.equal((await client.fetch('http://payments/pay', { timeoutMs: 10_000 })).status, 200);
      for (let round = 0; round < 3; round++) {
        blockAfterNextRequest(instance.answered);
        const res = await client.fetch('http://payments/pay');
        assert.equal(res.status, 200);
        assert.equal(await res.text(), 'paid');
      }
      const s = client.stats();
      assert.equal(s.failedAttempts, 0, JSON.stringify(s));
      assert.equal(s.succeeded, 4, JSON.stringify(s));
    } finally {
      await client.close();
      await registry.close();
    }
  });

  for (const withSignal of [false, true]) {
    it(`Timeout (${withSignal ? 'with a caller signal' : 'shared deadlines'}): a task answered during the block resolves`, async () => {
      const timeout = new Timeout({ timeoutMs: TIMEOUT_MS });
      const options = withSignal ? { signal: new AbortController().signal } : undefined;
      const ask = (signal: AbortSignal) => request(`http://${instance.address}/pay`, { signal }).then((r) => r.body.text());
      assert.equal(await ask(new AbortController().signal), 'paid'); // the connection is open (no deadline: a loaded machine cannot miss it)
      for (let round = 0; round < 3; round++) {
        blockAfterNextRequest(instance.answered);
        assert.equal(await timeout.execute(ask, options), 'paid');
      }
      assert.deepEqual(timeout.stats(), { calls: 3, timeouts: 0 });
    });
  }
});
