/**
 * `bulwark registry ls | watch` as an operator runs it: against a real etcd holding two `bulwark serve`
 * nodes, against a node's own membership (--registry memory --node), and with bad input.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { EtcdRegistry } from '../src/registry/etcd-registry.js';
import type { ServiceInstance } from '../src/registry/types.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { freePort, skipReason, waitFor } from './support/servers.js';
import {
  bulwarkArgs,
  runBulwark,
  startNodes,
  startOrigin,
  startServe,
  status,
  stopAll,
  waitMembers,
  type ServeProc,
  type TestOrigin,
} from './serve-harness.js';

const root = fileURLToPath(new URL('..', import.meta.url));

/** inTurn runs the tasks `limit` at a time and answers their results in order. */
async function inTurn<T>(limit: number, tasks: readonly (() => Promise<T>)[]): Promise<T[]> {
  const out: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < tasks.length) {
        const i = next++;
        out[i] = await tasks[i]!();
      }
    }),
  );
  return out;
}

// The bad-input test (six processes of its own, three at a time) runs beside the etcd group.
describe('bulwark registry', { concurrency: true }, () => {
  it('bad flags exit 2 with one line; an unreachable registry or node exits 1', async () => {
    const port = await freePort();
    const bad = [
      ['registry', 'list'],
      ['registry', 'ls', '--registry', 'consul://x'],
      ['registry', 'ls'],
      ['registry', 'ls', '--bogus'],
      ['registry', 'ls', '--registry', 'etcd://127.0.0.1'],
      ['registry', 'ls', '--registry', `etcd://127.0.0.1:${port}`, '--layout', 'consul'],
      ['registry', 'ls', '--registry', `etcd://127.0.0.1:${port}`, '--layout', 'go-zero'], // no common prefix: --service needed
    ];
    // The etcd runs may wait 120 s by --timeout; the cause must come long before (a process start under load aside).
    const [etcd, unresolved, node, ...flags] = await inTurn(3, [
      () => runBulwark(['registry', 'ls', '--registry', `etcd://127.0.0.1:${port}`, '--timeout', '120s'], 60_000),
      () => runBulwark(['registry', 'ls', '--registry', `etcd://nohost.invalid:2379,127.0.0.1:${port}`, '--timeout', '120s'], 60_000),
      () => runBulwark(['registry', 'ls', '--node', `http://127.0.0.1:${port}`, '--timeout', '1s']),
      ...bad.map((args) => () => runBulwark(args)),
    ]);
    for (const [i, r] of flags.entries()) {
      assert.equal(r!.code, 2, `${bad[i]!.join(' ')}: ${r!.stderr}`);
      assert.equal(r!.stderr.trimEnd().split('\n').length, 1, r!.stderr);
      assert.match(r!.stderr, /^bulwark registry: /);
    }
    assert.equal(etcd!.code, 1, etcd!.stderr);
    assert.equal(etcd!.stderr, `bulwark registry: cannot reach etcd at 127.0.0.1:${port}: connection refused\n`);
    assert.equal(unresolved!.code, 1, unresolved!.stderr);
    assert.equal(
      unresolved!.stderr,
      `bulwark registry: cannot reach etcd at nohost.invalid:2379 (name not resolved), 127.0.0.1:${port} (connection refused)\n`,
    );
    assert.equal(node!.code, 1, node!.stderr);
    assert.match(node!.stderr, /^bulwark registry: cannot read the node at http:\/\/127\.0\.0\.1:\d+: ECONNREFUSED/);
  });

  // One at a time (a nested suite would inherit `concurrency: true`): the tests share the nodes, and one adds a node.
  describe('against etcd and running nodes', { skip: skipReason(etcdBinary, 'etcd'), concurrency: 1 }, () => {
    let etcd: EtcdServer;
    let origin: TestOrigin;
    let nodes: ServeProc[] = [];
    const prefix = `/registry-cmd-${process.pid}`;
    let registry: string;
    /** A serve node's flags: registered in the test's etcd under its prefix, in front of the test's origin. */
    const nodeArgs = () => [
      '--registry',
      registry,
      '--etcd-prefix',
      prefix,
      '--lease-ttl',
      '2s',
      '--origin',
      `${origin.url}/items/{key}`,
      '--drain-delay',
      '0',
      '--quiet',
    ];
    before(async () => {
      etcd = await startEtcd();
      origin = await startOrigin();
      registry = `etcd://${etcd.endpoint.replace('http://', '')}`;
      nodes = await startNodes(2, nodeArgs);
      await waitMembers(
        nodes,
        nodes.map((n) => n.url),
      );
    });
    after(async () => {
      await stopAll(nodes);
      await origin?.close();
      await etcd?.stop();
    });

    it('ls prints a table of the services and instances in etcd, or JSON', async () => {
      const r = await runBulwark(['registry', 'ls', '--registry', registry, '--etcd-prefix', prefix]);
      assert.equal(r.code, 0, r.stderr);
      const lines = r.stdout.trimEnd().split('\n');
      assert.match(lines[0]!, /^SERVICE\s+ID\s+ADDRESS\s+VERSION\s+METADATA$/);
      for (const n of nodes)
        assert.match(
          r.stdout,
          new RegExp(`^bulwark-cache\\s+127\\.0\\.0\\.1-${n.port}\\s+127\\.0\\.0\\.1:${n.port}\\s+-\\s+bulwark\\.status=/dashboard/events url=${n.url}$`, 'm'),
        );
      assert.equal(lines.at(-1), '1 service, 2 instances');
      const j = await runBulwark(['registry', 'ls', '--registry', registry, '--etcd-prefix', prefix, '--json']);
      const parsed = JSON.parse(j.stdout) as { services: { name: string; instances: { address: string }[] }[] };
      assert.deepEqual(
        parsed.services.map((s) => [s.name, s.instances.map((i) => i.address).sort()]),
        [['bulwark-cache', nodes.map((n) => `127.0.0.1:${n.port}`).sort()]],
      );
    });

    it('ls --service names the service when it has no instances', async () => {
      const r = await runBulwark(['registry', 'ls', '--registry', registry, '--etcd-prefix', prefix, '--service', 'nothere']);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, 'no instances of nothere registered\n');
      const all = await runBulwark(['registry', 'ls', '--registry', registry, '--etcd-prefix', `${prefix}-empty`]);
      assert.equal(all.stdout, 'no services registered\n');
    });

    it("ls --node reads a running node's membership", async () => {
      const r = await runBulwark(['registry', 'ls', '--node', nodes[0]!.url, '--json']);
      assert.equal(r.code, 0, r.stderr);
      const parsed = JSON.parse(r.stdout) as { services: { name: string; instances: { address: string }[] }[] };
      assert.deepEqual(parsed.services[0]!.instances.map((i) => i.address).sort(), nodes.map((n) => `127.0.0.1:${n.port}`).sort());
    });

    it('watch prints the list, then a line per change, and exits 0 at SIGINT', async () => {
      const child = spawn(process.execPath, bulwarkArgs(['registry', 'watch', '--registry', registry, '--etcd-prefix', prefix, '--json']), {
        cwd: root,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const lines: string[] = [];
      let buf = '';
      child.stdout.on('data', (d: Buffer) => {
        buf += d.toString();
        const parts = buf.split('\n');
        buf = parts.pop()!;
        lines.push(...parts);
      });
      const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
      try {
        await waitFor('the first list', () => lines.length >= 1, 20_000);
        assert.equal((JSON.parse(lines[0]!) as { type: string }).type, 'list');
        const third = await startServe(nodeArgs());
        nodes.push(third);
        const id = `127.0.0.1-${third.port}`;
        const seen = (type: string) =>
          lines.slice(1).some((l) => {
            const e = JSON.parse(l) as { type: string; instance: { id: string } };
            return e.type === type && e.instance.id === id;
          });
        await waitFor('the create event', () => seen('create'), 10_000);
        third.child.kill('SIGTERM');
        await waitFor('the delete event', () => seen('delete'), 10_000);
        child.kill('SIGINT');
        assert.equal(await exited, 0);
      } finally {
        child.kill('SIGKILL');
      }
    });

    it('serve is ready only once its ring equals what etcd lists: peers registered before it are on its ring at its first /readyz 200', async () => {
      const service = 'ready-check';
      const writer = new EtcdRegistry({ hosts: registry, prefix });
      const peers = await Promise.all([0, 1, 2].map(async () => `http://127.0.0.1:${await freePort()}`));
      let node: ServeProc | undefined;
      try {
        for (const [i, url] of peers.entries())
          await writer.register({ id: `peer-${i}`, name: service, address: url.slice('http://'.length), metadata: { url } });
        node = await startServe([
          '--registry',
          registry,
          '--etcd-prefix',
          prefix,
          '--service',
          service,
          '--lease-ttl',
          '2s',
          '--origin',
          `${origin.url}/items/{key}`,
          '--drain-delay',
          '0',
        ]);
        // startServe answered at the first /readyz 200: the ring at that moment holds every peer etcd listed.
        assert.deepEqual((await status(node.url)).membership.members, [...peers, node.url].sort());
        assert.ok(
          node.lines.some((l) => l === 'bulwark serve: ready; ring of 4 from etcd, equal to its listing'),
          node.lines.join('\n'),
        );
      } finally {
        if (node !== undefined) await stopAll([node]);
        await writer.close();
      }
    });
  });

  describe('watch against an etcd that dies and comes back', { skip: skipReason(etcdBinary, 'etcd') }, () => {
    it("prints every change made while it starts and after etcd is SIGKILLed and restarted: its view ends equal to etcd's", async () => {
      const etcd = await startEtcd();
      const prefix = `/registry-watch-restart-${process.pid}`;
      const writer = new EtcdRegistry({ hosts: etcd.endpoint, prefix, ttlMs: 60_000 });
      const child = spawn(
        process.execPath,
        bulwarkArgs(['registry', 'watch', '--registry', `etcd://${etcd.endpoint.replace('http://', '')}`, '--etcd-prefix', prefix, '--json']),
        { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      const lines: string[] = [];
      let buf = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => {
        buf += d.toString();
        const parts = buf.split('\n');
        buf = parts.pop()!;
        lines.push(...parts);
      });
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
      // the view the command printed: its list, then each change
      const view = () => {
        const ids = new Set<string>();
        for (const l of lines) {
          const e = JSON.parse(l) as { type: string; services?: { instances: { id: string }[] }[]; instance?: { id: string } };
          if (e.type === 'list') for (const s of e.services!) for (const i of s.instances) ids.add(i.id);
          else if (e.type === 'delete') ids.delete(e.instance!.id);
          else ids.add(e.instance!.id);
        }
        return [...ids].sort();
      };
      const inst = (id: string): ServiceInstance => ({ name: 'churn', id, address: '127.0.0.1:9' });
      try {
        // changes while the command lists and opens its watch: each lands before, between or after them
        for (let i = 0; i < 300 && (lines.length === 0 || i < 40); i++) {
          await writer.register(inst(`c${i}`));
          if (i % 3 === 2) await writer.deregister(inst(`c${i - 1}`));
        }
        assert.ok(lines.length > 0, `no list within 300 changes: ${stderr}`);
        await etcd.kill();
        // the outage lasts 1 s (the scenario, not a wait for something): longer than a reconnect attempt
        await new Promise((r) => setTimeout(r, 1_000));
        await etcd.restart();
        await writer.register(inst('after-1'));
        await writer.deregister(inst('c0'));
        await writer.register(inst('after-2'));
        await writer.register(inst('end'));
        await waitFor('the command to print the last change', () => view().includes('end') || child.exitCode !== null, 20_000);
        assert.equal(child.exitCode, null, `the command exited (${child.exitCode}) after etcd's restart: ${stderr}`);
        const truth = (await writer.getService('churn')).map((i) => i.id).sort();
        assert.deepEqual(view(), truth);
        child.kill('SIGINT');
        assert.equal(await exited, 0);
      } finally {
        child.kill('SIGKILL');
        await writer.close();
        await etcd.stop();
      }
    });
  });
});
