/**
 * The options, defaults and stats of EtcdRegistry (etcd-registry.ts), kept apart so that the registry's
 * file holds its mechanics.
 */
import type { Clock } from '../core/clock.js';
import type { EtcdLayoutName } from './etcd-layout.js';
import type { EtcdClient } from './etcd-client.js';
import type { EtcdConnection, EtcdConnectionOptions } from './etcd-connection.js';

/**
 * EtcdRegistryOptions configures an EtcdRegistry: `hosts`, `tls` and `auth` say how to reach etcd
 * (EtcdConnectionOptions, the same for every etcd client of bulwark), the rest how to use it.
 */
export interface EtcdRegistryOptions extends EtcdConnectionOptions {
  /**
   * How instances are kept in etcd: `'bulwark'` (`<prefix>/<name>/<id>` → JSON), `'go-zero'` (`<prefix>/<name>/<lease
   * id>` → `host:port`, a lease per instance) or `'go-micro'` (`<prefix>/<name>/<node id>` → a go-micro service's
   * JSON); see docs/registry.md for what each carries. Defaults to `'bulwark'`.
   */
  layout?: EtcdLayoutName;
  /**
   * Key prefix; keys are `<prefix>/<name>/…`. Defaults to the layout's: `/bulwark/services`, `/micro/registry`,
   * and none for go-zero (keys start with the service name, go-zero's `Key`).
   */
  prefix?: string;
  /**
   * The lease TTL of instances registered without their own `ttlMs` (rounded up to whole seconds, etcd's
   * unit; etcd may raise it to its minimum). Defaults to 15 000.
   */
  ttlMs?: number;
  /** How long a call may take over every member it tries before it rejects `RegistryUnavailableError`. Defaults to 3 000. */
  dialTimeoutMs?: number;
  /** How long one attempt on one member may take before the call moves to the next. Defaults to 1 000. */
  attemptTimeoutMs?: number;
  /** How long a member that did not answer is skipped by later calls. Defaults to 1 000. */
  cooldownMs?: number;
  /** Events a watcher may have waiting before it is told to resync (`WatchResyncError`). Defaults to 1 024. */
  watchQueueSize?: number;
  /** Receives one message per skipped bad value. Defaults to `process.emitWarning`. */
  onWarning?: (message: string) => void;
  /** The clock of every timer (keep-alives, repairs, deadlines, cooldowns, watch backoff). Defaults to `systemClock`. */
  clock?: Clock;
  /** @internal Builds the client of one member: tests pass fakes. Defaults to an etcd3 client. */
  createClient?: (host: string, connection: EtcdConnection) => EtcdClient;
}

/** Defaults for EtcdRegistryOptions. */
export const etcdRegistryDefaults = Object.freeze({
  layout: 'bulwark' as EtcdLayoutName,
  /** The bulwark layout's; each layout has its own (EtcdLayout.defaultPrefix). */
  prefix: '/bulwark/services',
  ttlMs: 15_000,
  dialTimeoutMs: 3_000,
  attemptTimeoutMs: 1_000,
  cooldownMs: 1_000,
  watchQueueSize: 1024,
});

/** EtcdMemberStats is what one member of the cluster has seen of this registry. */
export interface EtcdMemberStats {
  endpoint: string;
  /** False while calls skip it (it failed within the last `cooldownMs`). */
  live: boolean;
  /** Attempts sent to it. */
  attempts: number;
  /** Attempts that failed on it. */
  failures: number;
  /** Watch streams it serves now. */
  watches: number;
}

/** EtcdRegistryStats are plain counters, read as a snapshot. */
export interface EtcdRegistryStats {
  /** Leases granted (first ones and replacements). */
  leasesGranted: number;
  /** Leases given up: etcd answered that they are gone, or their TTL passed with no confirmed keep-alive. */
  leasesLost: number;
  /** Leases held now (one per distinct TTL in use; one per instance in the go-zero layout). */
  leases: number;
  /** Keep-alives etcd answered with TTL > 0. */
  keepAlives: number;
  /** Keep-alives no member answered (retried; the lease is kept). */
  keepAliveFailures: number;
  /** Times every instance under a lease was written again (after a lease loss or a failed write). */
  rewrites: number;
  /** Watches that listed again and emitted the difference (etcd cancelled them: a compacted revision). */
  watchResyncs: number;
  /** Times a watch stream broke (or left a member cut off from its cluster) and resumed on a member (another one when there is one), without listing. */
  watchMoves: number;
  /** Linearizable reads sent to members serving a watch, to find one cut off from its cluster. */
  leaderChecks: number;
  /** Leader checks a member did not answer in time (its watches moved to another member). */
  leaderCheckFailures: number;
  /** Attempts that failed on a member and were retried (on another member, or later). */
  retried: number;
  /** Calls no member answered within their deadline. */
  unavailable: number;
  /** register/deregister changes not yet confirmed in etcd. */
  pending: number;
  /** One entry per member, in `hosts` order. */
  members: EtcdMemberStats[];
}
