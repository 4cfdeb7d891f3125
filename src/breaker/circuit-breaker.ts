/**
 * CircuitBreaker: the three-state breaker (closed / open / half-open, as in Nygard's "Release It!" and
 * resilience4j), tripping on the failure rate and on the slow-call rate.
 *
 * closed → open when, over the window, at least `minimumCalls` calls were seen and the failure rate
 * reached `failureRate` or the slow-call rate (calls slower than `slowCallMs`) reached `slowCallRate`.
 * open → half-open once `openMs` has passed (growing with consecutive trips when `openBackoff` is set).
 * half-open admits exactly `halfOpenCalls` probes and rejects the rest at once; it closes (with a fresh
 * window) when they all succeed, and reopens on the first failed or slow probe. A probe whose caller
 * never reports back frees its permit after `probeTimeoutMs`, so half-open cannot get stuck.
 *
 * No timers: every transition is decided lazily, on the call (or `state` read) that notices it.
 * The success path in the closed state allocates nothing but the promise and reads only the coarse
 * clock (see core/coarse-clock.ts); calls are timed only when `slowCallMs` is set.
 */
import type { AdmissionToken } from '../core/admission.js';
import type { BreakerOpenError, ClosedError } from '../core/errors.js';
import { breakerRejectChannel, breakerStateChannel } from '../core/diagnostics.js';
import type { MetricsContext, MetricsDescription } from '../core/metrics-description.js';
import { describeBreaker } from './breaker-metrics.js';
import { Emitter, type Disposer } from '../core/events.js';
import { neverAborted, type Task } from '../core/guard.js';
import type { Clock } from '../core/clock.js';
import { clockOption } from '../core/validate.js';
import { getDefaultCoarseClock } from '../core/coarse-clock.js';
import { OutcomeCountWindow, OutcomeTimeWindow, type OutcomeWindow } from '../core/outcome-window.js';
import type {
  Breaker,
  BreakerExecuteOptions,
  BreakerFleetOptions,
  BreakerState,
  CircuitBreakerOptions,
  CircuitBreakerStats,
  FleetLink,
  FleetMember,
  StateChange,
} from './types.js';
import { badTask, executeWithOptions, isPromiseLike, isTimeout, runWithToken, type InternalToken } from './execute-path.js';
import { FailureReasons } from './failure-reasons.js';
import { GROUP_PLACED, GROUP_USED } from './group-slots.js';
import { primeAdmit } from './prime-admit.js';
import { RejectionCache } from './rejection-cache.js';
import { isolatedEvent, isolateReason } from './isolation.js';
import { plainCircuitOptions, readCircuitOptions, reconfiguredOptions, type ValidCircuitOptions } from './circuit-options.js';
import type { Isolatable, Reconfigurable } from '../core/reconfigurable.js';
import { BypassToken, ClosedToken, FleetProbeToken, ProbeToken } from './circuit-tokens.js';

const CLOSED = 0;
const OPEN = 1;
const HALF_OPEN = 2;
type StateCode = typeof CLOSED | typeof OPEN | typeof HALF_OPEN;
const STATE_NAMES: readonly BreakerState[] = ['closed', 'open', 'half-open'];
/** Marks a settled call that did not fail (an `undefined` error may still be a failure). */
const NO_ERROR: unique symbol = Symbol('no error');

/** Whether `admit()` was warmed up in this process (see primeAdmit). */
let primed = false;

/** The options a running breaker holds in fields of its own: written by the constructor and by reconfigure only. */
type Writable = { -readonly [K in 'failureRate' | 'slowCallRate' | 'slowCallMs' | 'minimumCalls' | 'openMs' | 'halfOpenCalls' | 'probeTimeoutMs']: number };

/** CircuitBreaker is the closed / open / half-open breaker; see the module comment. */
export class CircuitBreaker implements Breaker, FleetMember, Reconfigurable<CircuitBreakerOptions>, Isolatable {
  /**
   * Where a BreakerGroup marks its use of this breaker: declared first, so that it sits in the object's
   * first cache line, which a caller reading the breaker loads anyway. @internal
   */
  [GROUP_USED] = 0;
  /** @internal */
  [GROUP_PLACED] = 0;
  readonly name: string;
  readonly kind = 'circuit';
  readonly failureRate: number;
  readonly slowCallRate: number;
  readonly slowCallMs: number;
  readonly minimumCalls: number;
  readonly openMs: number;
  readonly halfOpenCalls: number;
  readonly probeTimeoutMs: number;
  private maxOpenMs: number;
  private openMultiplier: number;
  private readonly clock: Clock;
  /** Whether calls are timed (slow-call detection is on). */
  private timed: boolean;
  private window: OutcomeWindow;
  /** The options it runs now, checked (what `options()` answers and `reconfigure` lays a change over). */
  private current: ValidCircuitOptions;
  private readonly reasons = new FailureReasons();
  private readonly changes = new Emitter<StateChange>();
  private code: StateCode = CLOSED;
  /** Bumped on every transition, so a token from an earlier state cannot report into a later one. */
  private epoch = 0;
  private openUntil = 0;
  private openFor = 0;
  private trips = 0;
  private isolatedFlag = false;
  /** The reason given to isolate() (while isolated). */
  private isolatedWhy: string | undefined = undefined;
  /** Held open by the fleet view (bulwark/fleet): no local half-open, probes by fleet permit only. */
  private fleetHeld = false;
  /** Fleet probe permits granted and not yet used. */
  private fleetProbes = 0;
  private fleetLink: FleetLink | undefined;
  /** The fleet option it joined with (reconfigure refuses another). */
  private fleetOption: BreakerFleetOptions | undefined = undefined;
  private tripReason = '';
  /** Probe permits: start time (NaN when free) and generation (bumped when freed). */
  private probeStart: number[];
  private probeGen: number[];
  private probesInFlight = 0;
  private probeSuccesses = 0;
  /** Set by close(): the breaker stays open for good. */
  private retired = false;
  /** The error and promise rejected calls get. @internal */
  readonly rejections: RejectionCache;

  /** Counters since the breaker was made, for stats(): probe outcomes, uncounted calls, refusals. */
  private probeOk = 0;
  private probeFailed = 0;
  private ignored = 0;
  private refused = 0;
  private bypassOk = 0;
  private bypassFailed = 0;

  constructor(options?: CircuitBreakerOptions) {
    const o = readCircuitOptions(options);
    this.current = o;
    this.name = o.name;
    this.failureRate = o.failureRate;
    this.slowCallRate = o.slowCallRate;
    this.slowCallMs = o.slowCallMs;
    this.minimumCalls = o.minimumCalls;
    this.openMs = o.openMs;
    this.halfOpenCalls = o.halfOpenCalls;
    this.probeTimeoutMs = o.probeTimeoutMs;
    this.maxOpenMs = o.openBackoff?.maxMs ?? o.openMs;
    this.openMultiplier = o.openBackoff?.multiplier ?? 1;
    this.clock = clockOption('CircuitBreaker', o.clock, getDefaultCoarseClock());
    this.timed = this.slowCallMs !== Infinity;
    this.window = makeWindow(o, this.clock.now());
    this.probeStart = new Array<number>(this.halfOpenCalls).fill(NaN);
    this.probeGen = new Array<number>(this.halfOpenCalls).fill(0);
    this.rejections = new RejectionCache(this.name, () => this.rejectionMessage());
    if (!primed) {
      primed = true;
      primeAdmit((clock) => new CircuitBreaker({ clock }));
    }
    if (options?.fleet !== undefined) this.joinFleet(options.fleet);
  }

  /**
   * joinFleet makes the breaker fleet-aware (the `fleet` option; BreakerGroup calls it for the breakers
   * it makes). A breaker joins one fleet once.
   */
  joinFleet(fleet: BreakerFleetOptions): void {
    if (fleet === null || typeof fleet !== 'object' || typeof (fleet.store as { join?: unknown } | undefined)?.join !== 'function') {
      throw new TypeError(`CircuitBreaker: fleet.store must be a fleet store (bulwark/fleet), got ${String((fleet as { store?: unknown } | null)?.store)}`);
    }
    if (this.fleetLink !== undefined) throw new TypeError(`CircuitBreaker: breaker "${this.name}" already joined a fleet`);
    this.fleetLink = fleet.store.join(this, fleet);
    this.fleetOption = fleet;
  }

  /** state is 'closed', 'open' or 'half-open' now (an open period that has passed reads as half-open). */
  get state(): BreakerState {
    if (this.code === OPEN && !this.isolatedFlag && !this.retired && !this.fleetHeld) {
      const now = this.clock.now();
      if (now >= this.openUntil) this.toHalfOpen(now);
    }
    return STATE_NAMES[this.code]!;
  }

  /** isolated is true while an operator holds the breaker open with `isolate()`. */
  get isolated(): boolean {
    return this.isolatedFlag;
  }

  /**
   * heldOpen is true while the breaker is open by force rather than on its own evidence: isolated by an
   * operator, closed for good, or held open by its fleet (the fleet's evidence outweighs one process's
   * cap or panic rule: letting calls past it would spend the probes the fleet rations). `admitAnyway()` never lets a call past it, and ResilientClient's cap
   * and panic rule never put such an instance back in rotation.
   */
  get heldOpen(): boolean {
    return this.isolatedFlag || this.retired || this.fleetHeld;
  }

  /** onStateChange subscribes to transitions; returns the disposer. */
  onStateChange(listener: (change: StateChange) => void): Disposer {
    return this.changes.on(listener);
  }

  /**
   * admit lets in a call and returns the token to report its outcome, or throws `BreakerOpenError`.
   * Kept tiny on purpose (see SreBreaker.admit): the admission is `tryAdmit()`, which never throws.
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
    if (this.code === CLOSED) return new ClosedToken(this, this.epoch, this.timed ? this.clock.now() : 0);
    return this.admitNotClosed();
  }

  /**
   * admitAnyway admits a call that the breaker would refuse on evidence (open, or half-open with every
   * probe permit taken), for a caller that must keep the instance in rotation anyway (ResilientClient's
   * cap and panic mode, as Envoy routes to ejected hosts in panic). A closed breaker, or a half-open one
   * with a free permit, admits as `tryAdmit()` does. The outcome of a call let past is counted in
   * `stats()` (`bypassedCalls`, and in `successfulCalls` / `failedCalls`) and a failure's reason kept,
   * but it does not move the state machine: the open period and the probes decide as before. Answers
   * undefined while the breaker is `heldOpen` (isolated, closed): force is never overridden.
   */
  admitAnyway(): AdmissionToken | undefined {
    if (this.code === CLOSED) return this.tryAdmit();
    if (this.heldOpen) return undefined;
    const now = this.clock.now();
    if (this.code === OPEN && now >= this.openUntil) this.toHalfOpen(now);
    if (this.code === HALF_OPEN) {
      const probe = this.admitProbe(now);
      if (probe !== undefined) return probe;
    }
    return new BypassToken(this);
  }

  /** reportBypass counts the outcome of a call `admitAnyway` let past the open state. @internal */
  reportBypass(failed: boolean, err: unknown): void {
    if (this.retired) return;
    if (!failed) {
      this.bypassOk++;
      return;
    }
    this.bypassFailed++;
    this.reasons.add(err);
    this.rejections.clear();
  }

  /** admitNotClosed is tryAdmit() when open or half-open: out of line, so that the closed path stays small enough to inline. */
  private admitNotClosed(): InternalToken | undefined {
    const now = this.clock.now();
    if (this.code === OPEN) {
      if (this.fleetProbes > 0 && this.fleetHeld && !this.isolatedFlag) {
        this.fleetProbes--;
        return new FleetProbeToken(this, this.epoch);
      }
      if (this.isolatedFlag || now < this.openUntil) {
        this.refused++;
        return breakerRejectChannel.hasSubscribers ? this.publishReject() : undefined;
      }
      this.toHalfOpen(now);
    }
    const probe = this.admitProbe(now);
    if (probe !== undefined) return probe;
    this.refused++;
    return breakerRejectChannel.hasSubscribers ? this.publishReject() : undefined;
  }

  /** publishReject publishes a rejection on `bulwark:breaker:reject` (not after close()) and answers undefined. */
  private publishReject(): undefined {
    if (this.retired) return undefined;
    const state = this.code === OPEN ? 'open' : 'half-open';
    if (this.isolatedWhy === undefined) breakerRejectChannel.publish({ breaker: this.name, kind: 'CircuitBreaker', state });
    else breakerRejectChannel.publish({ breaker: this.name, kind: 'CircuitBreaker', state, isolatedReason: this.isolatedWhy });
    return undefined;
  }

  /**
   * execute runs `fn` unless the breaker rejects the call, and counts its outcome. `fn` receives the
   * caller's signal (or `neverAborted`); it may return a plain value, a promise, or throw. A `fn` that
   * is not a function rejects with a TypeError and counts nothing (the caller's error, not the dependency's).
   */
  execute<T>(fn: Task<T>, options?: BreakerExecuteOptions<T>): Promise<T> {
    if (options !== undefined || typeof fn !== 'function' || this.code !== CLOSED || this.timed) return this.executeChecked(fn, options);
    // Closed, untimed, no signal: no token, no closure; a call that settles after the breaker left this
    // closed period is not counted (onValue and onError count only while closed).
    const epoch = this.epoch;
    let r: T | PromiseLike<T>;
    try {
      r = fn(neverAborted);
    } catch (err) {
      this.settleClosed(epoch, 0, err, neverAborted);
      return Promise.reject(err);
    }
    if (r instanceof Promise) return r.then(this.onValue, this.onError) as Promise<T>;
    if (!isPromiseLike<T>(r)) {
      this.settleClosed(epoch, 0, NO_ERROR, neverAborted);
      return Promise.resolve(r);
    }
    return Promise.resolve(r).then(this.onValue, this.onError);
  }

  /**
   * executeChecked is `execute` for every call but the common one (a function, no options, closed and
   * untimed): kept apart so that the common call runs a body small enough to inline into its caller.
   */
  private executeChecked<T>(fn: Task<T>, options: BreakerExecuteOptions<T> | undefined): Promise<T> {
    if (typeof fn !== 'function') return badTask('CircuitBreaker', fn);
    let signal: AbortSignal = neverAborted;
    if (options !== undefined) {
      const s = options.signal;
      if (options.isFailure !== undefined || options.fallback !== undefined || (s !== undefined && s.aborted)) {
        return executeWithOptions(this, fn, options);
      }
      if (s !== undefined) signal = s;
    }
    if (this.code !== CLOSED) {
      const t = this.tryAdmit();
      return t === undefined ? this.rejections.rejected() : runWithToken(t, fn, signal, undefined);
    }
    // Closed: no token. A call that settles after the breaker left this closed period is not counted.
    const epoch = this.epoch;
    const start = this.timed ? this.clock.now() : 0;
    let r: T | PromiseLike<T>;
    try {
      r = fn(signal);
    } catch (err) {
      this.settleClosed(epoch, start, err, signal);
      return Promise.reject(err);
    }
    if (!isPromiseLike<T>(r)) {
      this.settleClosed(epoch, start, NO_ERROR, signal);
      return Promise.resolve(r);
    }
    const p = r instanceof Promise ? r : Promise.resolve(r);
    if (!this.timed && signal === neverAborted) return p.then(this.onValue, this.onError) as Promise<T>;
    return this.settleClosedLater(p, epoch, start, signal);
  }

  /**
   * settleClosedLater reports a closed-state call when `p` settles, for a call that is timed or carries
   * a signal. Its reactions close over the call's epoch, start and signal; made here rather than in
   * `execute`, so that execute's common path allocates no context for them.
   */
  private settleClosedLater<T>(p: Promise<T>, epoch: number, start: number, signal: AbortSignal): Promise<T> {
    return p.then(
      (value: T) => {
        this.settleClosed(epoch, start, NO_ERROR, signal);
        return value;
      },
      (err: unknown): never => {
        this.settleClosed(epoch, start, err, signal);
        throw err;
      },
    );
  }

  /**
   * options answers the options the breaker runs now that `reconfigure` can change, as fresh plain
   * data (a time window as `windowMs` and `buckets`, a count window as `windowCalls`; `slowCallMs` and
   * `probeTimeoutMs` may be Infinity). Not its name, clock or fleet, which cannot change.
   */
  options(): Partial<CircuitBreakerOptions> {
    return plainCircuitOptions(this.current);
  }

  /**
   * reconfigure lays `partial` over the options the breaker runs now, checks the result as the
   * constructor does (same messages; a key given as undefined returns to its default) and applies all
   * of it, or throws and changes nothing. `name`, `clock` and `fleet` cannot change on a running breaker
   * (a TypeError says so). What it keeps: the state (closed, open, half-open; an isolation; a fleet's
   * hold), the counters of `stats()` and the failure reasons. The window keeps its counts unless its
   * shape changes (`windowMs`, `buckets`, `windowCalls`): then a fresh, empty window starts. An open
   * period in progress keeps its end: a new `openMs` or `openBackoff` applies from the next trip. A
   * half-open period in progress starts over when `halfOpenCalls` changes (the probes in flight are not
   * counted). A new `failureRate`, `slowCallRate` or `minimumCalls` is judged at the next failed or
   * slow call. Turning slow-call detection on or off (`slowCallMs` to or from Infinity) does not count
   * the calls in flight at that moment.
   */
  reconfigure(partial: Partial<CircuitBreakerOptions>): void {
    const o = reconfiguredOptions(this.current, partial, this.fleetOption);
    if (this.retired) return;
    const prev = this.current;
    const now = this.clock.now();
    this.current = o;
    const self = this as Writable;
    self.failureRate = o.failureRate;
    self.slowCallRate = o.slowCallRate;
    self.slowCallMs = o.slowCallMs;
    self.minimumCalls = o.minimumCalls;
    self.openMs = o.openMs;
    self.probeTimeoutMs = o.probeTimeoutMs;
    this.maxOpenMs = o.openBackoff?.maxMs ?? o.openMs;
    this.openMultiplier = o.openBackoff?.multiplier ?? 1;
    const timed = o.slowCallMs !== Infinity;
    if (timed !== this.timed) {
      this.timed = timed;
      if (this.code === CLOSED) this.epoch++; // calls in flight were (not) timed: their reports no longer count
    }
    if (o.windowCalls !== prev.windowCalls || (o.windowCalls === undefined && (o.windowMs !== prev.windowMs || o.buckets !== prev.buckets))) {
      const w = makeWindow(o, now);
      w.callsTotal = this.window.callsTotal;
      w.failuresTotal = this.window.failuresTotal;
      this.window = w;
    }
    if (o.halfOpenCalls !== prev.halfOpenCalls) {
      self.halfOpenCalls = o.halfOpenCalls;
      this.probeStart = new Array<number>(o.halfOpenCalls).fill(NaN);
      this.probeGen = new Array<number>(o.halfOpenCalls).fill(0);
      this.probesInFlight = 0;
      this.probeSuccesses = 0;
      if (this.code === HALF_OPEN) this.epoch++; // the probes in flight belong to the period that ended
    }
    this.rejections.clear();
  }

  /**
   * isolate forces the breaker open until `reset()` (an operator's switch), whatever its own evidence,
   * its fleet or a client's cap and panic rule say. `reason` (defaults to 'isolated by an operator') is
   * shown in `stats().isolatedReason`, the `breaker_isolated` metric, the status snapshot, the
   * rejection's message and the diagnostics events. Isolating an isolated breaker again replaces the reason.
   */
  isolate(reason?: string): void {
    const why = isolateReason('CircuitBreaker', reason);
    if (this.retired) return;
    if (this.isolatedFlag) {
      this.isolatedWhy = why;
      this.rejections.clear();
      return;
    }
    const now = this.clock.now();
    const from = this.code;
    this.isolatedFlag = true;
    this.isolatedWhy = why;
    this.fleetProbes = 0;
    this.code = OPEN;
    this.epoch++;
    this.openUntil = Infinity;
    this.rejections.clear();
    this.emit(from, isolatedEvent(why), now);
  }

  /**
   * reset closes the breaker with a fresh window, ends an isolation and forgets consecutive trips. It
   * clears local state only: a fleet that still holds the dependency down opens the breaker again at
   * its next look at the store.
   */
  reset(): void {
    if (this.retired) return;
    this.isolatedFlag = false;
    this.isolatedWhy = undefined;
    this.fleetHeld = false;
    this.fleetProbes = 0;
    this.toClosed(this.clock.now(), 'reset');
  }

  /** heldByFleet is true while the fleet holds the breaker open (an isolate or a reset may have ended it) (for bulwark/fleet). */
  get heldByFleet(): boolean {
    return this.fleetHeld && !this.isolatedFlag && !this.retired;
  }

  /**
   * leaveFleet ends the breaker's fleet membership (a BreakerGroup calls it on eviction): it becomes a
   * plain breaker, its report leaves the store. A hold of the fleet ends with it (the breaker stays open on its own terms for openMs).
   */
  async leaveFleet(): Promise<void> {
    const link = this.fleetLink;
    if (link === undefined) return;
    this.fleetLink = undefined;
    if (this.fleetHeld) this.fleetRelease('open', 'left its fleet');
    await link.close();
  }

  /** fleetCounts answers the window's calls and failures (bulwark/fleet reads it at its publishing rate) (for bulwark/fleet). */
  fleetCounts(): { calls: number; failures: number } {
    if (this.code !== CLOSED) return { calls: this.window.calls, failures: this.window.failures };
    this.window.advance(this.clock.now());
    return { calls: this.window.calls, failures: this.window.failures };
  }

  /** fleetHold opens the breaker on its fleet's evidence; an operator's isolate outranks it (for bulwark/fleet). */
  fleetHold(reason: string): void {
    if (this.retired || this.fleetHeld) return;
    this.fleetHeld = true;
    this.fleetProbes = 0;
    if (this.isolatedFlag) return; // isolated: stays so, and the hold applies once it is reset
    const now = this.clock.now();
    const from = this.code;
    this.code = OPEN;
    this.epoch++;
    this.openUntil = Infinity;
    this.tripReason = reason;
    this.rejections.clear();
    this.emit(from, reason, now);
  }

  /**
   * fleetRelease ends the fleet's hold: closed (its probes succeeded) or open for openMs on local terms
   * (for bulwark/fleet). Either way a state change is emitted — open → open, with its reason, for the
   * latter — so that a listener that held the instance out because of the fleet's hold (ResilientClient's
   * balancer holds it as forced while `heldOpen`) sees the hold end.
   */
  fleetRelease(to: 'closed' | 'open', reason: string): void {
    if (this.retired || !this.fleetHeld) return;
    this.fleetHeld = false;
    this.fleetProbes = 0;
    if (this.isolatedFlag) return;
    const now = this.clock.now();
    if (to === 'closed') {
      this.toClosed(now, reason);
      return;
    }
    this.openFor = this.openMs;
    this.openUntil = now + this.openMs;
    this.tripReason = reason;
    this.rejections.clear();
    this.emit(OPEN, reason, now);
  }

  /** fleetProbe grants one fleet-wide probe permit: the next call while held is the probe (for bulwark/fleet). */
  fleetProbe(): void {
    if (this.fleetHeld && !this.isolatedFlag && !this.retired) this.fleetProbes++;
  }

  /** reportFleetProbe passes a fleet probe's outcome to the fleet view (for bulwark/fleet). */
  reportFleetProbe(epoch: number, failed: boolean | undefined, err: unknown): void {
    if (failed === undefined) {
      this.ignored++;
      if (epoch === this.epoch && this.fleetHeld) this.fleetProbes++; // released unused: give the permit back
      return;
    }
    if (failed) {
      this.probeFailed++;
      this.reasons.add(err);
    } else this.probeOk++;
    this.fleetLink?.probeDone(!failed);
  }

  /** lastRejection answers the error a call rejected now would get (its message says why). */
  lastRejection(): BreakerOpenError | ClosedError {
    return this.rejections.error();
  }

  /**
   * close retires the breaker: it stays open for good, every later call is refused with `ClosedError`,
   * calls in flight no longer count, and its state-change listeners are dropped (no event is emitted).
   * It holds no timer, so there is nothing else to release. Idempotent.
   */
  async close(): Promise<void> {
    if (this.retired) return;
    this.retired = true;
    this.code = OPEN;
    this.epoch++;
    this.openUntil = Infinity;
    this.probeStart.fill(NaN);
    this.probesInFlight = 0;
    this.rejections.close();
    this.changes.clear();
    await this.fleetLink?.close();
  }

  /** Symbol.asyncDispose closes the breaker (`await using b = new CircuitBreaker()`). */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * describeMetrics answers the breaker's metric families (`breaker_state`, `breaker_calls_total`,
   * `breaker_failure_rate`, `breaker_slow_call_rate`, `breaker_state_transitions_total`), read from its
   * stats at scrape time but the transitions, counted as they happen.
   */
  describeMetrics(ctx: MetricsContext): MetricsDescription {
    return describeBreaker(
      this,
      ctx,
      () => this.retired,
      (listener) => this.onStateChange(listener),
    );
  }

  /** stats answers a snapshot. */
  stats(): CircuitBreakerStats {
    const state = this.state;
    this.window.advance(this.clock.now());
    return {
      state,
      calls: this.window.calls,
      failures: this.window.failures,
      slowCalls: this.window.slow,
      trips: this.trips,
      isolated: this.isolatedFlag,
      isolatedReason: this.isolatedWhy,
      probesInFlight: this.probesInFlight,
      probeSuccesses: this.probeSuccesses,
      successfulCalls: this.window.callsTotal - this.window.failuresTotal + this.probeOk + this.bypassOk,
      failedCalls: this.window.failuresTotal + this.probeFailed + this.bypassFailed,
      ignoredCalls: this.ignored,
      notPermittedCalls: this.refused,
      bypassedCalls: this.bypassOk + this.bypassFailed,
      reason: state === 'closed' ? undefined : this.isolatedFlag ? 'isolated' : this.fleetHeld ? 'fleet' : 'local',
      ...(this.fleetLink === undefined ? {} : { fleet: this.fleetLink.stats() }),
    };
  }

  /** lastFailures answers the last failure reasons, oldest first. */
  lastFailures(): string[] {
    return this.reasons.list();
  }

  private readonly onValue = <T>(value: T): T => {
    if (this.code === CLOSED) this.window.success(this.clock.now());
    return value;
  };

  private readonly onError = (err: unknown): never => {
    if (this.code === CLOSED) this.recordClosed(true, false, err, this.clock.now());
    throw err;
  };

  /** settleClosed counts a call admitted in the closed period `epoch` (NO_ERROR: it succeeded). */
  private settleClosed(epoch: number, start: number, err: unknown, signal: AbortSignal): void {
    if (epoch !== this.epoch) return;
    const failed = err !== NO_ERROR;
    if (failed && signal.aborted && !isTimeout(signal.reason)) {
      this.ignored++; // the caller gave up: not the dependency's fault
      return;
    }
    const now = this.clock.now();
    this.recordClosed(failed, this.timed && now - start >= this.slowCallMs, err, now);
  }

  /** reportClosed counts the outcome of a call admitted in the closed state. @internal */
  reportClosed(epoch: number, failed: boolean, start: number, err: unknown): void {
    if (epoch !== this.epoch) return;
    const now = this.clock.now();
    this.recordClosed(failed, this.timed && now - start >= this.slowCallMs, err, now);
  }

  /** reportProbe counts the outcome of a probe; `failed` undefined releases it without counting. @internal */
  reportProbe(epoch: number, slot: number, gen: number, failed: boolean | undefined, err: unknown): void {
    if (epoch !== this.epoch || this.probeGen[slot] !== gen) return; // another half-open period, or its permit expired
    const now = this.clock.now();
    const start = this.probeStart[slot]!;
    this.freeProbe(slot);
    if (failed === undefined) {
      this.ignored++;
      return;
    }
    if (failed) this.probeFailed++;
    else this.probeOk++;
    if (failed) {
      this.reasons.add(err);
      this.trip(now, 'a probe failed');
    } else if (this.timed && now - start >= this.slowCallMs) {
      this.trip(now, `a probe took ${Math.round(now - start)} ms (slow: ≥ ${this.slowCallMs} ms)`);
    } else if (++this.probeSuccesses >= this.halfOpenCalls) {
      this.toClosed(now, `all ${this.halfOpenCalls} probes succeeded`);
    }
  }

  private recordClosed(failed: boolean, slow: boolean, err: unknown, now: number): void {
    const w = this.window;
    w.record(failed, slow, now);
    if (failed) {
      this.reasons.add(err);
      this.rejections.clear();
    }
    if ((failed || slow) && w.calls >= this.minimumCalls) {
      const fr = w.failures / w.calls;
      const sr = w.slow / w.calls;
      if (fr >= this.failureRate) this.trip(now, `failure rate ${pct(fr)} ≥ ${pct(this.failureRate)} over ${w.calls} calls`);
      else if (sr >= this.slowCallRate) this.trip(now, `slow-call rate ${pct(sr)} ≥ ${pct(this.slowCallRate)} over ${w.calls} calls`);
    }
    // Last, after the local rule: the view may hold the breaker open on what its failure adds to the fleet's.
    if (failed) this.fleetLink?.failed();
  }

  private admitProbe(now: number): InternalToken | undefined {
    const n = this.halfOpenCalls;
    if (this.probesInFlight > 0 && this.probeTimeoutMs !== Infinity) {
      for (let i = 0; i < n; i++) {
        if (now - this.probeStart[i]! >= this.probeTimeoutMs) this.freeProbe(i); // NaN (free) compares false
      }
    }
    if (this.probesInFlight + this.probeSuccesses >= n) return undefined;
    for (let i = 0; i < n; i++) {
      if (Number.isNaN(this.probeStart[i]!)) {
        this.probeStart[i] = now;
        this.probesInFlight++;
        return new ProbeToken(this, this.epoch, i, this.probeGen[i]!);
      }
    }
    return undefined; // unreachable: fewer than n in flight means a free slot
  }

  private freeProbe(slot: number): void {
    this.probeStart[slot] = NaN;
    this.probeGen[slot] = (this.probeGen[slot]! + 1) & 0x3fffffff; // stays a small integer
    this.probesInFlight--;
  }

  private trip(now: number, reason: string): void {
    const from = this.code;
    this.trips++;
    this.openFor = this.trips === 1 ? this.openMs : Math.min(this.maxOpenMs, this.openFor * this.openMultiplier);
    this.code = OPEN;
    this.epoch++;
    this.openUntil = now + this.openFor;
    this.tripReason = reason;
    this.rejections.clear();
    this.emit(from, reason, now);
  }

  private toHalfOpen(now: number): void {
    this.code = HALF_OPEN;
    this.epoch++;
    this.probeStart.fill(NaN);
    this.probesInFlight = 0;
    this.probeSuccesses = 0;
    this.rejections.clear();
    this.emit(OPEN, `open for ${this.openFor} ms`, now);
  }

  private toClosed(now: number, reason: string): void {
    const from = this.code;
    this.code = CLOSED;
    this.epoch++;
    this.trips = 0;
    this.openFor = 0;
    this.probeStart.fill(NaN);
    this.probesInFlight = 0;
    this.probeSuccesses = 0;
    this.window.reset(now);
    this.rejections.clear();
    if (from !== CLOSED) this.emit(from, reason, now);
  }

  private emit(from: StateCode, reason: string, at: number): void {
    if (breakerStateChannel.hasSubscribers) {
      breakerStateChannel.publish({ breaker: this.name, from: STATE_NAMES[from]!, to: STATE_NAMES[this.code]!, reason, at });
    }
    if (!this.changes.hasListeners) return;
    this.changes.emit({ name: this.name, from: STATE_NAMES[from]!, to: STATE_NAMES[this.code]!, at, reason });
  }

  private rejectionMessage(): string {
    const who = `breaker "${this.name}"`;
    const what = this.isolatedFlag
      ? `${who} is isolated (forced open until reset): ${this.isolatedWhy}`
      : this.fleetHeld
        ? `${who} is held open by its fleet: ${this.tripReason}`
        : this.code === HALF_OPEN
          ? `${who} is half-open and all ${this.halfOpenCalls} probes are taken`
          : `${who} is open for ${this.openFor} ms: ${this.tripReason}`;
    return what + this.reasons.suffix();
  }
}

/** makeWindow makes the window options ask for: the last `windowCalls` calls, or the last `windowMs`. */
function makeWindow(o: ValidCircuitOptions, now: number): OutcomeWindow {
  return o.windowCalls !== undefined ? new OutcomeCountWindow(o.windowCalls) : new OutcomeTimeWindow(o.windowMs, o.buckets, now);
}

function pct(x: number): string {
  return `${Math.round(x * 1000) / 10}%`;
}
