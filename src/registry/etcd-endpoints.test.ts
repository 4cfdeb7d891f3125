/**
 * The forms of etcd members EtcdRegistry and the CLI take: a table of what each reads as, and of what is
 * refused at construction (not at the first call, after the dial timeout).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { etcdEndpoints } from './etcd-endpoints.js';
import { EtcdRegistry } from './etcd-registry.js';
import type { EtcdClient } from './etcd-client.js';

const accepted: Array<[hosts: string | string[], endpoints: string[]]> = [
  ['etcd://127.0.0.1:2379', ['http://127.0.0.1:2379']],
  ['etcd://a.example:2379,b.example:2380', ['http://a.example:2379', 'http://b.example:2380']],
  ['etcd://[::1]:2379', ['http://[::1]:2379']],
  [
    ['etcd://a:1, b:2', 'http://c:3'],
    ['http://a:1', 'http://b:2', 'http://c:3'],
  ],
  ['http://127.0.0.1:2379', ['http://127.0.0.1:2379']],
  ['https://etcd.internal:2379/', ['https://etcd.internal:2379']],
  ['http://a', ['http://a']],
  ['127.0.0.1:2379', ['http://127.0.0.1:2379']],
];

const refused: Array<[label: string, hosts: unknown]> = [
  ['etcds://', 'etcds://127.0.0.1:2379'],
  ['etcd:// without a port', 'etcd://127.0.0.1'],
  ['etcd:// with an empty member', 'etcd://a:1,'],
  ['a port out of range', 'etcd://a:65536'],
  ['a path', 'http://a:1/v3'],
  ['a bare host', 'localhost'],
  ['an empty array', []],
  ['a number', 2379],
  ['an array holding a number', ['etcd://a:1', 2]],
];

describe('etcdEndpoints', () => {
  for (const [hosts, endpoints] of accepted) {
    it(`reads ${JSON.stringify(hosts)}`, () => assert.deepEqual(etcdEndpoints('X', hosts), endpoints));
  }
  for (const [label, hosts] of refused) {
    it(`refuses ${label}, naming the owner, the forms and the value`, () => {
      assert.throws(
        () => etcdEndpoints('X', hosts),
        (err: Error) =>
          err instanceof TypeError && /^X: hosts must be etcd:\/\/host:port\[,host:port\], http\(s\):\/\/host\[:port\] or host:port .*got /.test(err.message),
      );
    });
  }
});

describe('EtcdRegistry hosts', () => {
  const fake = (): EtcdClient => ({ close() {} }) as unknown as EtcdClient;

  it('makes one client per member of an etcd:// value, over plain HTTP', async () => {
    const made: string[] = [];
    const r = new EtcdRegistry({ hosts: 'etcd://127.0.0.1:2379,127.0.0.2:2379', createClient: (h) => (made.push(h), fake()) });
    assert.deepEqual(made, ['http://127.0.0.1:2379', 'http://127.0.0.2:2379']);
    assert.deepEqual(
      r.stats().members.map((m) => m.endpoint),
      made,
    );
    await r.close();
  });

  it('refuses a form it cannot dial at construction, naming EtcdRegistry', () => {
    assert.throws(
      () => new EtcdRegistry({ hosts: ['etcds://127.0.0.1:2379'], createClient: fake }),
      /^TypeError: EtcdRegistry: hosts must be .*got "etcds:\/\/127\.0\.0\.1:2379"$/,
    );
  });
});
