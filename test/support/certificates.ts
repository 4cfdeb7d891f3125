/**
 * Makes TLS certificates for a test with `openssl` in a temp dir: a CA, a server certificate for
 * 127.0.0.1 / localhost signed by it, a client certificate (for etcd's `--client-cert-auth`) signed by
 * it, and a second CA that signed neither (the "wrong CA"). EC P-256 keys: fast on a loaded machine.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { findBinary, tempDir } from './servers.js';

/** opensslBinary is the openssl path, or undefined when it is not installed (see servers.ts). */
export const opensslBinary = findBinary('openssl');

/** Certificates are PEM files' paths. */
export interface Certificates {
  readonly dir: string;
  readonly ca: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly clientCert: string;
  readonly clientKey: string;
  /** A CA that signed none of the above. */
  readonly otherCa: string;
  remove(): void;
}

/** makeCertificates writes the certificates (valid one day) into a fresh temp dir. */
export function makeCertificates(): Certificates {
  if (opensslBinary === undefined) throw new Error('openssl is not installed');
  const dir = tempDir('certs');
  const p = (name: string) => join(dir.path, name);
  const run = (...args: string[]) => execFileSync(opensslBinary, args, { cwd: dir.path, stdio: ['ignore', 'ignore', 'pipe'] });
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const ca = (name: string) =>
    run('req', '-x509', ...key, '-keyout', p(`${name}.key`), '-out', p(`${name}.crt`), '-days', '1', '-subj', `/CN=bulwark test ${name}`);
  ca('ca');
  ca('other-ca');
  const leaf = (name: string, cn: string, ext: string) => {
    writeFileSync(p(`${name}.ext`), ext);
    run('req', ...key, '-keyout', p(`${name}.key`), '-out', p(`${name}.csr`), '-subj', `/CN=${cn}`);
    run(
      'x509',
      '-req',
      '-in',
      p(`${name}.csr`),
      '-CA',
      p('ca.crt'),
      '-CAkey',
      p('ca.key'),
      '-CAcreateserial',
      '-out',
      p(`${name}.crt`),
      '-days',
      '1',
      '-extfile',
      p(`${name}.ext`),
    );
  };
  leaf('server', 'etcd', 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:etcd.test\nextendedKeyUsage=serverAuth,clientAuth\n');
  // Not the name of an etcd user: etcd takes a client certificate's CN as the user when no token is sent
  leaf('client', 'bulwark-test-client', 'extendedKeyUsage=clientAuth\n');
  return {
    dir: dir.path,
    ca: p('ca.crt'),
    serverCert: p('server.crt'),
    serverKey: p('server.key'),
    clientCert: p('client.crt'),
    clientKey: p('client.key'),
    otherCa: p('other-ca.crt'),
    remove: dir.remove,
  };
}
