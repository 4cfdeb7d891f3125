/**
 * Peer deadlines on real sockets: a node waits for an owner's slow load as long as that load may take
 * (so the origin is not asked twice), and a peer request whose body never arrives is answered 408 and
 * dropped at the handler's own body deadline, on the pool's clock, not held for Node's 300 s.
 */
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect, createServer, type AddressInfo } from 'node:net';
import { ManualClock } from '../src/core/clock.js';
import { PeerError, TimeoutError } from '../src/core/errors.js';
import { HttpPool } from '../src/cache/index.js';
import { PEER_DOWN_MS } from '../src/cache/http-peer.js';
import { startCluster, startNode, type CacheNode } from './cache-nodes.js';

let nodes: CacheNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  nodes = [];
});

/** waitFor polls `cond` every 5 ms until it holds or `ms` pass. */
async function waitFor(cond: () => boolean, ms: number, what: string): Promise<void> {
  const until = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('peer deadlines', () => {
  it("waits for an owner's load as long as the getter timeout allows (past the old 2 s deadline), on the pool clock, instead of loading it again", async () => {
    const loads: string[] = [];
    // The owner's load holds until the test lets it go; time passes on the pools' clock. The asking node's
    // deadline is the group's getter timeout (10 s by default) + 1 s: just before it, it must still wait.
    const clock = new ManualClock(Date.now());
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    nodes = await startCluster(2, { clock }, () => ({
      name: 'g',
      cacheBytes: 1 << 20,
      getter: async (key) => {
        loads.push(key);
        await held;
        return `v:${key}`;
      },
    }));
    const [a, b] = nodes as [CacheNode, CacheNode];
    let key = 'slow:0';
    for (let i = 0; a.pool.owner(key) !== b.url; i++) key = `slow:${i}`;
    let settled = false;
    const answer = a.group.get(key).finally(() => (settled = true));
    await waitFor(() => loads.length === 1 && clock.pendingTimers > 0, 5_000, "the owner's load and the peer request's deadline");
    clock.advance(10_999);
    await new Promise((r) => setImmediate(r));
    assert.equal(settled, false, 'gave up on the owner before its getter timeout');
    release();
    assert.equal((await answer).toString(), `v:${key}`);
    assert.deepEqual(loads, [key], 'loaded once, by the owner');
    assert.equal(a.group.stats().peerErrors, 0);
  });

  it('answers 408 and closes a peer request whose body stalls, at bodyTimeoutMs on the pool clock', async () => {
    const clock = new ManualClock(Date.now());
    const node = await startNode({ clock, bodyTimeoutMs: 1_500 }, { name: 'g', cacheBytes: 1 << 10, getter: (k) => k });
    nodes = [node];
    const port = Number(new URL(node.url).port);
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    let closed = false;
    socket.on('data', (b) => (answer += b.toString()));
    socket.on('close', () => (closed = true));
    socket.on('error', () => {});
    await new Promise<void>((r) => socket.once('connect', () => r()));
    const timersBefore = clock.pendingTimers;
    socket.write('POST /_bulwark/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 100\r\n\r\n12345');
    // The handler is reading the body once it has set its deadline timer.
    await waitFor(() => clock.pendingTimers > timersBefore, 2_000, 'the body deadline timer');
    clock.advance(1_499);
    await new Promise((r) => setImmediate(r));
    assert.equal(answer, '', 'no answer before the deadline');
    clock.advance(1);
    await waitFor(() => closed, 2_000, 'the connection to close');
    assert.match(answer, /^HTTP\/1\.1 408 /);
    assert.match(answer, /did not arrive within 1500 ms/);
  });

  it('gives up on a silent peer at its deadline on the pool clock, then lets one request at a time try it again', async () => {
    // A peer that accepts the connection and never answers: undici's own timeouts are a minute away.
    const silent = createServer((s) => s.on('error', () => {}));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    const clock = new ManualClock(Date.now());
    const pool = new HttpPool({ self: 'http://127.0.0.1:1', timeoutMs: 60_000, clock });
    try {
      pool.setPeers(`http://127.0.0.1:${(silent.address() as AddressInfo).port}`);
      const peer = pool.peers()[0]!;
      const first = peer.get('g', 'k');
      let settled: unknown;
      first.then(
        (v) => (settled = v),
        (e: unknown) => (settled = e),
      );
      await waitFor(() => clock.pendingTimers > 0, 2_000, 'the deadline timer');
      assert.equal(peer.healthy?.(), true, 'healthy until a request fails');
      clock.advance(60_000);
      await waitFor(() => settled !== undefined, 2_000, 'the request to give up');
      assert.ok(settled instanceof PeerError, String(settled));
      assert.ok((settled as PeerError).cause instanceof TimeoutError, 'the deadline, not undici, gave up');
      assert.equal(peer.healthy?.(), false, 'down after a request found it unreachable');
      clock.advance(PEER_DOWN_MS);
      assert.equal(peer.healthy?.(), true, 'after PEER_DOWN_MS the next request may try it');
      const trial = peer.get('g', 'k2').catch((e: unknown) => e);
      assert.equal(peer.healthy?.(), false, 'while one request tries it, the others do not wait on it');
      await waitFor(() => clock.pendingTimers > 0, 2_000, 'the trial deadline timer');
      clock.advance(60_000);
      assert.ok((await trial) instanceof PeerError);
      assert.equal(peer.healthy?.(), false, 'the trial failed: down again');
    } finally {
      await pool.close();
      silent.close();
    }
  });
});
