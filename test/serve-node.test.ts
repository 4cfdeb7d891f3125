/**
 * One `bulwark serve` process (static membership) against a real origin server: the client API and its
 * headers, bad input (flags, group, key, unsigned peer requests, a peer answering garbage, a slow
 * client), the origin failing (stale answers, the breaker, fast errors) and coming back, and SIGTERM.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { get, runBulwark, startOrigin, startServe, status, stopAll, type ServeProc, type TestOrigin } from './serve-harness.js';
import { freePort, tempDir, waitFor } from './support/servers.js';
import { checkMetrics } from './support/prometheus.js';

// Each case is a process of its own that parses its flags and exits: four at a time.
describe('bulwark serve: flags', { concurrency: 4 }, () => {
  for (const [args, flag] of [
    [['--origin', 'http://127.0.0.1:1/{key}', '--cache-bytes', 'lots'], '--cache-bytes'],
    [['--origin', 'http://127.0.0.1:1/items'], '--origin'],
    [['--origin', 'http://127.0.0.1:1/{key}', '--listen', 'nowhere'], '--listen'],
    [['--origin', 'http://127.0.0.1:1/{key}', '--registry', 'zookeeper://x:1'], '--registry'],
    [['--origin', 'http://127.0.0.1:1/{key}', '--ttl', 'soon'], '--ttl'],
    [['--origin', 'http://127.0.0.1:1/{key}', '--colour'], '--colour'],
    [[], '--origin'],
  ] as const) {
    it(`${args.join(' ') || '(no flags)'} → exit 2 and one line naming ${flag}`, async () => {
      const r = await runBulwark(['serve', ...args]);
      assert.equal(r.code, 2, r.stderr);
      assert.equal(r.stdout, '');
      const lines = r.stderr.trimEnd().split('\n');
      assert.equal(lines.length, 1, r.stderr);
      assert.match(lines[0]!, new RegExp(`^bulwark serve: .*${flag}`));
    });
  }

  it('a bad value from the environment is named by its variable', async () => {
    const r = await runBulwark(['serve', '--origin', 'http://127.0.0.1:1/{key}'], 30_000, {
      BULWARK_ORIGIN_CONCURRENCY: 'many',
      BULWARK_PEER_SECRET: 'sixteen-chars-secret',
    });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /^bulwark serve: BULWARK_ORIGIN_CONCURRENCY must be a whole number/);
    const s = await runBulwark(['serve', '--origin', 'http://127.0.0.1:1/{key}'], 30_000, { BULWARK_PEER_SECRET: 'short' });
    assert.equal(s.code, 2);
    assert.equal(s.stderr, 'bulwark serve: BULWARK_PEER_SECRET must be at least 16 characters\n');
  });

  it('etcd that refuses connections: not ready, and the log says why', async () => {
    const closed = await freePort();
    const node = await startServe(['--origin', 'http://127.0.0.1:1/{key}', '--registry', `etcd://127.0.0.1:${closed}`], { ready: false });
    try {
      const want = `bulwark serve: not ready: cannot join bulwark-cache yet (cannot reach etcd at 127.0.0.1:${closed}: connection refused); trying again`;
      await waitFor('the not-ready line', () => node.lines.includes(want), 60_000);
      assert.equal((await fetch(`${node.url}/readyz`)).status, 503);
    } finally {
      await stopAll([node]);
    }
  });

  it('--help documents every flag with its default and exits 0', async () => {
    const r = await runBulwark(['serve', '--help']);
    assert.equal(r.code, 0);
    for (const flag of [
      '--listen',
      '--advertise',
      '--registry',
      '--peers',
      '--etcd-prefix',
      '--group',
      '--cache-bytes',
      '--hot-cache-bytes',
      '--ttl',
      '--negative-ttl',
      '--peer-secret',
      '--peer-secret-file',
      '--origin',
      '--getter',
      '--origin-timeout',
      '--origin-rate',
      '--origin-concurrency',
      '--shutdown-timeout',
    ]) {
      assert.match(r.stdout, new RegExp(`^\\s+(-\\w, )?${flag} `, 'm'), flag);
    }
    assert.match(r.stdout, /--cache-bytes <size>\s+[^]*?\(default 64MiB\)/);
  });
});

describe('bulwark serve: one node', () => {
  let origin: TestOrigin;
  let node: ServeProc;
  let garbage: Server;
  const secret = 'a-secret-of-sixteen-or-more';
  before(async () => {
    origin = await startOrigin();
    // A "peer" that answers 200 with bytes that are no GetResponse.
    garbage = createServer((_req, res) => res.end('<html>not protobuf</html>'));
    await new Promise<void>((r) => garbage.listen(0, '127.0.0.1', () => r()));
    node = await startServe([
      '--origin',
      `${origin.url}/items/{key}`,
      '--peers',
      `http://127.0.0.1:${(garbage.address() as AddressInfo).port}`,
      '--peer-secret',
      secret,
      '--request-timeout',
      '1s',
      '--headers-timeout',
      '1s',
      '--drain-delay',
      '100ms',
    ]);
  });
  after(async () => {
    await stopAll([node]);
    garbage?.closeAllConnections();
    garbage?.close();
    await origin?.close();
  });

  it('answers a value with its source: origin first, then main; a peer answering garbage is loaded around', async () => {
    const keys = Array.from({ length: 20 }, (_, i) => `item-${i}`);
    const first = await Promise.all(keys.map((k) => get(node.url, k)));
    for (const [i, r] of first.entries()) {
      assert.equal(r.status, 200, r.body);
      assert.equal(r.body, `v1:${keys[i]}`);
      assert.equal(r.source, 'origin');
    }
    const again = await get(node.url, 'item-0');
    assert.equal(again.status, 200);
    assert.ok(again.source === 'main' || again.source === 'hot', String(again.source));
    const s = await status(node.url);
    assert.ok(s.groups.default!.peerErrors! > 0, 'no key was owned by the garbage peer');
    assert.equal(s.groups.default!.localLoads, 20);
  });

  it('/metrics is BulwarkMetrics over the groups, the peer pool and the origin guards, and passes promtool; /status lists the same components', async () => {
    await get(node.url, 'metrics-key');
    const res = await fetch(`${node.url}/metrics`);
    assert.equal(res.status, 200);
    const text = await res.text();
    const local = /^bulwark_cache_local_loads_total\{name="default"\} (\d+)$/m.exec(text);
    assert.ok(local !== null && Number(local[1]) >= 1, "the default group's local loads are exposed");
    assert.match(text, /^bulwark_breaker_state\{name="origin",[^}]*state="closed"\} 1$/m);
    const lint = await checkMetrics(text);
    assert.equal(lint.code, 0, lint.output);
    const st = (await (await fetch(`${node.url}/status`)).json()) as { components: { name: string; kind: string }[] };
    const names = st.components.map((c) => c.name).sort();
    for (const want of ['default', 'origin', 'origin-bulkhead', 'origin-timeout', 'peers']) assert.ok(names.includes(want), `${want} in ${names.join(',')}`);
  });

  it('404 from the origin is a 404 (cached), an unknown group a 404 with ERR_NO_GROUP, an oversized key 414', async () => {
    const a = await get(node.url, 'missing-1');
    assert.equal(a.status, 404);
    assert.equal(a.error, 'ERR_NOT_FOUND');
    await get(node.url, 'missing-1');
    assert.equal(origin.loads.get('missing-1'), 1, 'the miss was not cached');
    const g = await get(node.url, 'x', 'nope');
    assert.equal(g.status, 404);
    assert.equal(g.error, 'ERR_NO_GROUP');
    const big = await get(node.url, 'k'.repeat(2_000));
    assert.equal(big.status, 414);
    const res = await fetch(`${node.url}/v1/groups/default/keys/x`, { method: 'POST', body: 'x' });
    assert.equal(res.status, 413);
  });

  it('refuses unsigned peer requests with 401', async () => {
    const post = await fetch(`${node.url}/_bulwark/`, { method: 'POST', body: new Uint8Array([10, 7, 100, 101, 102, 97, 117, 108, 116, 18, 1, 107]) });
    assert.equal(post.status, 401);
    const byHand = await fetch(`${node.url}/_bulwark/default/item-0`);
    assert.equal(byHand.status, 401);
  });

  it('closes a connection whose request body never ends (slowloris) within --request-timeout', async () => {
    const started = Date.now();
    await new Promise<void>((resolve, reject) => {
      const sock = connect(node.port, '127.0.0.1', () => {
        sock.write('POST /_bulwark/ HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\nhello');
      });
      sock.on('error', () => {});
      sock.resume(); // read what it answers, so that its end (and close) can come
      sock.on('close', () => resolve());
      setTimeout(() => reject(new Error('still open after 5 s')), 5_000).unref();
    });
    const took = Date.now() - started;
    assert.ok(took < 4_000, `held for ${took} ms`);
  });

  it('origin down: held keys answer stale, the breaker opens, never-held keys fail fast; origin back: fresh values', async () => {
    // A node of its own: a short TTL, and an origin timeout short enough to wait out many times.
    const node = await startServe(['--origin', `${origin.url}/items/{key}`, '--ttl', '400ms', '--origin-timeout', '300ms', '--quiet']);
    try {
      await originDown(node);
    } finally {
      await stopAll([node]);
    }
  });

  async function originDown(node: ServeProc): Promise<void> {
    await waitFor('held-1 loaded', async () => (await get(node.url, 'held-1')).status === 200, 10_000);
    origin.mode = 'hang';
    await new Promise((r) => setTimeout(r, 500)); // let held-1's 400 ms TTL (±10 %) pass
    const stale = await get(node.url, 'held-1');
    assert.equal(stale.status, 200);
    assert.equal(stale.source, 'stale');
    assert.equal(stale.body, 'v1:held-1');
    // Never-held keys: each waits out the origin timeout until the breaker drops calls.
    // SreBreaker drops with probability (total − 5 − 1.5 × accepts) / (total + 1) over 10 s: once the
    // failures outweigh the successes of the earlier tests, it refuses most loads without waiting.
    const refused: number[] = [];
    const codes = new Set<string>();
    const until = Date.now() + 60_000;
    for (let i = 0; i < 150 && refused.length < 15 && Date.now() < until; i++) {
      const t0 = Date.now();
      const r = await get(node.url, `never-${i}`);
      assert.ok(r.status >= 500, `never-${i}: ${r.status}`);
      codes.add(r.error ?? '');
      if (r.error === 'ERR_BREAKER_OPEN') refused.push(Date.now() - t0);
    }
    assert.ok(refused.length >= 15, `only ${refused.length} refused by the breaker; codes: ${[...codes].join(', ')}`);
    refused.sort((a, b) => a - b);
    assert.ok(refused[refused.length >> 1]! < 50, `refusals took ${refused[refused.length >> 1]} ms (median), the origin timeout is 300 ms`);
    const s = await status(node.url);
    assert.ok(s.origin.breaker.dropRatio > 0);
    assert.ok((s.origin.breakerRejected as number) > 0);
    // Back up, with new values: the breaker lets calls through again and fresh values replace stale ones.
    origin.version = 2;
    origin.mode = 'up';
    await waitFor('a fresh value of held-1', async () => (await get(node.url, 'held-1')).body === 'v2:held-1', 20_000);
  }

  it('SIGTERM: not ready, drains, exits 0 within its bounds', async () => {
    const t0 = Date.now();
    node.child.kill('SIGTERM');
    await waitFor(
      'readyz to fail or the node to exit',
      async () => {
        try {
          return (await fetch(`${node.url}/readyz`)).status === 503;
        } catch {
          return true;
        }
      },
      5_000,
    );
    const { code } = await node.exited;
    assert.equal(code, 0, node.lines.join('\n'));
    assert.ok(Date.now() - t0 < 5_000);
    assert.ok(
      node.lines.some((l) => l.includes('stopped')),
      node.lines.join('\n'),
    );
  });
});

describe('bulwark serve --getter', () => {
  it('loads through a JS module: a value, null for not found, a throw for an error', async () => {
    const dir = tempDir('getter');
    const file = join(dir.path, 'getter.mjs');
    writeFileSync(
      file,
      `export default async function (key, { signal, group }) {
  if (!(signal instanceof AbortSignal)) throw new Error('no signal');
  if (key === 'absent') return null;
  if (key === 'broken') throw new Error('database down');
  return group + ':' + key;
}
`,
    );
    const node = await startServe(['--getter', file, '--group', 'users', '--quiet']);
    try {
      const a = await get(node.url, 'tom', 'users');
      assert.deepEqual([a.status, a.body, a.source], [200, 'users:tom', 'origin']);
      const b = await get(node.url, 'absent', 'users');
      assert.deepEqual([b.status, b.error], [404, 'ERR_NOT_FOUND']);
      const c = await get(node.url, 'broken', 'users');
      assert.deepEqual([c.status, c.error], [502, 'ERR_LOAD_FAILED']);
      assert.match(c.body, /database down/);
    } finally {
      await stopAll([node]);
      dir.remove();
    }
  });
});
