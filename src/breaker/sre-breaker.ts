/**
 * SreBreaker: Google SRE adaptive throttling ("Handling Overload", client-side throttling) as go-zero's
 * `googlebreaker` builds it (core/breaker/googlebreaker.go). No states: each call is dropped with probability
 *
 *   max(0, (total − protection − w·accepts) / (total + 1))
 *
 * over a 10 s window in 40 buckets, where w starts at k = 1.5 and falls towards 1.1 as consecutive
 * buckets fail, so a dependency that keeps failing is shielded harder. While dropping, one call still
 * passes every `forcePassMs`, so the breaker always learns when the dependency is back.
 *
 * `countRejections` (default false) decides whether calls this breaker dropped count in `total`.
 * go-zero counts them, and users report breakers that stay open for minutes after the dependency
 * recovered: with drops in `total`, the few calls let through must outnumber everything dropped, and
 * their share only grows by a factor k per window. Left out, `total` is what the dependency actually
 * saw, so once the failures age out of the window (one window after recovery at most) nothing is
 * dropped; `sre-breaker.test.ts` proves it with a ManualClock. The price: while the dependency is
 * down, about √(6·rate·window) calls per window still reach it instead of a handful.
 */
import type { AdmissionToken } from '../core/admission.js';
import type { ClosedError, BreakerOpenError } from '../core/errors.js';
import { neverAborted, type Task } from '../core/guard.js';
import type { Clock } from '../core/clock.js';
import { clockOption } from '../core/validate.js';
import { getDefaultCoarseClock } from '../core/coarse-clock.js';
import { ThrottleWindow } from '../core/throttle-window.js';
import { breakerRejectChannel, breakerStateChannel } from '../core/diagnostics.js';
import type { Isolatable, Reconfigurable } from '../core/reconfigurable.js';
import type { MetricsContext, MetricsDescription } from '../core/metrics-description.js';
import { describeBreaker } from './breaker-metrics.js';
import type { Breaker, BreakerExecuteOptions, BreakerFleetOptions, FleetLink, FleetMember, SreBreakerOptions, SreBreakerStats } from './types.js';
import { badTask, executeWithOptions, isPromiseLike, isTimeout, type InternalToken } from './execute-path.js';
import { FailureReasons } from './failure-reasons.js';
import { GROUP_PLACED, GROUP_USED } from './group-slots.js';
import { primeAdmit } from './prime-admit.js';
import { RejectionCache } from './rejection-cache.js';
import { isolatedEvent, isolateReason } from './isolation.js';
import { plainSreOptions, readSreOptions, reconfiguredSreOptions, sreBreakerDefaults, type ValidSreOptions } from './sre-options.js';

export { sreBreakerDefaults };

/** The floor w falls to as buckets keep failing (go-zero `minK`). */
const MIN_K = 1.1;

/** Whether `admit()` was warmed up in this process (see primeAdmit). */
let primed = false;

/** The options a running breaker holds in fields of its own: written by the constructor and by reconfigure only. */
type Writable = { -readonly [K in 'windowMs' | 'k' | 'protection' | 'forcePassMs']: number } & { countRejections: boolean };

/** SreBreaker drops calls with a probability that follows the dependency's recent failure share. */
export class SreBreaker implements Breaker, FleetMember, Reconfigurable<SreBreakerOptions>, Isolatable {
  /**
   * Where a BreakerGroup marks its use of this breaker: declared first, so that it sits in the object's
   * first cache line, which a caller reading the breaker loads anyway. @internal
   */
  [GROUP_USED] = 0;
  /** @internal */
  [GROUP_PLACED] = 0;
  readonly name: string;
  readonly windowMs: number;
  readonly k: number;
  readonly protection: number;
  readonly forcePassMs: number;
  readonly countRejections: boolean;
  private minK: number;
  private readonly clock: Clock;
  private readonly random: () => number;
  private window: ThrottleWindow;
  /** The options it runs now, checked (what `options()` answers and `reconfigure` lays a change over). */
  private current: ValidSreOptions;
  /**
   * Whether nothing but the window can make it drop a call: no fleet pool, no isolation. The success
   * path reads this one field for both, so an isolation swaps state rather than adding a check.
   */
  private calm = true;
  /** The reason given to isolate() (while isolated). */
  private isolatedWhy: string | undefined = undefined;
  /** The fleet option it joined with (reconfigure refuses another). */
  private fleetOption: BreakerFleetOptions | undefined = undefined;
  private readonly reasons = new FailureReasons();
  private lastPass = -Infinity;
  private closed = false;
  /** The rest of the fleet's pooled requests and accepts (bulwark/fleet), 0 without a fleet or a quorum. */
  private poolRequests = 0;
  private poolAccepts = 0;
  private fleetLink: FleetLink | undefined;
  readonly kind = 'sre';
  /** The error and promise rejected calls get. @internal */
  readonly rejections: RejectionCache;

  /** Calls not counted because their caller aborted them (exported as ignored calls). */
  private ignored = 0;

  constructor(options?: SreBreakerOptions) {
    const o = readSreOptions(options);
    this.current = o;
    const name = o.name;
    this.name = name;
    this.windowMs = o.windowMs;
    this.k = o.k;
    this.protection = o.protection;
    this.forcePassMs = o.forcePassMs;
    this.countRejections = o.countRejections;
    this.clock = clockOption('SreBreaker', o.clock, getDefaultCoarseClock());
    this.random = o.random ?? Math.random;
    this.minK = Math.min(MIN_K, this.k);
    this.window = new ThrottleWindow(this.windowMs, o.buckets, this.clock.now());
    this.rejections = new RejectionCache(name, () =>
      this.isolatedWhy !== undefined
        ? `breaker "${name}" is isolated (every call dropped until reset): ${this.isolatedWhy}${this.reasons.suffix()}`
        : `breaker "${name}" is dropping calls to a failing dependency${this.reasons.suffix()}`,
    );
    if (!primed) {
      primed = true;
      primeAdmit((clock) => new SreBreaker({ clock }));
    }
    if (options?.fleet !== undefined) this.joinFleet(options.fleet);
  }

  /** The failure share at which the drop formula starts dropping (1 − 1/k): a failing reporter for the fleet. */
  get failureRate(): number {
    return 1 - 1 / this.k;
  }
  /** Calls the pooled window must hold: the protection. */
  get minimumCalls(): number {
    return Math.max(1, this.protection);
  }
  /** An SreBreaker has no open state: the fleet's probe fields do not apply (for bulwark/fleet). */
  readonly halfOpenCalls = 1;
  /** openMs is the window's length: how long a fleet's probe period lasts for an SreBreaker (for bulwark/fleet). */
  get openMs(): number {
    return this.windowMs;
  }
  /** heldByFleet is always false: an SreBreaker has no open state for a fleet to hold (for bulwark/fleet). */
  readonly heldByFleet = false;

  /** joinFleet makes the breaker fleet-aware (the `fleet` option; BreakerGroup calls it for the breakers it makes). */
  joinFleet(fleet: BreakerFleetOptions): void {
    if (fleet === null || typeof fleet !== 'object' || typeof (fleet.store as { join?: unknown } | undefined)?.join !== 'function') {
      throw new TypeError(`SreBreaker: fleet.store must be a fleet store (bulwark/fleet), got ${String((fleet as { store?: unknown } | null)?.store)}`);
    }
    if (this.fleetLink !== undefined) throw new TypeError(`SreBreaker: breaker "${this.name}" already joined a fleet`);
    this.fleetLink = fleet.store.join(this, fleet);
    this.fleetOption = fleet;
  }

  /** options answers the options the breaker runs now that `reconfigure` can change, as fresh plain data. */
  options(): Partial<SreBreakerOptions> {
    return plainSreOptions(this.current);
  }

  /**
   * reconfigure lays `partial` over the options the breaker runs now, checks the result as the
   * constructor does (same messages; a key given as undefined returns to its default) and applies all
   * of it, or throws and changes nothing. `name`, `clock`, `random` and `fleet` cannot change on a
   * running breaker (a TypeError says so). What it keeps: an isolation, the fleet's pool, the counters
   * of `stats()` and the failure reasons; the window keeps its counts unless its shape changes
   * (`windowMs`, `buckets`): then a fresh, empty window starts (it drops nothing until failures come
   * back). A new `k`, `protection`, `forcePassMs` or `countRejections` applies from the next call.
   */
  reconfigure(partial: Partial<SreBreakerOptions>): void {
    const o = reconfiguredSreOptions(this.current, partial, this.fleetOption);
    if (this.closed) return;
    const prev = this.current;
    this.current = o;
    const self = this as Writable;
    self.windowMs = o.windowMs;
    self.k = o.k;
    self.protection = o.protection;
    self.forcePassMs = o.forcePassMs;
    self.countRejections = o.countRejections;
    this.minK = Math.min(MIN_K, o.k);
    if (o.windowMs !== prev.windowMs || o.buckets !== prev.buckets) {
      const w = new ThrottleWindow(o.windowMs, o.buckets, this.clock.now());
      w.carryTotals(this.window);
      this.window = w;
    }
    this.rejections.clear();
  }

  /** isolated is true while an operator holds the breaker open with `isolate()`. */
  get isolated(): boolean {
    return this.isolatedWhy !== undefined;
  }

  /**
   * heldOpen is true while the breaker drops every call by force (isolated by an operator, or closed)
   * rather than on evidence: ResilientClient's cap and panic rule never put such an instance back in rotation.
   */
  get heldOpen(): boolean {
    return this.isolatedWhy !== undefined || this.closed;
  }

  /**
   * isolate makes the breaker drop every call until `reset()` (an operator's switch), whatever its
   * window or its fleet's pool say; the force-pass rule does not apply. `reason` (defaults to 'isolated
   * by an operator') is shown in `stats().isolatedReason`, the `breaker_isolated` metric, the status
   * snapshot, the rejection's message and the diagnostics events (`bulwark:breaker:state` closed → open,
   * `bulwark:breaker:reject`). Isolating an isolated breaker again replaces the reason.
   */
  isolate(reason?: string): void {
    const why = isolateReason('SreBreaker', reason);
    if (this.closed) return;
    const was = this.isolatedWhy;
    this.isolatedWhy = why;
    this.calm = false;
    this.rejections.clear();
    if (was === undefined && breakerStateChannel.hasSubscribers) {
      breakerStateChannel.publish({ breaker: this.name, from: 'closed', to: 'open', reason: isolatedEvent(why), at: this.clock.now() });
    }
  }

  /**
   * reset ends an isolation and empties the window (nothing is dropped until failures come back); the
   * counters of `stats()` stay. It clears local state only: a fleet's pool stays in the drop formula
   * until the fleet's next report.
   */
  reset(): void {
    if (this.closed) return;
    const was = this.isolatedWhy;
    const now = this.clock.now();
    this.isolatedWhy = undefined;
    this.calm = this.poolRequests === 0;
    this.lastPass = -Infinity;
    this.window.reset(now);
    this.rejections.clear();
    if (was !== undefined && breakerStateChannel.hasSubscribers) {
      breakerStateChannel.publish({ breaker: this.name, from: 'open', to: 'closed', reason: 'reset', at: now });
    }
  }

  /**
   * leaveFleet ends the breaker's fleet membership (a BreakerGroup calls it on eviction): it becomes a
   * plain breaker, its report leaves the store. A hold of the fleet ends with it.
   */
  async leaveFleet(): Promise<void> {
    const link = this.fleetLink;
    if (link === undefined) return;
    this.fleetLink = undefined;
    this.poolRequests = 0;
    this.poolAccepts = 0;
    this.calm = this.isolatedWhy === undefined;
    await link.close();
  }

  /** fleetCounts answers the window's requests and failures (read at the fleet's publishing rate) (for bulwark/fleet). */
  fleetCounts(): { calls: number; failures: number } {
    const w = this.window;
    w.advance(this.clock.now());
    return { calls: w.successes + w.failures, failures: w.failures };
  }

  /** fleetPool sets the rest of the fleet's pooled requests and accepts, added to the drop formula's (for bulwark/fleet). */
  fleetPool(pool: { requests: number; accepts: number } | undefined): void {
    this.poolRequests = pool?.requests ?? 0;
    this.poolAccepts = pool?.accepts ?? 0;
    this.calm = this.poolRequests === 0 && this.isolatedWhy === undefined;
    this.rejections.clear();
  }

  /** fleetHold, fleetRelease and fleetProbe do nothing: an SreBreaker has no open state to hold (for bulwark/fleet). */
  fleetHold(): void {}
  /** See fleetHold. */
  fleetRelease(): void {}
  /** See fleetHold. */
  fleetProbe(): void {}

  /**
   * admit lets in a call and returns the token to report its outcome, or throws `BreakerOpenError`.
   *
   * Kept tiny on purpose: all the admission work is in `tryAdmit()`, which never throws, so the function
   * that throws is small enough for V8 to inline into the caller's `try`, where a throw is cheapest.
   */
  admit(): AdmissionToken {
    const t = this.tryAdmit();
    if (t === undefined) throw this.rejections.error();
    return t;
  }

  /**
   * tryAdmit is admit() that answers undefined instead of throwing: for hot paths that turn a
   * rejection into something else anyway (a 503, a fallback). A JavaScript throw costs a few hundred
   * nanoseconds however cheap the error; this costs tens. Read the reason with `lastRejection()`.
   */
  tryAdmit(): AdmissionToken | undefined {
    return this.admits() ? new SreToken(this) : undefined;
  }

  /**
   * execute runs `fn` unless the breaker drops the call, and counts its outcome. `fn` receives the
   * caller's signal (or `neverAborted`); it may return a plain value, a promise, or throw. A `fn` that
   * is not a function rejects with a TypeError and counts nothing (the caller's error, not the dependency's).
   */
  execute<T>(fn: Task<T>, options?: BreakerExecuteOptions<T>): Promise<T> {
    if (options !== undefined || typeof fn !== 'function') return this.executeChecked(fn, options);
    if (!this.admits()) return this.rejections.rejected();
    let r: T | PromiseLike<T>;
    try {
      r = fn(neverAborted);
    } catch (err) {
      this.markFailure(err);
      return Promise.reject(err);
    }
    if (r instanceof Promise) return r.then(this.onValue, this.onError) as Promise<T>;
    return this.settleNonPromise(r, this.onError);
  }

  /**
   * executeChecked is `execute` for a call with options, or whose `fn` is not a function: kept apart so
   * that the common call (a function, no options) runs a body small enough to inline into its caller.
   */
  private executeChecked<T>(fn: Task<T>, options: BreakerExecuteOptions<T> | undefined): Promise<T> {
    if (typeof fn !== 'function') return badTask('SreBreaker', fn);
    let signal: AbortSignal = neverAborted;
    if (options !== undefined) {
      const s = options.signal;
      if (options.isFailure !== undefined || options.fallback !== undefined || (s !== undefined && s.aborted)) {
        return executeWithOptions(this, fn, options);
      }
      if (s !== undefined) signal = s;
    }
    if (!this.admits()) return this.rejections.rejected();
    let r: T | PromiseLike<T>;
    try {
      r = fn(signal);
    } catch (err) {
      this.countError(err, signal);
      return Promise.reject(err);
    }
    const onError = signal === neverAborted ? this.onError : this.errorCounter(signal);
    if (r instanceof Promise) return r.then(this.onValue, onError) as Promise<T>;
    return this.settleNonPromise(r, onError);
  }

  /** settleNonPromise counts the outcome of a `fn` that answered a thenable or a plain value. */
  private settleNonPromise<T>(r: T | PromiseLike<T>, onError: (err: unknown) => never): Promise<T> {
    if (isPromiseLike<T>(r)) return Promise.resolve(r).then(this.onValue, onError) as Promise<T>;
    this.markSuccess();
    return Promise.resolve(r);
  }

  /** lastRejection answers the error a call rejected now would get (its message says why). */
  lastRejection(): BreakerOpenError | ClosedError {
    return this.rejections.error();
  }

  /**
   * close retires the breaker: every later call is refused with `ClosedError`, and outcomes reported
   * after it no longer count. It holds no timer, so there is nothing else to release. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.calm = false;
    this.window.seal();
    this.rejections.close();
    await this.fleetLink?.close();
  }

  /** Symbol.asyncDispose closes the breaker (`await using b = new SreBreaker()`). */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * describeMetrics answers the breaker's metric families (`breaker_state`, `breaker_calls_total`,
   * `breaker_failure_rate`, `breaker_drop_ratio`) read from its stats at scrape time.
   */
  describeMetrics(ctx: MetricsContext): MetricsDescription {
    return describeBreaker(this, ctx, () => this.closed);
  }

  /** stats answers a snapshot of the window. */
  stats(): SreBreakerStats {
    const w = this.window;
    w.advance(this.clock.now());
    // One literal, `fleet` added after it when there is one: a spread of a conditional object in the
    // literal goes through a generic copy that cost more than the rest of stats() (a scrape reads 10 000).
    const s: SreBreakerStats = {
      successes: w.successes,
      failures: w.failures,
      drops: w.drops,
      dropRatio: this.isolatedWhy !== undefined ? 1 : Math.max(0, this.dropRatio()),
      failingBuckets: w.failingBuckets(),
      successfulCalls: w.successesTotal,
      failedCalls: w.failuresTotal,
      ignoredCalls: this.ignored,
      notPermittedCalls: w.dropsTotal,
      isolated: this.isolatedWhy !== undefined,
      isolatedReason: this.isolatedWhy,
    };
    if (this.fleetLink !== undefined) s.fleet = this.fleetLink.stats();
    return s;
  }

  /** lastFailures answers the last failure reasons, oldest first. */
  lastFailures(): string[] {
    return this.reasons.list();
  }

  /** markSuccess counts one successful call. @internal */
  markSuccess(): void {
    this.window.addSuccess(this.clock.now());
  }

  /** markFailure counts one failed call and keeps its reason. @internal */
  markFailure(err: unknown): void {
    this.window.addFailure(this.clock.now());
    this.reasons.add(err);
    this.rejections.clear();
    this.fleetLink?.failed();
  }

  private readonly onValue = <T>(value: T): T => {
    this.window.addSuccess(this.clock.now());
    return value;
  };

  private readonly onError = (err: unknown): never => {
    this.markFailure(err);
    throw err;
  };

  /**
   * errorCounter answers the rejection handler of a call carrying `signal`. Made here rather than in
   * `execute`, so that execute's common path (no signal) allocates no context for the closure.
   */
  private errorCounter(signal: AbortSignal): (err: unknown) => never {
    return (err: unknown): never => {
      this.countError(err, signal);
      throw err;
    };
  }

  /** countError counts a failure unless the caller's own signal aborted the call (a deadline still counts). */
  private countError(err: unknown, signal: AbortSignal): void {
    if (!(signal.aborted && !isTimeout(signal.reason))) this.markFailure(err);
    else this.ignored++;
  }

  /** dropRatio is the drop probability before the force-pass rule (call after advancing the window). */
  private dropRatio(): number {
    const w = this.window;
    const accepts = w.successes + this.poolAccepts;
    const total = accepts + w.failures + (this.countRejections ? w.drops : 0) + this.poolRequests - this.poolAccepts;
    const k = this.k;
    const weight = Math.max(this.minK, k - ((k - this.minK) * w.failingBuckets()) / w.buckets);
    return (total - this.protection - weight * accepts) / (total + 1);
  }

  /**
   * admits decides one call. Without failures or drops in the window (even before aging it) the drop
   * ratio cannot be positive, since w ≥ 1, unless the fleet's pool or an isolation says otherwise
   * (`calm` false): a healthy dependency's calls are admitted on three field reads, with no clock read and no window update (execute's success path is otherwise just the
   * one promise reaction).
   */
  private admits(): boolean {
    const w = this.window;
    if (w.failures === 0 && w.drops === 0 && this.calm) return true;
    return this.accept(this.clock.now());
  }

  /** accept decides one call at `now`; a dropped call is counted as a drop. */
  private accept(now: number): boolean {
    if (this.closed) return false;
    const w = this.window;
    w.advance(now);
    if (this.isolatedWhy !== undefined) return this.dropIsolated(now);
    const accepts = w.successes + this.poolAccepts;
    const total = accepts + w.failures + (this.countRejections ? w.drops : 0) + this.poolRequests - this.poolAccepts;
    // Fast exit: even the smallest weight drops nothing (always the case without failures).
    if (total - this.protection - this.minK * accepts <= 0) return true;
    return this.acceptUnderPressure(now);
  }

  /** dropIsolated drops a call while an operator isolates the breaker. */
  private dropIsolated(now: number): false {
    this.window.addDrop(now);
    if (breakerRejectChannel.hasSubscribers)
      breakerRejectChannel.publish({ breaker: this.name, kind: 'SreBreaker', state: 'dropping', isolatedReason: this.isolatedWhy });
    return false;
  }

  /** acceptUnderPressure decides a call when failures may make the breaker drop it. */
  private acceptUnderPressure(now: number): boolean {
    const w = this.window;
    const ratio = this.dropRatio();
    if (ratio <= 0) return true;
    if (now - this.lastPass >= this.forcePassMs || this.random() >= ratio) {
      this.lastPass = now;
      return true;
    }
    w.addDrop(now);
    if (breakerRejectChannel.hasSubscribers) breakerRejectChannel.publish({ breaker: this.name, kind: 'SreBreaker', state: 'dropping' });
    return false;
  }
}

/** SreToken reports the outcome of one call an SreBreaker admitted (an AdmissionToken); only its first report counts. */
class SreToken implements InternalToken {
  private b: SreBreaker | undefined;

  constructor(b: SreBreaker) {
    this.b = b;
  }

  /** success counts the call as a success. */
  success(): void {
    const b = this.b;
    if (b === undefined) return;
    this.b = undefined;
    b.markSuccess();
  }

  /** failure counts the call as a failure; `err` becomes one of the reasons in later rejections. */
  failure(err?: unknown): void {
    const b = this.b;
    if (b === undefined) return;
    this.b = undefined;
    b.markFailure(err);
  }

  /** release gives the admission back without counting the call (it did not run, or its caller cancelled it). */
  release(): void {
    this.b = undefined;
  }
}
