/**
 * The TLS and auth options every etcd client takes (EtcdRegistry, EtcdFleetStore): what is refused at
 * construction with a TypeError naming the owner, the option and the value — never the password — and
 * what each member's client is built with. (TLS and auth against a real etcd: test/registry-etcd-tls.test.ts.)
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EtcdFleetStore } from '../fleet/etcd-store.js';
import { etcdConnection, type EtcdConnection, type EtcdConnectionOptions } from './etcd-connection.js';
import { EtcdRegistry } from './etcd-registry.js';
import type { EtcdClient } from './etcd-client.js';

const dir = mkdtempSync(join(tmpdir(), 'bulwark-etcd-connection-'));
const notPem = join(dir, 'not.pem');
writeFileSync(notPem, 'not a certificate\n');
after(() => rmSync(dir, { recursive: true, force: true }));
const SECRET = 'Secret-Value-42';

const refused: Array<[label: string, options: Partial<EtcdConnectionOptions>, message: RegExp]> = [
  ['tls with http:// hosts', { hosts: 'http://127.0.0.1:2379', tls: { ca: notPem } }, /tls needs https:\/\/ hosts, got "http:\/\/127\.0\.0\.1:2379"/],
  ['tls with etcd:// hosts', { hosts: 'etcd://127.0.0.1:2379', tls: {} }, /tls needs https:\/\/ hosts/],
  [
    'https:// and plain hosts mixed',
    { hosts: ['https://a:1', 'http://b:2'] },
    /hosts must be all https:\/\/ or all plain, got \["https:\/\/a:1","http:\/\/b:2"\]/,
  ],
  [
    'a CA file that cannot be read',
    { hosts: 'https://a:1', tls: { ca: join(dir, 'missing.pem') } },
    /tls\.ca could not be read from ".*missing\.pem" \(ENOENT\)/,
  ],
  ['a CA file that is not PEM', { hosts: 'https://a:1', tls: { ca: notPem } }, /tls\.ca from ".*not\.pem" could not be used/],
  ['a CA of the wrong type', { hosts: 'https://a:1', tls: { ca: 42 as never } }, /tls\.ca must be a PEM file's path or a Buffer, got 42/],
  ['a cert without its key', { hosts: 'https://a:1', tls: { cert: notPem } }, /tls\.cert and tls\.key go together, got tls\.cert alone/],
  ['a key without its cert', { hosts: 'https://a:1', tls: { key: notPem } }, /tls\.cert and tls\.key go together, got tls\.key alone/],
  [
    'a cert and key that are not PEM',
    { hosts: 'https://a:1', tls: { cert: notPem, key: notPem } },
    /tls\.cert and tls\.key from ".*not\.pem" could not be used/,
  ],
  ['an empty server name', { hosts: 'https://a:1', tls: { serverName: '' } }, /tls\.serverName must be a non-empty string, got ""/],
  [
    'an unknown tls option',
    { hosts: 'https://a:1', tls: { certFile: notPem } as never },
    /tls: certFile is not an option; the options are ca, cert, key, serverName/,
  ],
  [
    'a user without a password',
    { hosts: 'http://a:1', auth: { username: 'svc' } as never },
    /auth\.password must be a non-empty string for user "svc", got none/,
  ],
  ['an empty password', { hosts: 'http://a:1', auth: { username: 'svc', password: '' } }, /auth\.password must be a non-empty string for user "svc", got ""/],
  [
    'a password of the wrong type',
    { hosts: 'http://a:1', auth: { username: 'svc', password: 42 as never } },
    /auth\.password must be a non-empty string for user "svc", got <hidden>/,
  ],
  ['a password without a user', { hosts: 'http://a:1', auth: { password: SECRET } as never }, /auth\.username must be a non-empty string, got undefined/],
  [
    'an unknown auth option',
    { hosts: 'http://a:1', auth: { username: 'svc', password: SECRET, user: 'x' } as never },
    /auth: user is not an option; the options are username, password/,
  ],
];

const fake = (): EtcdClient => ({ kv: {} as never, leaseClient: {} as never, keepAlive: async () => 1, watch: () => ({}) as never, close: () => undefined });

describe('etcd connection options', () => {
  for (const [owner, make] of [
    ['EtcdRegistry', (o: Partial<EtcdConnectionOptions>) => new EtcdRegistry({ ...(o as EtcdConnectionOptions), createClient: fake })],
    [
      'EtcdFleetStore',
      (o: Partial<EtcdConnectionOptions>) =>
        new EtcdFleetStore({ etcd: o.hosts!, ...(o.tls === undefined ? {} : { tls: o.tls }), ...(o.auth === undefined ? {} : { auth: o.auth }) }),
    ],
  ] as const) {
    for (const [label, options, message] of refused) {
      it(`${owner} refuses ${label} at construction`, () => {
        assert.throws(
          () => make(options),
          (err: unknown) => {
            assert.ok(err instanceof TypeError, String(err));
            assert.ok(err.message.startsWith(`${owner}`), err.message);
            assert.match(err.message, message);
            assert.ok(!err.message.includes(SECRET), `the password is in: ${err.message}`);
            return true;
          },
        );
      });
    }
  }

  it('builds every member with the connection: TLS for https:// hosts, the files read, the user and password', () => {
    const seen: Array<[string, EtcdConnection]> = [];
    const ca = Buffer.from('-----BEGIN CERTIFICATE-----\n');
    const r = new EtcdRegistry({
      hosts: ['https://a:1', 'https://b:2'],
      auth: { username: 'svc', password: SECRET },
      createClient: (h, c) => (seen.push([h, c]), fake()),
    });
    assert.deepEqual(
      seen.map(([h]) => h),
      ['https://a:1', 'https://b:2'],
    );
    assert.deepEqual(seen[0]![1], { tls: {}, auth: { username: 'svc', password: SECRET } });
    assert.ok(!JSON.stringify(r.stats()).includes(SECRET));
    // a Buffer is the PEM itself (it is parsed like a file's contents, so this one is refused)
    assert.throws(() => etcdConnection('X', { hosts: 'https://a:1', tls: { ca } }), /X: tls\.ca could not be used/);
    assert.deepEqual(etcdConnection('X', { hosts: 'etcd://a:1' }).connection, {});
  });

  it('EtcdFleetStore refuses tls or auth beside an etcd3 client of its own', async () => {
    const { Etcd3 } = await import('etcd3');
    const client = new Etcd3({ hosts: 'http://127.0.0.1:1' });
    try {
      assert.throws(
        () => new EtcdFleetStore({ etcd: client, auth: { username: 'svc', password: SECRET } }),
        /EtcdFleetStore: tls and auth are for endpoints; an etcd3 client brings its own, got auth beside one/,
      );
    } finally {
      client.close();
    }
  });
});
