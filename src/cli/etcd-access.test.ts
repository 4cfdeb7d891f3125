/**
 * How the CLI reads a secured etcd's settings: flags, then the environment; TLS turns the etcd://
 * members into https://; the password never from a flag; mistakes are one line naming the flag or the
 * variable, never the password.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UsageError } from './args.js';
import { readEtcdAccess } from './etcd-access.js';
import { readServeConfig, type ServeConfig } from './serve/config.js';

const dir = mkdtempSync(join(tmpdir(), 'bulwark-etcd-access-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const passwordFile = join(dir, 'password');
writeFileSync(passwordFile, 'from-the-file\n');
const SECRET = 'Secret-From-Env-7';
const hosts = ['http://127.0.0.1:2379'];

describe('the CLI reads etcd TLS and auth settings', () => {
  it('takes nothing: plain members, no tls, no auth', () => {
    assert.deepEqual(readEtcdAccess(hosts, {}, {}), { hosts });
  });

  it('takes the user from a flag and the password from BULWARK_ETCD_PASSWORD or --etcd-password-file', () => {
    assert.deepEqual(readEtcdAccess(hosts, { 'etcd-user': 'svc' }, { BULWARK_ETCD_PASSWORD: SECRET }).auth, { username: 'svc', password: SECRET });
    assert.deepEqual(readEtcdAccess(hosts, { 'etcd-user': 'svc', 'etcd-password-file': passwordFile }, {}).auth, {
      username: 'svc',
      password: 'from-the-file',
    });
    assert.deepEqual(readEtcdAccess(hosts, {}, { BULWARK_ETCD_USER: 'svc', BULWARK_ETCD_PASSWORD_FILE: passwordFile }).auth, {
      username: 'svc',
      password: 'from-the-file',
    });
  });

  const refused: Array<[label: string, flags: Record<string, string>, env: NodeJS.ProcessEnv, message: string]> = [
    [
      'a password as a flag',
      { 'etcd-user': 'svc', 'etcd-password': SECRET },
      {},
      '--etcd-password would show the password to every user of the machine (ps): set BULWARK_ETCD_PASSWORD or give --etcd-password-file',
    ],
    ['a user without a password', { 'etcd-user': 'svc' }, {}, '--etcd-user "svc" needs a password: set BULWARK_ETCD_PASSWORD or give --etcd-password-file'],
    ['a password without a user', {}, { BULWARK_ETCD_PASSWORD: SECRET }, 'BULWARK_ETCD_PASSWORD gives a password without a user: set --etcd-user'],
    [
      'two passwords',
      { 'etcd-user': 'svc', 'etcd-password-file': passwordFile },
      { BULWARK_ETCD_PASSWORD: SECRET },
      'BULWARK_ETCD_PASSWORD and --etcd-password-file are two ways to give one password: give one',
    ],
    [
      'a password file that cannot be read',
      { 'etcd-user': 'svc', 'etcd-password-file': join(dir, 'missing') },
      {},
      '--etcd-password-file cannot be read: ENOENT',
    ],
    ['a CA flag naming a missing file', { 'etcd-ca': join(dir, 'missing.pem') }, {}, `--etcd-ca could not be read from "${join(dir, 'missing.pem')}" (ENOENT)`],
    [
      'a CA variable naming a missing file',
      {},
      { BULWARK_ETCD_CA: join(dir, 'missing.pem') },
      `BULWARK_ETCD_CA could not be read from "${join(dir, 'missing.pem')}" (ENOENT)`,
    ],
    ['a cert without its key', { 'etcd-cert': passwordFile }, {}, '--etcd-cert and --etcd-key go together, got --etcd-cert alone'],
  ];
  for (const [label, flags, env, message] of refused) {
    it(`refuses ${label}`, () => {
      assert.throws(
        () => readEtcdAccess(hosts, flags, env),
        (err: unknown) => {
          assert.ok(err instanceof UsageError, String(err));
          assert.equal(err.message, message);
          assert.ok(!err.message.includes(SECRET));
          return true;
        },
      );
    });
  }

  it('bulwark serve reads the settings from flags, BULWARK_ETCD_* and the password from the environment only', () => {
    const base = ['--origin', 'http://127.0.0.1:1/{key}', '--registry', 'etcd://127.0.0.1:2379'];
    const c = readServeConfig([...base, '--etcd-user', 'svc', '--etcd-server-name', 'etcd.test'], { BULWARK_ETCD_PASSWORD: SECRET }) as ServeConfig;
    assert.deepEqual(c.registry, {
      kind: 'etcd',
      prefix: '/bulwark/services',
      leaseTtlMs: 15_000,
      hosts: ['https://127.0.0.1:2379'],
      tls: { serverName: 'etcd.test' },
      auth: { username: 'svc', password: SECRET },
    });
    assert.throws(() => readServeConfig([...base], { BULWARK_ETCD_USER: 'svc' }), /^UsageError: BULWARK_ETCD_USER "svc" needs a password/);
    assert.throws(() => readServeConfig([...base, '--etcd-password', SECRET], {}), /unknown option --etcd-password/);
  });
});
