/**
 * The layouts' bytes against fixtures derived from the Go sources (go-zero at
 * 11f21098ddd95a58f801920fea4f0543d4d01586, go-micro v5.30.0 = 307b94aab716ced1f3f6ad8673221dea4ce868e8),
 * each citing where its shape comes from. What Go's own json.Marshal writes is checked against a real Go
 * program in test/registry-go-interop.test.ts.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { IKeyValue } from 'etcd3';
import { addressId, encodeMicroService, etcdLayout, goString } from './etcd-layout.js';
import type { ServiceInstance } from './types.js';

const kv = (key: string, value: string): IKeyValue => ({ key: Buffer.from(key), value: Buffer.from(value), mod_revision: '7' }) as IKeyValue;

/** Fixtures: what the Go side writes for a registration, byte for byte, and where that comes from. */
const GO_ZERO_WRITES = [
  {
    // publisher.go:185-197: Grant(TimeToLive = 10, clients.go:15), then Put(makeEtcdKey(key, lease), value, WithLease);
    // clients.go:39-41 makeEtcdKey = fmt.Sprintf("%s%c%d", key, '/', id); zrpc/internal/rpcpubserver.go:32: value = listen address
    source: 'go-zero core/discov/publisher.go:185-197, clients.go:39-41, zrpc/internal/rpcpubserver.go:32',
    root: '',
    lease: '7587869420219453957',
    instance: { id: '10.0.0.3:8080', name: 'user.rpc', address: '10.0.0.3:8080' },
    key: 'user.rpc/7587869420219453957',
    value: '10.0.0.3:8080',
  },
  {
    source: 'go-zero clients.go:39-41 with a Key holding slashes (EtcdConf.Key "/svc/user.rpc": prefix "/svc")',
    root: '/svc/',
    lease: '16',
    instance: { id: '::1:9000', name: 'user.rpc', address: '[::1]:9000' },
    key: '/svc/user.rpc/16',
    value: '[::1]:9000',
  },
] as const;

const GO_MICRO_WRITES = [
  {
    // etcd.go:130-133 encode = json.Marshal(registry.Service); registry.go:29-41 field order and tags;
    // etcd.go:246-252 one node per key; rpc_server.go:416-429 node id `<name>-<uuid>`, endpoints a made slice;
    // rpc_server.go:670-680 the five metadata keys; Go sorts map keys by bytes and escapes < > & as \u003c \u003e \u0026.
    source: 'go-micro registry/etcd/etcd.go:130-133, 141-145, 246-252; registry/registry.go:29-41; server/rpc_server.go:416-429, 670-680',
    instance: {
      id: 'greeter-0b5e3d9c-7a51-4e0c-9a8e-2f3f61c1d2aa',
      name: 'greeter',
      address: '10.0.0.7:8080',
      version: '1.2.0',
      metadata: { zone: 'a<b>&c', transport: 'http', broker: 'http', server: 'mucp', registry: 'etcd', protocol: 'mucp', Zed: 'upper' },
    },
    key: '/micro/registry/greeter/greeter-0b5e3d9c-7a51-4e0c-9a8e-2f3f61c1d2aa',
    value:
      '{"name":"greeter","version":"1.2.0","metadata":null,"endpoints":[],"nodes":[{"metadata":{"Zed":"upper","broker":"http",' +
      '"protocol":"mucp","registry":"etcd","server":"mucp","transport":"http","zone":"a\\u003cb\\u003e\\u0026c"},' +
      '"id":"greeter-0b5e3d9c-7a51-4e0c-9a8e-2f3f61c1d2aa","address":"10.0.0.7:8080"}]}',
  },
  {
    // Go's encoding/json: map keys sorted by their UTF-8 bytes ("é" is C3 A9, after "z"), U+2028/U+2029 escaped,
    // quotes and backslashes escaped, other non-ASCII written as is; an empty version is "".
    source: 'Go encoding/json (encode.go: mapEncoder sorts keys, appendString escapes) as go-micro etcd.go:131 uses it',
    instance: { id: 'n1', name: 'svc', address: '127.0.0.1:1', metadata: { é: 'x\u2028y', z: 'say "hi" \\ ü', a: '' } },
    key: '/micro/registry/svc/n1',
    value:
      '{"name":"svc","version":"","metadata":null,"endpoints":[],"nodes":[{"metadata":{"a":"","z":"say \\"hi\\" \\\\ ü","é":"x\\u2028y"},' +
      '"id":"n1","address":"127.0.0.1:1"}]}',
  },
] as const;

describe('EtcdLayout', () => {
  it('go-zero: writes <Key>/<lease id> → host:port, byte for byte as core/discov does', () => {
    const l = etcdLayout('test', 'go-zero');
    for (const f of GO_ZERO_WRITES) {
      assert.equal(l.key(f.root, f.instance, f.lease), f.key, f.source);
      assert.equal(l.encode({ ...f.instance, version: 'dropped', metadata: { also: 'dropped' } }).toString(), f.value, f.source);
      assert.deepEqual(l.decode(f.root, kv(f.key, f.value)), { instance: f.instance }, f.source);
    }
  });

  it('go-zero: reads the address as the identity, and skips keys that are not <Key>/<decimal id> or values that are not host:port', () => {
    const l = etcdLayout('test', 'go-zero');
    assert.equal(addressId('[::1]:80'), '::1:80');
    for (const [key, value] of [
      ['svc/abc', '1.2.3.4:5'],
      ['svc/0', '1.2.3.4:5'],
      ['svc', '1.2.3.4:5'],
      ['a/b/1', '1.2.3.4:5'],
      ['svc/12', 'not an address'],
      ['svc/12', '{"id":"x"}'],
    ] as const) {
      assert.ok(l.decode('', kv(key, value)).error !== undefined, `${key} → ${value}`);
    }
  });

  it('go-micro: writes /micro/registry/<service>/<node id> → the registry.Service JSON Go would, byte for byte', () => {
    const l = etcdLayout('test', 'go-micro');
    for (const f of GO_MICRO_WRITES) {
      const i = f.instance as ServiceInstance;
      assert.equal(l.key(`${l.defaultPrefix}/`, i, '0'), f.key, f.source);
      assert.equal(l.encode(i).toString(), f.value, f.source);
      const back = l.decode(`${l.defaultPrefix}/`, kv(f.key, f.value));
      assert.deepEqual(back, { instance: i }, f.source);
    }
  });

  it('go-micro: reads what a go-micro server registers (endpoints, "latest", service metadata ignored)', () => {
    const l = etcdLayout('test', 'go-micro');
    // rpc_server.go:416-429 with a handler: endpoints carry request/response values; DefaultVersion "latest" (server.go:142)
    const value =
      '{"name":"go.micro.srv.greeter","version":"latest","metadata":{"team":"x"},"endpoints":[{"request":{"name":"Request","type":"Request",' +
      '"values":[{"name":"name","type":"string","values":null}]},"response":{"name":"Response","type":"Response","values":null},' +
      '"metadata":{},"name":"Say.Hello"}],"nodes":[{"metadata":{"broker":"http","protocol":"mucp","registry":"etcd","server":"mucp",' +
      '"transport":"http"},"id":"go.micro.srv.greeter-9b1f0c1e-0d0a-4f57-8d4e-1b2c3d4e5f60","address":"192.168.1.5:41234"}]}';
    const d = l.decode('/micro/registry/', kv('/micro/registry/go.micro.srv.greeter/go.micro.srv.greeter-9b1f0c1e-0d0a-4f57-8d4e-1b2c3d4e5f60', value));
    assert.deepEqual(d, {
      instance: {
        id: 'go.micro.srv.greeter-9b1f0c1e-0d0a-4f57-8d4e-1b2c3d4e5f60',
        name: 'go.micro.srv.greeter',
        address: '192.168.1.5:41234',
        version: 'latest',
        metadata: { broker: 'http', protocol: 'mucp', registry: 'etcd', server: 'mucp', transport: 'http' },
      },
    });
    assert.ok(l.decode('/micro/registry/', kv('/micro/registry/s/n1', '{"name":"s","nodes":[{"id":"n2","address":"1.2.3.4:5"}]}')).error);
    assert.ok(l.decode('/micro/registry/', kv('/micro/registry/s/n1', 'not json')).error);
  });

  it('escapes strings as Go does: < > & U+2028 U+2029, and nothing JSON.stringify does not', () => {
    assert.equal(goString('<a href="x">&amp;</a>'), '"\\u003ca href=\\"x\\"\\u003e\\u0026amp;\\u003c/a\\u003e"');
    assert.equal(goString('\u2028\u2029'), '"\\u2028\\u2029"');
    assert.equal(goString('plain ü 😀'), '"plain ü 😀"');
    assert.equal(
      encodeMicroService({ id: 'n', name: 's', address: '1.2.3.4:5' }),
      '{"name":"s","version":"","metadata":null,"endpoints":[],"nodes":[{"metadata":{},"id":"n","address":"1.2.3.4:5"}]}',
    );
  });

  it('rejects an unknown layout with a TypeError naming the owner and the value', () => {
    assert.throws(() => etcdLayout('EtcdRegistry', 'consul'), /EtcdRegistry: layout must be one of "bulwark", "go-zero", "go-micro", got "consul"/);
  });
});
