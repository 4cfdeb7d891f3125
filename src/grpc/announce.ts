/**
 * announceGrpc: a gRPC server's place in the registry, and its graceful shutdown in the order that
 * loses no call: at SIGTERM / SIGINT (or `close()`),
 *
 * 1. health turns NOT_SERVING (clients watching grpc.health.v1 take the instance out of rotation at once),
 * 2. after `drainMs`, the instance is deregistered (registry `announce()`; watching clients drop it),
 * 3. the server stops accepting and lets in-flight calls finish (`tryShutdown`), forced after
 *    `shutdownTimeoutMs`;
 * 4. `shutdown` resolves with the signal's name. The process is never exited here.
 */
import type { Server } from '@grpc/grpc-js';
import { systemClock, type Clock } from '../core/clock.js';
import { delay } from '../core/abort.js';
import { clockOption, integer, options as checkOptions, type OptionKeys } from '../core/validate.js';
import { announce } from '../registry/announce.js';
import type { AnnounceOptions, AnnouncementStats, Registry, ServiceInstance } from '../registry/types.js';
import type { GrpcHealth } from './health.js';

/** The keys of GrpcAnnounceOptions, all of them: any other is refused (see `options`). */
const ANNOUNCE_GRPC_KEYS = {
  server: true,
  health: true,
  signals: true,
  drainMs: true,
  shutdownTimeoutMs: true,
  clock: true,
  ttlMs: true,
  deregisterTimeoutMs: true,
  signal: true,
  onError: true,
} as const satisfies OptionKeys<GrpcAnnounceOptions>;

/** GrpcAnnounceOptions configures announceGrpc. */
export interface GrpcAnnounceOptions extends Omit<AnnounceOptions, 'signals' | 'clock'> {
  /** The server to shut down gracefully. Required. */
  server: Pick<Server, 'tryShutdown' | 'forceShutdown'>;
  /** The health service to turn NOT_SERVING first. Required. */
  health: Pick<GrpcHealth, 'shutdown'>;
  /** The signals that start the shutdown. Defaults to ['SIGTERM', 'SIGINT']. */
  signals?: readonly NodeJS.Signals[];
  /** How long between NOT_SERVING and deregistration, in ms. Defaults to 500. */
  drainMs?: number;
  /** How long in-flight calls may take to finish before the server is forced down, in ms. Defaults to 10 000. */
  shutdownTimeoutMs?: number;
  /** Time source of the waits and the renewal timer. Defaults to `systemClock`. */
  clock?: Clock;
}

/** Defaults for GrpcAnnounceOptions. */
export const grpcAnnounceDefaults = Object.freeze({
  signals: Object.freeze(['SIGTERM', 'SIGINT']) as readonly NodeJS.Signals[],
  drainMs: 500,
  shutdownTimeoutMs: 10_000,
});

/** GrpcAnnouncement is a registered gRPC server; `close()` runs the shutdown sequence without a signal. */
export interface GrpcAnnouncement extends AsyncDisposable {
  readonly instance: ServiceInstance;
  /** Resolves once the server has shut down (with the signal's name, or undefined after close()). */
  readonly shutdown: Promise<NodeJS.Signals | undefined>;
  stats(): AnnouncementStats;
  close(): Promise<void>;
}

/** announceGrpc registers `instance` and arranges the graceful shutdown described in the module comment. */
export async function announceGrpc(
  registry: Pick<Registry, 'register' | 'deregister'>,
  instance: ServiceInstance,
  options: GrpcAnnounceOptions,
): Promise<GrpcAnnouncement> {
  const o = checkOptions('announceGrpc', options, ANNOUNCE_GRPC_KEYS);
  const server = o.server;
  if (server === null || typeof server !== 'object' || typeof server.tryShutdown !== 'function')
    throw new TypeError('announceGrpc: server must be a grpc-js Server');
  if (o.health === null || typeof o.health !== 'object' || typeof o.health.shutdown !== 'function')
    throw new TypeError('announceGrpc: health must be a GrpcHealth');
  const drainMs = integer('announceGrpc', 'drainMs', o.drainMs ?? grpcAnnounceDefaults.drainMs, 0);
  const shutdownTimeoutMs = integer('announceGrpc', 'shutdownTimeoutMs', o.shutdownTimeoutMs ?? grpcAnnounceDefaults.shutdownTimeoutMs, 1);
  const clock = clockOption('announceGrpc', o.clock, systemClock);
  const signals = o.signals ?? grpcAnnounceDefaults.signals;
  const { server: _s, health, signals: _g, drainMs: _d, shutdownTimeoutMs: _t, ...rest } = o;
  const announced = await announce(registry, instance, { ...rest, clock, signals: [] });
  let resolveShutdown!: (s: NodeJS.Signals | undefined) => void;
  const shutdown = new Promise<NodeJS.Signals | undefined>((r) => (resolveShutdown = r));
  const listeners = new Map<NodeJS.Signals, () => void>();
  let ending: Promise<void> | undefined;
  const end = (signal: NodeJS.Signals | undefined): Promise<void> =>
    (ending ??= (async () => {
      for (const [s, l] of listeners) process.removeListener(s, l);
      listeners.clear();
      health!.shutdown();
      if (drainMs > 0) await delay(drainMs, undefined, { clock });
      await announced.close();
      await new Promise<void>((resolve) => {
        const timer = clock.setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, shutdownTimeoutMs);
        server.tryShutdown(() => {
          clock.clearTimeout(timer);
          resolve();
        });
      });
      resolveShutdown(signal);
    })());
  for (const s of signals) {
    const l = () => void end(s);
    listeners.set(s, l);
    process.on(s, l);
  }
  return {
    instance: announced.instance,
    shutdown,
    stats: () => announced.stats(),
    close: () => end(undefined),
    [Symbol.asyncDispose]: () => end(undefined),
  };
}
