/**
 * Starts a real etcd (Debian `etcd-server`) on free loopback ports with its data dir in a temp folder.
 * `restart()` starts it again on the same ports and data dir (after `kill()` for chaos tests).
 * `startEtcd({ tls })` serves clients over TLS only (`https://`), with client certificates required;
 * `enableAuth` turns etcd's authentication on with a root user.
 */
import { Etcd3 } from 'etcd3';
import type { Certificates } from './certificates.js';
import { canConnect, findBinary, freePort, ServerProcess, tempDir } from './servers.js';

/** etcdBinary is the etcd path, or undefined when etcd is not installed (see servers.ts). */
export const etcdBinary = findBinary('etcd');

/** EtcdServer is a running etcd a test owns. */
export interface EtcdServer {
  /** e.g. `http://127.0.0.1:23790` */
  readonly endpoint: string;
  readonly process: ServerProcess;
  /** kill SIGKILLs etcd (data dir kept). */
  kill(): Promise<void>;
  /** restart starts etcd again with the same ports and data dir. */
  restart(): Promise<void>;
  /** stop kills etcd and deletes its data dir. */
  stop(): Promise<void>;
}

/** StartEtcdOptions: how the test's etcd serves its clients. */
export interface StartEtcdOptions {
  /** Serve clients over TLS with these certificates (`--cert-file --key-file --trusted-ca-file --client-cert-auth`). */
  tls?: Certificates;
}

/** startEtcd starts etcd and waits until its client port accepts connections. */
export async function startEtcd(options: StartEtcdOptions = {}): Promise<EtcdServer> {
  if (etcdBinary === undefined) throw new Error('etcd is not installed');
  const dir = tempDir('etcd');
  const clientPort = await freePort();
  const peerPort = await freePort();
  const tls = options.tls;
  const endpoint = `${tls === undefined ? 'http' : 'https'}://127.0.0.1:${clientPort}`;
  const args = [
    '--name',
    'test',
    '--data-dir',
    `${dir.path}/data`,
    '--listen-client-urls',
    endpoint,
    '--advertise-client-urls',
    endpoint,
    '--listen-peer-urls',
    `http://127.0.0.1:${peerPort}`,
    '--initial-advertise-peer-urls',
    `http://127.0.0.1:${peerPort}`,
    '--initial-cluster',
    `test=http://127.0.0.1:${peerPort}`,
    '--log-level',
    'error',
    ...(tls === undefined ? [] : ['--cert-file', tls.serverCert, '--key-file', tls.serverKey, '--trusted-ca-file', tls.ca, '--client-cert-auth']),
  ];
  const proc = new ServerProcess('etcd', etcdBinary, args, dir.path);
  const ready = () => canConnect(clientPort);
  await proc.start(ready);
  return {
    endpoint,
    process: proc,
    kill: () => proc.kill('SIGKILL'),
    restart: () => proc.start(ready),
    stop: async () => {
      await proc.kill('SIGKILL');
      dir.remove();
    },
  };
}

/**
 * enableAuth turns authentication on in `etcd` (through `client`, which must be able to reach it): a
 * `root` user with `rootPassword` holding the root role (what `etcdctl user add root` and `auth enable`
 * do). From then on every client needs a user and password.
 */
export async function enableAuth(client: Etcd3, rootPassword: string): Promise<void> {
  await client.role('root').create();
  await client.user('root').create(rootPassword);
  await client.user('root').addRole('root');
  await client.auth.authEnable({});
}
