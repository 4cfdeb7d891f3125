/** The fleet's store interface: what a fleet view needs of Redis, etcd or memory. */
import type { Disposer } from '../core/events.js';
import type { FleetJoin } from '../breaker/types.js';
import type { FleetReport } from './quorum.js';

/** FleetEvent is what a store's watch delivers: a report, a reporter gone (TTL or leave), a new generation. */
export type FleetEvent = { type: 'report'; report: FleetReport } | { type: 'gone'; caller: string } | { type: 'generation'; gen: number };

/** FleetSnapshot is a dependency's live reports and generation, read at once. */
export interface FleetSnapshot {
  reports: FleetReport[];
  gen: number;
}

/** PermitAnswer is a probe permit request's answer: granted or not, and when the current permit period ends. */
export interface PermitAnswer {
  granted: boolean;
  /** Milliseconds until the current permit period ends (a refused caller asks again then). */
  periodLeftMs: number;
  /** When the current permit period began, in milliseconds on the store's clock: it names the period. */
  periodStart: number;
}

/**
 * FleetStore is where a fleet keeps, per dependency key: each process's report (with a TTL the store
 * enforces), the generation, and the probe permits. Every method may reject (the store is down); the
 * fleet view then falls back to the local breaker. `join` makes a breaker's fleet view on this store.
 */
export interface FleetStore extends FleetJoin {
  /** This process's caller id: unique per process (and per store). */
  readonly callerId: string;
  /** publish stores this process's report for `key`, kept for `ttlMs`, and tells the watchers. */
  publish(key: string, report: FleetReport, ttlMs: number): Promise<void>;
  /** snapshot reads the live reports and the generation of `key`. */
  snapshot(key: string): Promise<FleetSnapshot>;
  /** watch subscribes to `key`'s events; `onStatus(false)` when the subscription is lost, `true` when back. */
  watch(key: string, listener: (event: FleetEvent) => void, onStatus: (up: boolean) => void): Disposer;
  /** takePermit takes one of `limit` probe permits of the current `periodMs` period of generation `gen`. */
  takePermit(key: string, gen: number, limit: number, periodMs: number): Promise<PermitAnswer>;
  /**
   * probeResult counts a probe's outcome in the current permit period of `gen`; once `needed` probes of
   * the period succeeded and none failed, the generation moves on (the fleet closes). Answers the generation now.
   */
  probeResult(key: string, gen: number, ok: boolean, needed: number): Promise<number>;
  /** leave removes this process's report for `key`. */
  leave(key: string): Promise<void>;
  /** close releases the store's connections (those it made) and timers. */
  close(): Promise<void>;
}
