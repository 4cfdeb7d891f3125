/**
 * The shapes of bulwark/breaker: what every breaker offers, the per-call options of `execute`, the
 * options of each breaker and of BreakerGroup, and the snapshots their `stats()` answer.
 */
import type { AdmissionToken } from '../core/admission.js';
import type { Clock } from '../core/clock.js';
import type { BreakerOpenError } from '../core/errors.js';
import type { ExecuteOptions, Guard, Task } from '../core/guard.js';
import type { WindowOptions } from '../core/rolling-window.js';

/** BreakerExecuteOptions are the per-call options of a breaker's `execute`. */
export interface BreakerExecuteOptions<T = unknown> extends ExecuteOptions {
  /**
   * isFailure decides whether an error the task threw counts against the dependency (go-zero's
   * "acceptable"): return false for errors that are the caller's fault (a 404, a validation error), which
   * then count as successes. The error is still passed on to the caller. Defaults to every error counting.
   */
  isFailure?: ((err: unknown) => boolean) | undefined;
  /**
   * fallback answers instead of the `BreakerOpenError` when the breaker rejects the call (go-zero
   * `DoWithFallback`). It is not called when the task itself fails (use the policy module's fallback
   * for that), nor after `close()`. Defaults to none: the rejection reaches the caller.
   */
  fallback?: ((err: BreakerOpenError) => T | PromiseLike<T>) | undefined;
}

/** BreakerState is the state of a three-state breaker. */
export type BreakerState = 'closed' | 'open' | 'half-open';

/** Breaker is what every breaker offers; a BreakerGroup holds any kind of Breaker. */
export interface Breaker extends Guard {
  /** The breaker's name, used in its errors and events. */
  readonly name: string;
  /**
   * admit lets in one call and returns the token to report its outcome (`success`, `failure` or
   * `release`), or throws `BreakerOpenError`.
   */
  admit(): AdmissionToken;
  /** execute runs `fn` under the breaker: rejects with `BreakerOpenError` (or answers `fallback`) when it rejects the call. */
  execute<T>(fn: Task<T>, options?: BreakerExecuteOptions<T>): Promise<T>;
  /** close retires the breaker: later calls are refused with `ClosedError`. Optional for breakers of your own. */
  close?(): Promise<void>;
  /**
   * heldOpen is true while the breaker is open by force (an operator's isolate, its fleet's hold) rather than on
   * evidence; nothing lets a call past it. Optional: a breaker without it is never let past.
   */
  readonly heldOpen?: boolean;
  /**
   * admitAnyway admits a call the breaker would refuse on evidence, for a caller that must keep the
   * instance in rotation (ResilientClient's cap and panic), counting its outcome without moving the
   * state; undefined while `heldOpen`. Optional: without it, nothing lets a call past the breaker.
   */
  admitAnyway?(): AdmissionToken | undefined;
}

/** SreBreakerOptions configures an SreBreaker. */
export interface SreBreakerOptions extends Partial<WindowOptions> {
  /** Name used in errors. Defaults to 'sre'. */
  name?: string;
  /** Length of the window in milliseconds. Defaults to 10 000 (go-zero). */
  windowMs?: number;
  /** Number of buckets the window is made of. Defaults to 40 (go-zero: 250 ms each). */
  buckets?: number;
  /** Multiplier k on accepts (≥ 1; the SRE book suggests 2, go-zero 1.5): higher tolerates more failures. Defaults to 1.5. */
  k?: number;
  /** Calls a window may fail before anything is dropped (protects a quiet window). Defaults to 5. */
  protection?: number;
  /** While dropping, one call passes if none has for this many milliseconds. Defaults to 1 000 (go-zero). */
  forcePassMs?: number;
  /** Whether calls this breaker dropped count as requests; see the SreBreaker module comment. Defaults to false. */
  countRejections?: boolean;
  /** The time source. Defaults to the process-wide coarse clock (`getDefaultCoarseClock()`). */
  clock?: Clock;
  /** Random numbers in [0, 1) for the drop decision. Defaults to Math.random. */
  random?: () => number;
  /** Makes the breaker fleet-aware: the fleet's pooled requests and accepts join its drop formula once a quorum fails (bulwark/fleet). Defaults to none. */
  fleet?: BreakerFleetOptions;
}

/** SreBreakerStats is a snapshot of an SreBreaker's window. */
export interface SreBreakerStats {
  /** Successful calls in the window. */
  successes: number;
  /** Failed calls in the window. */
  failures: number;
  /** Calls dropped by the breaker in the window. */
  drops: number;
  /** The probability the next call is dropped (0 when nothing would be). */
  dropRatio: number;
  /** Consecutive failing buckets up to now. */
  failingBuckets: number;
  /** Since the breaker was made: calls that succeeded, failed, were not counted (their caller aborted) or were dropped. */
  successfulCalls: number;
  failedCalls: number;
  ignoredCalls: number;
  notPermittedCalls: number;
  /** Whether an operator isolated the breaker (every call dropped until `reset()`). */
  isolated: boolean;
  /** The reason given to `isolate(reason)` while isolated; undefined otherwise. */
  isolatedReason: string | undefined;
  /** The fleet view of a fleet-aware breaker; undefined without `fleet`. */
  fleet?: FleetViewStats;
}

/** OpenBackoff makes each consecutive trip (a failed half-open) stay open longer, up to a cap. */
export interface OpenBackoff {
  /** Multiplier applied to the open period on each consecutive trip (≥ 1; core's Backoff calls it the same). Defaults to 2. */
  multiplier?: number;
  /** The longest open period in milliseconds (≥ openMs). */
  maxMs: number;
}

/** CircuitBreakerOptions configures a CircuitBreaker. */
export interface CircuitBreakerOptions {
  /** Name used in errors and events. Defaults to 'circuit'. */
  name?: string;
  /** Trip when this share of the window's calls failed, in (0, 1]. Defaults to 0.5. */
  failureRate?: number;
  /** Trip when this share of the window's calls were slow, in (0, 1]. Defaults to 1 (all of them). */
  slowCallRate?: number;
  /** A call taking at least this many milliseconds is slow (> 0; Infinity turns slow-call detection off). Defaults to Infinity. */
  slowCallMs?: number;
  /** Calls the window must hold before either rate can trip the breaker (≥ 1). Defaults to 10. */
  minimumCalls?: number;
  /**
   * Length in milliseconds of the window the rates are computed over (the calls of the last `windowMs`,
   * kept in `buckets` buckets: the window shape of every module). Defaults to 60 000.
   */
  windowMs?: number;
  /** Number of buckets the time window is made of (≥ 1). Defaults to 10. */
  buckets?: number;
  /**
   * Computes the rates over the last `windowCalls` calls however long ago instead (a count window;
   * excludes `windowMs` and `buckets`). Defaults to none: the time window.
   */
  windowCalls?: number;
  /** How long the breaker stays open before probing, in milliseconds. Defaults to 30 000. */
  openMs?: number;
  /** Growth of the open period over consecutive trips. Defaults to none (always `openMs`). */
  openBackoff?: OpenBackoff;
  /** Probes half-open admits; all must succeed to close (≥ 1). Defaults to 5. */
  halfOpenCalls?: number;
  /** A probe not reported within this many milliseconds frees its permit (Infinity: never). Defaults to 10 000. */
  probeTimeoutMs?: number;
  /** The time source. Defaults to the process-wide coarse clock (`getDefaultCoarseClock()`). */
  clock?: Clock;
  /**
   * Makes the breaker fleet-aware (bulwark/fleet): it shares its window's counts with the other
   * processes that guard the same dependency, and opens on their pooled evidence. Defaults to none:
   * the breaker decides on its own calls only.
   */
  fleet?: BreakerFleetOptions;
}

/**
 * BreakerFleetOptions joins a breaker to its fleet. The store is required; bulwark/fleet has three
 * (memory, Redis, etcd). The other fields are checked by the store's `join`.
 */
export interface BreakerFleetOptions {
  /** Where the fleet's reports, generation and probe permits live. Required: there is no default store. */
  store: FleetJoin;
  /** The dependency's name in the store. Defaults to the breaker's name. */
  key?: string;
  /** Failing reporters needed to open the fleet (≥ 1). Defaults to at least 2 and at least half of the reporters. */
  quorum?: number;
  /** Calls a process's window must hold for it to count as a reporter (≥ 1). Defaults to 2. */
  minReports?: number;
  /** A report not refreshed within this many milliseconds drops out (the store enforces it too). Defaults to 5 000. */
  ttlMs?: number;
  /** Changed counts are published at most this often, in milliseconds. Defaults to 100. */
  publishMs?: number;
}

/** FleetJoin is what a breaker needs of a fleet store: joining it (implemented by bulwark/fleet's stores). */
export interface FleetJoin {
  join(member: FleetMember, options: BreakerFleetOptions): FleetLink;
}

/** FleetMember is a breaker as its fleet view sees it; CircuitBreaker and SreBreaker implement it. */
export interface FleetMember {
  readonly name: string;
  readonly kind: 'circuit' | 'sre';
  /** minimumCalls and failureRate of the pooled rule; halfOpenCalls and openMs of the fleet's probes. */
  readonly minimumCalls: number;
  readonly failureRate: number;
  readonly halfOpenCalls: number;
  readonly openMs: number;
  /** heldByFleet is true while the fleet's hold is in force (false again after an operator's isolate or reset). */
  readonly heldByFleet: boolean;
  /** fleetCounts answers the window's calls and failures now (read at the publishing rate, never per call). */
  fleetCounts(): { calls: number; failures: number };
  /** fleetHold opens the breaker on the fleet's evidence (its own half-open suppressed) with this reason. */
  fleetHold(reason: string): void;
  /** fleetRelease ends the fleet's hold: closed (the fleet's probes succeeded) or back to a local open period (the store failed). */
  fleetRelease(to: 'closed' | 'open', reason: string): void;
  /** fleetProbe gives the breaker one fleet-wide probe permit: its next call is the probe. */
  fleetProbe(): void;
  /** fleetPool hands an SreBreaker the fleet's pooled requests and accepts (undefined: local only). */
  fleetPool?(pool: { requests: number; accepts: number } | undefined): void;
}

/** FleetLink is the fleet view a breaker holds: it hears of probe outcomes and answers stats. */
export interface FleetLink {
  /** probeDone reports the outcome of a call admitted with a fleet probe permit. */
  probeDone(ok: boolean): void;
  /**
   * failed tells the view the window just counted a failed call (never called on a success): a window
   * that becomes a failing reporter is published at once rather than at the next tick.
   */
  failed(): void;
  /** stats answers the fleet view now. */
  stats(): FleetViewStats;
  close(): Promise<void>;
}

/** FleetViewStats is what a fleet-aware breaker says of its fleet in `stats().fleet`. */
export interface FleetViewStats {
  /** Whether the store answered lately; false: the breaker decides on its own calls only. */
  available: boolean;
  /** Whether the fleet holds the breaker open now. */
  holding: boolean;
  /** Live reporters (at least minReports calls) and how many of them fail at the threshold. */
  reporters: number;
  failingReporters: number;
  /** Failing reporters needed to open. */
  quorum: number;
  /** The pooled (per-reporter capped) calls and failures. */
  pooledCalls: number;
  pooledFailures: number;
  /** The fleet's generation: bumped each time its probes close it. */
  generation: number;
  /** Probe permits this process took from the store, and store operations that failed, since it joined. */
  probePermits: number;
  storeErrors: number;
}

/** StateChange is the event a CircuitBreaker emits on every transition. */
export interface StateChange {
  /** The breaker's name. */
  name: string;
  from: BreakerState;
  to: BreakerState;
  /** Clock time of the transition, in milliseconds. */
  at: number;
  /** Why: e.g. 'failure rate 60% ≥ 50% over 10 calls', 'probe failed', 'isolated', 'reset'. */
  reason: string;
}

/** CircuitBreakerStats is a snapshot of a CircuitBreaker. */
export interface CircuitBreakerStats {
  state: BreakerState;
  /** Calls, failures and slow calls in the current window (closed state). */
  calls: number;
  failures: number;
  slowCalls: number;
  /** Consecutive trips without closing in between. */
  trips: number;
  /** Whether an operator isolated the breaker (forced open until `reset()`). */
  isolated: boolean;
  /** The reason given to `isolate(reason)` while isolated; undefined otherwise. */
  isolatedReason: string | undefined;
  /** Probes in flight and probes succeeded (half-open state). */
  probesInFlight: number;
  probeSuccesses: number;
  /** Since the breaker was made: calls (probes included) that succeeded, failed, were not counted (their caller aborted, or released the token) or were refused. */
  successfulCalls: number;
  failedCalls: number;
  ignoredCalls: number;
  notPermittedCalls: number;
  /** Since the breaker was made: calls `admitAnyway()` let past the open state (counted in successfulCalls / failedCalls too). */
  bypassedCalls: number;
  /** Why the breaker is not closed: its own calls ('local'), an operator ('isolated') or its fleet ('fleet'); undefined while closed. */
  reason: 'local' | 'isolated' | 'fleet' | undefined;
  /** The fleet view of a fleet-aware breaker; undefined without `fleet`. */
  fleet?: FleetViewStats;
}

/** BreakerGroupOptions configures a BreakerGroup that makes breakers of type `B`. */
export interface BreakerGroupOptions<B extends Breaker = Breaker> {
  /** Makes the breaker for a name. Defaults to `(name) => new SreBreaker({ name })` (go-zero), allowed only when an SreBreaker is a `B`. */
  factory?: (name: string) => B;
  /** Names that get no breaker: their calls run unguarded. A list or a predicate. Defaults to none. */
  exclude?: readonly string[] | ((name: string) => boolean);
  /** A breaker unused for this many milliseconds may be evicted (isolated breakers never are). Defaults to 600 000. */
  idleMs?: number;
  /** The most breakers the group holds; the least recently used goes first. Defaults to 100 000. */
  maxBreakers?: number;
  /** The time source. Defaults to the process-wide coarse clock (`getDefaultCoarseClock()`). */
  clock?: Clock;
  /**
   * Makes every breaker the group makes fleet-aware, each under its own key (`key/name`, or the name
   * without `key`); the factory must make CircuitBreakers or SreBreakers. Defaults to none.
   */
  fleet?: BreakerFleetOptions;
}

/** BreakerGroupStats is a snapshot of a BreakerGroup. */
export interface BreakerGroupStats {
  /** Breakers held now. */
  size: number;
  /** Breakers made so far. */
  created: number;
  /** Breakers evicted so far (idle, or over `maxBreakers`). */
  evicted: number;
}
