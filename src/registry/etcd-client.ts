/**
 * The seam between EtcdRegistry and the `etcd3` client: one client per member, built so that a call
 * runs once on that member (failover, deadlines and retries are EtcdPool's: see etcd-pool.ts for why not
 * etcd3's own).
 */
import { castGrpcError, Etcd3, type IOptions, type KVClient, type LeaseClient, type WatchBuilder } from 'etcd3';
import { etcd3Options, type EtcdConnection } from './etcd-connection.js';
import type { AttemptOptions } from './etcd-pool.js';

/** gRPC reconnects fast after a member returns (gRPC's default first backoff is 1 s, growing to 120 s). */
const GRPC_OPTIONS: NonNullable<IOptions['grpcOptions']> = {
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 1000,
  'grpc.keepalive_time_ms': 10_000,
  'grpc.keepalive_timeout_ms': 5_000,
};

/** A fault-handling policy that runs the call once: moving to another member is EtcdPool's to decide. */
const once = {
  execute: <T>(fn: (ctx: { signal: AbortSignal; attempt: number }) => PromiseLike<T> | T) =>
    Promise.resolve().then(() => fn({ signal: new AbortController().signal, attempt: 1 })),
};

/**
 * etcd3's watch reconnect backoff, constant and short. On every broken watch stream etcd3's WatchManager
 * sets a Node timer to reconnect its watchers (cockatiel's exponential backoff by default: 128 ms doubling
 * to 30 s, reset only when a stream answers), never unref'd and never cleared, not even by `close()`, so
 * a process whose watch lost its stream could stay alive up to 30 s after `EtcdRegistry.close()`. That
 * timer never has anything to do for us: EtcdWatch detaches the etcd3 watcher the moment it is told the
 * stream broke (before the timer is set) and reconnects on its own clock. So the timer is kept short:
 * once it fires it finds no watcher and stops; 100 ms rather than 0 so that a watcher left attached by
 * mistake would be retried 10 times a second, not in a tight loop.
 */
const WATCH_BACKOFF: IBackoff = { duration: 100, next: () => WATCH_BACKOFF };
type IBackoff = NonNullable<NonNullable<IOptions['faultHandling']>['watchBackoff']>;

/** EtcdClient is what EtcdRegistry uses of one member's client: the seam where tests put a fake. */
export interface EtcdClient {
  readonly kv: Pick<KVClient, 'range' | 'put' | 'txn' | 'deleteRange'>;
  readonly leaseClient: Pick<LeaseClient, 'leaseGrant' | 'leaseRevoke'>;
  /** keepAlive sends one keep-alive for lease `id` and answers the TTL etcd granted, in seconds (≤ 0: the lease is gone). */
  keepAlive(id: string, options: AttemptOptions): Promise<number>;
  watch(): WatchBuilder;
  close(): void;
}

/** The deadline of etcd3's token exchange (a user and password traded for a token, at the first call). */
const AUTH_TIMEOUT_MS = 5_000;

/** createClient builds the client of one member on etcd3, with the TLS and auth of `connection` (see etcd-connection.ts). */
export function createClient(host: string, connection: EtcdConnection = {}): EtcdClient {
  const base: IOptions = {
    hosts: host,
    grpcOptions: GRPC_OPTIONS,
    faultHandling: { host: () => once as never, global: once as never, watchBackoff: WATCH_BACKOFF },
  };
  const client = new Etcd3(etcd3Options(base, connection, AUTH_TIMEOUT_MS));
  return {
    kv: client.kv,
    leaseClient: client.leaseClient,
    keepAlive: (id, o) => keepAliveOnce(client, id, o),
    watch: () => client.watch(),
    close: () => client.close(),
  };
}

/**
 * keepAliveOnce sends one keep-alive on a member's stream and answers the TTL etcd granted. The stream
 * carries the attempt's gRPC deadline, so gRPC ends it when EtcdPool has given up on the attempt; it is
 * cancelled as soon as the answer is in.
 */
function keepAliveOnce(client: Etcd3, id: string, options: AttemptOptions): Promise<number> {
  return client.leaseClient.leaseKeepAlive(options).then(
    (stream) =>
      new Promise<number>((resolve, reject) => {
        // etcd3 types the errors of unary calls (GRPCUnavailableError …) but not those of streams: type them
        // here, so that EtcdPool tells a dead member (retried elsewhere) from a refusal
        stream.on('error', (err: Error) => reject(castGrpcError(err)));
        stream.on('data', (res: { TTL: string }) => {
          resolve(Number(res.TTL));
          (stream as unknown as { cancel(): void }).cancel(); // grpc-js streams cancel; etcd3's type leaves it out
        });
        stream.write({ ID: id });
      }),
  );
}
