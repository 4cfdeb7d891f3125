/**
 * bulwark and a Go fleet on one real etcd: a Go program (test/support/go-registry-peer.go, built from
 * Debian's etcd 3.4 client) registers and subscribes as go-zero's core/discov and go-micro's etcd
 * registry do. bulwark finds what Go registers, Go finds what bulwark registers (reading it as those
 * frameworks would), go-zero instances hold a lease each, and one address under several keys is one
 * instance on both sides.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { Etcd3 } from 'etcd3';
import { EtcdRegistry } from '../src/registry/etcd-registry.js';
import { encodeMicroService } from '../src/registry/etcd-layout.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { buildGo, startGo, type GoBuild, type GoProcess } from './support/go-program.js';
import { collect } from './support/collect-watch.js';
import { skipReason, waitFor } from './support/servers.js';
import { bulwarkArgs, runBulwark } from './serve-harness.js';
import { spawn } from 'node:child_process';

const SOURCE = fileURLToPath(new URL('./support/go-registry-peer.go', import.meta.url));
const etcdSkip = skipReason(etcdBinary, 'etcd');
const build: GoBuild =
  etcdSkip !== undefined ? { skip: etcdSkip } : await buildGo(SOURCE, [{ importPath: 'go.etcd.io/etcd/clientv3', debian: 'golang-etcd-server-dev' }]);
const skip = 'skip' in build ? build.skip : undefined;

describe('a Go fleet on the same etcd (go-zero and go-micro, re-implemented from their sources)', { skip }, () => {
  let etcd: EtcdServer;
  let raw: Etcd3;
  const procs: GoProcess[] = [];
  const registries: EtcdRegistry[] = [];
  let seq = 0;
  const name = () => `svc-${process.pid}-${++seq}`;

  before(async () => {
    etcd = await startEtcd();
    raw = new Etcd3({ hosts: etcd.endpoint });
  });
  after(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    for (const r of registries) await r.close();
    raw?.close();
    await etcd?.stop();
    if ('remove' in build) build.remove();
  });

  const go = (...args: string[]) => {
    const p = startGo((build as { binary: string }).binary, ['-etcd', etcd.endpoint, ...args]);
    procs.push(p);
    return p;
  };
  const registry = (layout: 'go-zero' | 'go-micro', ttlMs = 2_000) => {
    const r = new EtcdRegistry({ hosts: etcd.endpoint, layout, ttlMs });
    registries.push(r);
    return r;
  };

  it('go-zero: a zrpc client (subscriber) dials what bulwark registers; each instance holds a lease of its own, its key naming it', async () => {
    const svc = name();
    const sub = go('-mode', 'zero-sub', '-key', svc);
    await sub.expect(/^READY$/);
    const r = registry('go-zero');
    await r.register({ id: 'a', name: svc, address: '127.0.0.1:7001', version: '9', metadata: { w: '1' } });
    await r.register({ id: 'b', name: svc, address: '127.0.0.1:7002' });
    await sub.expect(/^VALUES 127\.0\.0\.1:7001,127\.0\.0\.1:7002$/);
    const kvs = (await raw.getAll().prefix(`${svc}/`).exec()).kvs;
    assert.equal(kvs.length, 2);
    for (const kv of kvs) {
      assert.equal(kv.key.toString(), `${svc}/${kv.lease}`, 'the key names its own lease, in decimal');
      assert.match(kv.value.toString(), /^127\.0\.0\.1:700[12]$/, 'the value is the plain address');
    }
    assert.notEqual(kvs[0]!.lease, kvs[1]!.lease, 'one lease per instance');
    assert.equal(r.stats().leases, 2);
    // b moves: same lease and key, a new address — another instance in this layout: a delete and a create
    const w = await collect(r, svc);
    await r.register({ id: 'b', name: svc, address: '127.0.0.1:7003' });
    await sub.expect(/^VALUES 127\.0\.0\.1:7001,127\.0\.0\.1:7003$/);
    await waitFor('the move through the watch', () => w.events.length >= 2);
    assert.deepEqual(
      w.events.map((e) => [e.type, e.instance.id]),
      [
        ['delete', '127.0.0.1:7002'],
        ['create', '127.0.0.1:7003'],
      ],
    );
    await w.stop();
    await r.deregister({ id: 'a', name: svc, address: '127.0.0.1:7001' });
    await sub.expect(/^VALUES 127\.0\.0\.1:7003$/);
  });

  it('go-zero: bulwark finds and watches what a go-zero publisher registers, one address under several keys is one instance, gone once every lease expires', async () => {
    const svc = name();
    const r = registry('go-zero');
    const p1 = go('-mode', 'zero-pub', '-key', svc, '-value', '127.0.0.1:7101', '-ttl', '2');
    const key1 = (await p1.expect(/^REGISTERED (\S+)$/))[1]!;
    assert.match(key1, new RegExp(`^${svc}/\\d+$`));
    await waitFor('the Go instance in bulwark', async () => (await r.getService(svc).catch(() => [])).length === 1);
    assert.deepEqual(await r.getService(svc), [{ id: '127.0.0.1:7101', name: svc, address: '127.0.0.1:7101' }]);
    const w = await collect(r, svc); // opened after: the instance is in its first listing, not in an event
    // a second publisher of the same address (a restart before the old lease expired): still one instance
    const p2 = go('-mode', 'zero-pub', '-key', svc, '-value', '127.0.0.1:7101', '-ttl', '2');
    await p2.expect(/^REGISTERED /);
    assert.equal((await raw.getAll().prefix(`${svc}/`).keys()).length, 2);
    assert.equal((await r.getService(svc)).length, 1);
    await p1.stop();
    await waitFor('the first key expired', async () => (await raw.getAll().prefix(`${svc}/`).keys()).length === 1, 8_000);
    assert.equal((await r.getService(svc)).length, 1);
    await p2.stop();
    await waitFor('the last key expired', async () => w.events.some((e) => e.type === 'delete'), 8_000);
    assert.deepEqual(
      w.events.map((e) => [e.type, e.instance.id]),
      [['delete', '127.0.0.1:7101']],
      'one delete, after the last key went',
    );
    await w.stop();
  });

  it('go-zero: a publisher puts its key back when bulwark deletes it, and bulwark sees no change', async () => {
    const svc = name();
    const r = registry('go-zero');
    const p = go('-mode', 'zero-pub', '-key', svc, '-value', '127.0.0.1:7201', '-ttl', '5');
    const key = (await p.expect(/^REGISTERED (\S+)$/))[1]!;
    await waitFor('registered', async () => (await r.getService(svc).catch(() => [])).length === 1);
    await raw.delete().key(key).exec();
    await waitFor('the key put back', async () => (await raw.get(key).string()) === '127.0.0.1:7201', 5_000);
  });

  it("go-micro: a go-micro client reads bulwark's registration byte for byte as Go writes it (several metadata keys, < > &)", async () => {
    const svc = name();
    const sub = go('-mode', 'micro-sub', '-service', svc);
    await sub.expect(/^READY$/);
    const r = registry('go-micro');
    const instance = {
      id: `${svc}-1`,
      name: svc,
      address: '127.0.0.1:7301',
      version: '1.0.0',
      metadata: { zone: 'eu<1>&2', protocol: 'grpc', b: 'x', A: 'y', é: 'ü' },
    };
    await r.register(instance);
    const m = await sub.expect(/^MICRO (\{"exact":true,"nodes":\[\{.*)$/);
    assert.deepEqual(JSON.parse(m[1]!), {
      exact: true,
      nodes: [{ id: instance.id, address: instance.address, version: '1.0.0', metadata: instance.metadata }],
    });
    assert.equal(await raw.get(`/micro/registry/${svc}/${svc}-1`).string(), encodeMicroService(instance));
    const lease = (await raw.getAll().prefix(`/micro/registry/${svc}/`).exec()).kvs[0]!.lease;
    assert.notEqual(lease, '0', 'under a lease of the register TTL');
  });

  it('bulwark registry ls | watch --layout: reads what the Go side registered', async () => {
    const zsvc = name();
    const msvc = name();
    const p = go('-mode', 'zero-pub', '-key', zsvc, '-value', '127.0.0.1:7501', '-ttl', '5');
    await p.expect(/^REGISTERED /);
    const at = `etcd://${etcd.endpoint.replace('http://', '')}`;
    const ls = await runBulwark(['registry', 'ls', '--registry', at, '--layout', 'go-zero', '--service', zsvc, '--json']);
    assert.equal(ls.code, 0, ls.stderr);
    assert.deepEqual(JSON.parse(ls.stdout), { services: [{ name: zsvc, instances: [{ id: '127.0.0.1:7501', address: '127.0.0.1:7501' }] }] });
    const child = spawn(process.execPath, bulwarkArgs(['registry', 'watch', '--registry', at, '--layout', 'go-micro', '--json']), {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: string[] = [];
    let buf = '';
    child.stdout.on('data', (d: Buffer) => {
      const parts = (buf + d.toString()).split('\n');
      buf = parts.pop()!;
      lines.push(...parts);
    });
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    try {
      await waitFor('the first list', () => lines.length >= 1, 20_000);
      const m = go('-mode', 'micro-pub', '-service', msvc, '-address', '127.0.0.1:7502', '-ttl', '5');
      await m.expect(/^REGISTERED /);
      await waitFor('the create event', () => lines.slice(1).some((l) => (JSON.parse(l) as { type: string; service: string }).service === msvc), 10_000);
      const e = JSON.parse(lines.find((l) => l.includes(msvc))!) as { type: string; instance: { address: string; metadata: Record<string, string> } };
      assert.equal(e.type, 'create');
      assert.equal(e.instance.address, '127.0.0.1:7502');
      assert.equal(e.instance.metadata.protocol, 'mucp');
      child.kill('SIGINT');
      assert.equal(await exited, 0);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it("go-micro: bulwark finds a go-micro server's node: id <service>-<uuid>, its version, its five metadata keys and its own", async () => {
    const svc = name();
    const r = registry('go-micro');
    const w = await collect(r, svc);
    const p = go('-mode', 'micro-pub', '-service', svc, '-address', '127.0.0.1:7401', '-version', 'v2', '-meta', '{"zone":"<a&b>"}', '-ttl', '2');
    await p.expect(/^REGISTERED /);
    const [i] = await r.getService(svc);
    assert.match(i!.id, new RegExp(`^${svc}-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`));
    assert.deepEqual(
      { ...i, id: 'x' },
      {
        id: 'x',
        name: svc,
        address: '127.0.0.1:7401',
        version: 'v2',
        metadata: { zone: '<a&b>', transport: 'http', broker: 'http', server: 'mucp', registry: 'etcd', protocol: 'mucp' },
      },
    );
    await p.stop();
    await waitFor('the delete at lease expiry', () => w.events.some((e) => e.type === 'delete'), 8_000);
    assert.deepEqual(
      w.events.map((e) => e.type),
      ['create', 'delete'],
    );
    await w.stop();
  });
});
