/**
 * The network-fault harness itself (test/support/netfault.ts): a dropped flow is silence, not a refusal;
 * healing resumes the same connection; no chain survives close(), and a dead run's chain is swept.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tsNodeArgs } from './support/ts-node.js';
import { DelayProxy, leftoverChains, netfaultSkip, nobodyUid, PacketFilter, sweepStaleChains } from './support/netfault.js';

async function echoServer(host: string): Promise<{ server: Server; port: number }> {
  const server = createServer((s) => s.on('data', (d) => s.write(d)).on('error', () => {}));
  await new Promise<void>((r) => server.listen(0, host, () => r()));
  return { server, port: (server.address() as { port: number }).port };
}

function connected(host: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(port, host, () => resolve(s));
    s.once('error', reject);
  });
}

/** echo writes `text` and answers how long the echo took, or undefined if none came within `withinMs`. */
function echo(s: Socket, text: string, withinMs: number): Promise<number | undefined> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      s.off('data', onData);
      resolve(undefined);
    }, withinMs);
    let got = '';
    const onData = (d: Buffer) => {
      got += d.toString();
      if (got.length < text.length) return;
      clearTimeout(timer);
      s.off('data', onData);
      resolve(performance.now() - t0);
    };
    s.on('data', onData);
    s.write(text);
  });
}

describe('network faults harness', { skip: netfaultSkip }, () => {
  it('drops packets silently between two addresses and nowhere else; heal resumes the same connection', async () => {
    const a = await echoServer('127.0.0.21');
    const b = await echoServer('127.0.0.22');
    const filter = await PacketFilter.open();
    try {
      const toA = await connected('127.0.0.21', a.port);
      const toB = await connected('127.0.0.22', b.port);
      await filter.drop({ to: '127.0.0.21', toPort: a.port });
      assert.equal((await filter.rules()).length, 1);
      // Silence, not a refusal: no echo, no error, and a new connection neither opens nor fails.
      let errors = 0;
      toA.on('error', () => errors++);
      assert.equal(await echo(toA, 'cut', 300), undefined);
      const fresh = connect(a.port, '127.0.0.21');
      let outcome = 'pending';
      fresh.once('connect', () => (outcome = 'connected')).once('error', (e) => (outcome = (e as NodeJS.ErrnoException).code ?? 'error'));
      assert.notEqual(await echo(toB, 'other', 1_000), undefined, 'the other address still answers');
      assert.equal(outcome, 'pending');
      assert.equal(errors, 0);
      await filter.heal();
      assert.deepEqual(await filter.rules(), []);
      // Retransmission resumes the cut connection once healed (the first retry is ~200 ms after the write).
      assert.notEqual(await echo(toA, 'healed', 5_000), undefined, 'the cut connection resumes after heal');
      toA.destroy();
      toB.destroy();
      fresh.destroy();
    } finally {
      await filter.close();
      a.server.close();
      b.server.close();
    }
    assert.deepEqual(await leftoverChains(), []);
  });

  it("drops a uid's packets and not another's to the same address", async () => {
    const a = await echoServer('127.0.0.24');
    const filter = await PacketFilter.open();
    try {
      await filter.drop({ uid: nobodyUid, to: '127.0.0.24' });
      const tryAs = (uid: number | undefined) =>
        new Promise<string>((resolve) => {
          const child = spawn(
            process.execPath,
            [
              '-e',
              `
            const s = require('node:net').connect(${a.port}, '127.0.0.24', () => { process.stdout.write('connected'); process.exit(0); });
            s.on('error', (e) => { process.stdout.write(e.code); process.exit(0); });
            setTimeout(() => { process.stdout.write('silence'); process.exit(0); }, 1_000);`,
            ],
            { uid, stdio: ['ignore', 'pipe', 'inherit'] },
          );
          let out = '';
          child.stdout.on('data', (d: Buffer) => (out += d.toString()));
          child.on('close', () => resolve(out));
        });
      const [asNobody, asRoot] = await Promise.all([tryAs(nobodyUid), tryAs(undefined)]);
      assert.equal(asNobody, 'silence');
      assert.equal(asRoot, 'connected');
    } finally {
      await filter.close();
      a.server.close();
    }
    assert.deepEqual(await leftoverChains(), []);
  });

  it('sweeps a chain left by a run that died before its finally', async () => {
    // A child opens a filter with a rule and is SIGKILLed, as a crashed test run would be.
    const harness = new URL('./support/netfault.ts', import.meta.url).href;
    const child = spawnSync(
      process.execPath,
      [
        ...tsNodeArgs('--input-type=module'),
        '-e',
        `
      const { PacketFilter } = await import(${JSON.stringify(harness)});
      const f = await PacketFilter.open();
      await f.drop({ to: '127.0.0.23' });
      process.stdout.write(f.chain);
      process.kill(process.pid, 'SIGKILL');`,
      ],
      { encoding: 'utf8' },
    );
    const chain = child.stdout.trim();
    assert.match(chain, /^BULWARK-TEST-\d+-1$/, child.stderr);
    assert.match(execFileSync('iptables', ['-w', '-S']).toString(), new RegExp(`-A INPUT -j ${chain}`), 'the dead run left its chain');
    assert.ok((await sweepStaleChains()).includes(chain));
    assert.doesNotMatch(execFileSync('iptables', ['-w', '-S']).toString(), new RegExp(chain), 'both chains and their jumps are gone');
  });

  it('delays each direction by delayMs, in order, and takes a new delay at once', async () => {
    const a = await echoServer('127.0.0.1');
    const proxy = await DelayProxy.start({ host: '127.0.0.1', port: a.port }, { delayMs: 100 });
    try {
      const s = await connected('127.0.0.1', proxy.port);
      const rtt = await echo(s, 'slow', 5_000);
      assert.ok(rtt !== undefined && rtt >= 195, `round trip ${rtt} ms through a 100 ms proxy`);
      proxy.delayMs = 0;
      const fast = await echo(s, 'fast', 5_000);
      assert.ok(fast !== undefined && fast < 150, `round trip ${fast} ms after the delay was removed`);
      s.destroy();
    } finally {
      await proxy.close();
      a.server.close();
    }
  });
});
