/**
 * ResilientClient runs calls to a service through docs/architecture.md's guarded-call flow:
 *
 * 1. discovery: the service's instances come from the registry (answered from memory by a
 *    RegistryCache, which serves stale entries while the registry is down);
 * 2. the balancer (P2C by default) leaves ejected instances out and picks one;
 * 3. the bulkhead admits the attempt or rejects it at once;
 * 4. the service's breaker (once per call: it hears the whole call's outcome), then the picked
 *    instance's breaker, admit it or reject it at once — an instance whose breaker is open on evidence
 *    stays in rotation while the balancer's cap or panic mode says so (see ServiceState);
 * 5. the timeout aborts the attempt's signal at its deadline;
 * 6. the outcome feeds the instance's breaker and the balancer (latency EWMA, in-flight, passive health);
 * 7. a retryable failure is retried on ANOTHER instance, if the service's retry budget allows;
 * 8. if all of that fails, the fallback answers.
 *
 * One ServiceState per service holds its balancer, breakers, bulkhead and retry budget; the first call
 * to a service creates it (a service the registry does not know rejects with NotFoundError).
 */
import { systemClock, type Clock } from '../core/clock.js';
import { BulkheadRejectedError, ClosedError, NotFoundError, RetryBudgetExhaustedError, isBulwarkError } from '../core/errors.js';
import { isDeepStrictEqual } from 'node:util';
import { clientCallChannel } from '../core/diagnostics.js';
import { Emitter, type Disposer, type Listener } from '../core/events.js';
import { neverAborted } from '../core/guard.js';
import { SingleFlight } from '../core/singleflight.js';
import { clockOption, finite, integer, liveOptions, options as optionsObject, showValue, within, type OptionKeys } from '../core/validate.js';
import { Backoff, type BackoffOptions } from '../core/backoff.js';
import { Bulkhead, type BulkheadOptions } from '../policy/bulkhead.js';
import { RetryBudget, type RetryBudgetOptions } from '../policy/retry-budget.js';
import { Fallback, type FallbackStrategy } from '../policy/fallback.js';
import type { Retry } from '../policy/retry.js';
import type { BreakerGroup } from '../breaker/breaker-group.js';
import { RegistryCache } from '../registry/registry-cache.js';
import type { Registry, RegistryCacheOptions } from '../registry/types.js';
import { CallRun, ResultFailure, type AttemptEvent, type InstanceTask, type ResultJudge, type RunContext } from './call-run.js';
import { AttemptTimeout } from './deadlines.js';
import { failedStatus, fetchAttempt, originOf, planFetch, type FetchInit } from './fetch.js';
import { OriginPools, type OriginPoolsOptions } from '../internal/origin-pools.js';
import { httpPoolsOptions, type HttpPoolsOptions } from './http-pools.js';
import { ServiceState, serviceStateDefaults, type ServiceStateOptions } from './service-state.js';
import { ClientCounters, type ClientStats } from './stats.js';
import type { ClientMeasure } from './types.js';
import { PendingBatches } from './answered-batch.js';
import type { MetricsContext, MetricsDescription } from '../core/metrics-description.js';
import { describeClient } from './client-metrics.js';
import { checkWeightOverrides, type WeightOverrides } from '../balancer/weight-overrides.js';
import { FaultInjector } from '../policy/fault.js';
import type { FaultOptions } from '../policy/types.js';

/** The keys of ResilientClientOptions, all of them: any other is refused (see `options`). */
const RESILIENT_CLIENT_KEYS = {
  registry: true,
  registryCache: true,
  http: true,
  maxResponseBytes: true,
  timeoutMs: true,
  maxAttempts: true,
  maxServices: true,
  clock: true,
  balancer: true,
  balancerFactory: true,
  breakers: true,
  retryBudget: true,
  retryBackoff: true,
  bulkhead: true,
  fault: true,
} as const satisfies OptionKeys<ResilientClientOptions>;

/** The options `reconfigureService` may change: the rest are the whole client's, fixed at construction. */
const SERVICE_LIVE_KEYS = ['timeoutMs', 'maxAttempts', 'bulkhead', 'retryBudget', 'retryBackoff'] as const;

/**
 * ServiceLiveOptions are a service's options that `ResilientClient.reconfigureService` changes and
 * `serviceOptions` answers, each in full (nested ones resolved, defaults filled in).
 */
export interface ServiceLiveOptions {
  /** Deadline of each attempt in milliseconds; 0 for none. */
  timeoutMs: number;
  /** Attempts per call, the first included, when retry is on. */
  maxAttempts: number;
  /** The service's bulkhead (attempts in flight at once). */
  bulkhead: Required<BulkheadOptions>;
  /** The service's retry budget. */
  retryBudget: Required<Omit<RetryBudgetOptions, 'clock'>>;
  /** Waits between attempts. */
  retryBackoff: Required<Omit<BackoffOptions, 'random'>>;
}

/** ServiceLivePartial is what `reconfigureService` takes: any of ServiceLiveOptions, nested ones in part. */
export type ServiceLivePartial = Partial<{
  [K in keyof ServiceLiveOptions]: ServiceLiveOptions[K] extends object ? Partial<ServiceLiveOptions[K]> : ServiceLiveOptions[K];
}>;

/** CallOptions are the per-call options of `ResilientClient.call`. */
export interface CallOptions<T> {
  /** Routing key for affinity strategies (ring hash). Defaults to none. */
  key?: string;
  /** Deadline of each attempt in milliseconds; 0 for none. Defaults to the client's `timeoutMs`. */
  timeoutMs?: number;
  /**
   * Whether to retry a failed attempt on another instance: false, true (the client's `maxAttempts`),
   * or `{ maxAttempts }` (attempts in all, the first included). Retries always need the service's
   * retry budget. Defaults to true: pass false for work that must not run twice.
   */
  retry?: boolean | { maxAttempts?: number };
  /**
   * Answers when the call fails in the end: a function `(error, signal) => value`, or a policy
   * `Fallback` (last good value, chain, default value). Not used when the caller's signal aborted.
   * Defaults to none: the call rejects with its last error.
   */
  fallback?: FallbackStrategy<T> | Fallback<T>;
  /** Aborts the call: attempts in flight, waits between retries. Defaults to none. */
  signal?: AbortSignal;
  /**
   * Whether an error the task threw counts against the instance (breakers, passive health); return
   * false for the caller's own mistakes (a 404, a validation error). The error still reaches the caller.
   * Defaults to every error counting.
   */
  isFailure?: (err: unknown) => boolean;
}

/** ResilientClientOptions configures a ResilientClient. */
export interface ResilientClientOptions extends ServiceStateOptions {
  /**
   * Where instances are found. A RegistryCache is used as it is; any other Registry is wrapped in a
   * RegistryCache (with `registryCache` options) that the client owns and closes. Required.
   */
  registry: Registry;
  /** Options of the RegistryCache the client wraps a plain Registry in. Defaults to the RegistryCache defaults. */
  registryCache?: RegistryCacheOptions;
  /** The per-instance keep-alive pools of `fetch`. Defaults to `httpPoolsDefaults` (64 connections per instance). */
  http?: HttpPoolsOptions;
  /** The largest response body `fetch` reads, in bytes; a larger one fails the attempt. Defaults to 16 MiB. */
  maxResponseBytes?: number;
  /** Deadline of each attempt in milliseconds; 0 for none. Defaults to 10 000. */
  timeoutMs?: number;
  /** Attempts per call, the first included, when retry is on. Defaults to 3. */
  maxAttempts?: number;
  /** Most services the client keeps state for; past it the least recently opened is dropped. Defaults to 1 000. */
  maxServices?: number;
  /** The time source. Defaults to the monotonic system clock. */
  clock?: Clock;
}

/** Defaults for ResilientClientOptions. */
export const resilientClientDefaults = Object.freeze({ timeoutMs: 10_000, maxAttempts: 3, maxServices: 1_000, maxResponseBytes: 16 << 20 });

const MAX_TIMER_MS = 2_147_483_647;

/** ResilientClient calls services through discovery, balancing, bulkhead, breakers, timeout, retry and fallback. */
export class ResilientClient {
  /** The registry cache instances come from (the one given, or the client's own over the given registry). */
  readonly registry: Registry;
  readonly maxResponseBytes: number;
  /** The breakers of every service (`<service>`) and instance (`<service>/<instance id>`): the `breakers` option, or the default group. */
  readonly breakers: BreakerGroup;
  private readonly ownsRegistry: boolean;
  private readonly poolsOptions: OriginPoolsOptions;
  private pools: OriginPools | undefined;
  readonly timeoutMs: number;
  readonly maxAttempts: number;
  readonly maxServices: number;
  private readonly stateOptions: ServiceStateOptions;
  private readonly ctx: RunContext;
  private readonly counters = new ClientCounters();
  private readonly attemptEvents = new Emitter<AttemptEvent>();
  private measures: readonly ClientMeasure[] = [];
  private readonly services = new Map<string, ServiceState>();
  /** The state the last call found in `services` (calls tend to go to the same service): no Map lookup when the next one does too. */
  private lastState: ServiceState | undefined;
  private readonly opening: SingleFlight<string, ServiceState>;
  private readonly defaultTimeout: AttemptTimeout | undefined;
  private readonly timeouts = new Map<number, AttemptTimeout>();
  /** Services whose options `reconfigureService` changed: what they run, applied when their state opens. */
  private readonly serviceLive = new Map<string, ServiceLiveOptions>();
  /** The attempt deadline of those services, by service (the client's `defaultTimeout` for the others). */
  private readonly serviceTimeouts = new Map<string, AttemptTimeout | undefined>();
  private closing: Promise<void> | undefined;
  /** Weight overrides by service (`setWeights`), for its balancer now and whenever it is made. */
  private readonly weightsBy = new Map<string, WeightOverrides>();
  /** Faults by service (`setFault`), in place of the `fault` option. */
  private readonly faultsBy = new Map<string, FaultOptions>();

  constructor(options: ResilientClientOptions) {
    const o = optionsObject('ResilientClient', options, RESILIENT_CLIENT_KEYS);
    const r = o.registry as Partial<Registry> | undefined;
    if (r === undefined || r === null || typeof r !== 'object' || typeof r.getService !== 'function' || typeof r.watch !== 'function') {
      throw new TypeError(`ResilientClient: registry must be a Registry (getService and watch), got ${showValue(r)}`);
    }
    this.maxResponseBytes = integer('ResilientClient', 'maxResponseBytes', o.maxResponseBytes ?? resilientClientDefaults.maxResponseBytes, 0, 2 ** 31 - 1);
    this.timeoutMs = finite('ResilientClient', 'timeoutMs', o.timeoutMs ?? resilientClientDefaults.timeoutMs, 0, MAX_TIMER_MS);
    this.maxAttempts = integer('ResilientClient', 'maxAttempts', o.maxAttempts ?? resilientClientDefaults.maxAttempts, 1, 100);
    this.maxServices = integer('ResilientClient', 'maxServices', o.maxServices ?? resilientClientDefaults.maxServices, 1, 1_000_000);
    const clock = clockOption('ResilientClient', o.clock, systemClock);
    this.opening = new SingleFlight({ clock });
    this.poolsOptions = httpPoolsOptions(o.http, clock); // checked now, not at the first fetch
    this.stateOptions = ServiceState.validate({ ...o, clock }, o.clock === undefined ? undefined : clock);
    this.breakers = this.stateOptions.breakers!;
    this.ctx = {
      clock,
      counters: this.counters,
      attempts: this.attemptEvents,
      measure: undefined,
      pending: new PendingBatches(),
      afterFirst: (run, err) => this.afterFirst(run, err),
    };
    this.defaultTimeout = this.timeoutMs === 0 ? undefined : new AttemptTimeout(this.timeoutMs, clock);
    // Last: a cache made here holds a timer, so nothing may throw after it.
    this.ownsRegistry = !(o.registry instanceof RegistryCache);
    this.registry = this.ownsRegistry
      ? within('ResilientClient', 'registryCache', 'RegistryCache', () => new RegistryCache(o.registry!, o.registryCache))
      : o.registry!;
  }

  /**
   * describeMetrics answers the client's families (`client_…`: calls, attempts, retries, durations) and
   * its parts': its breakers' (`group` = the client's name), each open service's balancer (`name` = the
   * service, `group` = the client's name) and its registry cache's.
   */
  describeMetrics(ctx: MetricsContext): MetricsDescription {
    return describeClient(
      {
        breakers: this.breakers,
        cache: this.registry instanceof RegistryCache ? this.registry : undefined,
        stats: () => this.stats(),
        measure: (m) => this.measure(m),
        flush: () => this.ctx.pending.flushAll(this.ctx.measure),
        openServices: () => this.services.values(),
        closed: () => this.closing !== undefined,
      },
      ctx,
    );
  }

  /** stats answers a fresh snapshot of the client's counters. */
  stats(): ClientStats {
    return this.counters.snapshot();
  }

  /** onAttempt subscribes to every attempt's outcome (ok, error, rejected by a breaker); returns the disposer. */
  onAttempt(listener: Listener<AttemptEvent>): Disposer {
    return this.attemptEvents.on(listener);
  }

  /**
   * measure hands each attempt's and each call's duration to `m` as plain arguments, with no event
   * object built per attempt (what bulwark/metrics' histograms use); answers the disposer. @internal
   */
  measure(m: ClientMeasure): Disposer {
    if (m === null || typeof m !== 'object' || typeof m.answered !== 'function' || typeof m.attempt !== 'function' || typeof m.call !== 'function') {
      throw new TypeError(`ResilientClient.measure: m must have answered(), attempt() and call(), got ${showValue(m)}`);
    }
    // The durations noted so far go to the measures there were when their calls answered.
    this.ctx.pending.flushAll(this.ctx.measure);
    this.measures = [...this.measures, m];
    this.ctx.measure = fanOut(this.measures);
    let active = true;
    return () => {
      if (!active) return;
      active = false;
      this.ctx.pending.flushAll(this.ctx.measure);
      this.measures = this.measures.filter((x) => x !== m);
      this.ctx.measure = fanOut(this.measures);
    };
  }

  /**
   * call runs `fn` on an instance of `service` through the guarded-call flow (see the module comment)
   * and answers its value, the fallback's, or the last error: NotFoundError for a service the registry
   * does not know, NoInstanceError when it has no instance, BreakerOpenError, BulkheadRejectedError,
   * TimeoutError, RetryBudgetExhaustedError (cause: the last failure), or the task's own error.
   */
  call<T>(service: string, fn: InstanceTask<T>, options?: CallOptions<T>): Promise<T> {
    // A bad argument is the caller's error: rejected before anything counts, retries or falls back.
    if (typeof service !== 'string' || service.length === 0) {
      return Promise.reject(new TypeError(`ResilientClient.call: service must be a non-empty string, got ${showValue(service)}`));
    }
    if (typeof fn !== 'function') return Promise.reject(new TypeError(`ResilientClient.call: fn must be a function, got ${showValue(fn)}`));
    if (options !== undefined) {
      if (options === null || typeof options !== 'object')
        return Promise.reject(new TypeError(`ResilientClient.call: options must be an object, got ${showValue(options)}`));
      const signal: unknown = options.signal;
      if (signal !== undefined && !(signal instanceof AbortSignal)) {
        return Promise.reject(new TypeError(`ResilientClient.call: options.signal must be an AbortSignal, got ${showValue(signal)}`));
      }
    }
    return this.run(service, fn, options, undefined);
  }

  /**
   * fetch sends an HTTP request to an instance of the service named by the URL's host
   * (`http://payments/api/x`), through the guarded-call flow, and answers a WHATWG Response (body read).
   * A 5xx or a network error fails the attempt; idempotent methods are retried on another instance,
   * others only when `init.retry` says so. Rejects with NotFoundError for a service the registry does not
   * know, TypeError for a bad URL or init; see `call` for the rest.
   */
  fetch(url: string | URL, init?: FetchInit): Promise<Response> {
    let plan;
    try {
      plan = planFetch(url, init);
    } catch (err) {
      return Promise.reject(err);
    }
    if (this.closing !== undefined) return Promise.reject(new ClosedError('ResilientClient is closed'));
    const pools = (this.pools ??= new OriginPools(this.poolsOptions));
    const maxBytes = this.maxResponseBytes;
    const options: CallOptions<Response> = {
      retry: init?.retry ?? plan.retryByDefault,
      ...(init?.key === undefined ? {} : { key: init.key }),
      ...(init?.timeoutMs === undefined ? {} : { timeoutMs: init.timeoutMs }),
      ...(init?.fallback === undefined ? {} : { fallback: init.fallback }),
      ...(init?.signal === undefined ? {} : { signal: init.signal }),
    };
    return this.run(plan.service, (instance, signal) => fetchAttempt(pools, plan, instance, signal, maxBytes), options, failedStatus);
  }

  /**
   * state returns the per-service parts (balancer, breakers, bulkhead, budget) of `service`, opening
   * them on first use. For views and tests; calls do not need it.
   */
  service(service: string): Promise<ServiceState> {
    return this.stateOf(service);
  }

  /**
   * setWeights sets the weight overrides of `service`'s instances (instance id → weight; see
   * `Balancer.setWeights`: an override beats `metadata.weight`, 0 drains the instance), replacing the
   * ones set before, or removes them (`undefined`). They apply to the service's balancer now if it is
   * open, and to the one made when it opens (again after an eviction). Bad overrides throw a TypeError
   * or RangeError naming them, and change nothing; so does a service's first overrides once `maxServices`
   * services hold some (a RangeError: remove some first).
   */
  setWeights(service: string, overrides: WeightOverrides | undefined): void {
    if (typeof service !== 'string' || service.length === 0)
      throw new TypeError(`ResilientClient.setWeights: service must be a non-empty string, got ${showValue(service)}`);
    const checked = checkWeightOverrides('ResilientClient.setWeights', overrides);
    const frozen = checked === undefined ? undefined : Object.freeze(Object.fromEntries(checked));
    if (frozen === undefined) this.weightsBy.delete(service);
    else {
      this.ownEntry('setWeights', this.weightsBy, service);
      this.weightsBy.set(service, frozen);
    }
    this.services.get(service)?.setWeights(frozen);
  }

  /**
   * setFault sets the fault injected into `service`'s attempts (see `FaultInjector`: delay, abort,
   * ttlMs from now), in place of the client's `fault` option, or removes it (`undefined`: back to the
   * `fault` option, if any). Applies to the service now if it is open, else when it opens. Bad options
   * throw a TypeError or RangeError naming them, and change nothing; so does a service's first fault once
   * `maxServices` services hold one (a RangeError: remove some first).
   */
  setFault(service: string, options: FaultOptions | undefined): void {
    if (typeof service !== 'string' || service.length === 0)
      throw new TypeError(`ResilientClient.setFault: service must be a non-empty string, got ${showValue(service)}`);
    if (options !== undefined) void within('ResilientClient.setFault', '', 'FaultInjector', () => new FaultInjector(options)).close();
    if (options === undefined) this.faultsBy.delete(service);
    else {
      this.ownEntry('setFault', this.faultsBy, service);
      this.faultsBy.set(service, options);
    }
    this.services.get(service)?.setFault(this.faultsBy.get(service) ?? this.stateOptions.fault);
  }

  /**
   * serviceOptions answers the options `service` runs with (or will, once called): its own, set by
   * `reconfigureService`, or the client's. Fresh plain data: `reconfigureService(service, before)` returns to it.
   */
  serviceOptions(service: string): ServiceLiveOptions {
    const own = this.serviceLive.get(service);
    return own !== undefined ? structuredClone(own) : this.clientServiceOptions();
  }

  /**
   * ownEntry refuses, with a RangeError naming the bound, a service's first setting of its own (through
   * `verb`) once `maxServices` services hold one in `entries`: what operators set per service is bounded as
   * the services themselves are. Setting a service back to the client's options frees its entry.
   */
  private ownEntry(verb: string, entries: Map<string, unknown>, service: string): void {
    if (entries.has(service) || entries.size < this.maxServices) return;
    throw new RangeError(
      `ResilientClient.${verb}: at most maxServices (${this.maxServices}) services may hold settings of their own; ${service} would be one more (set another back first)`,
    );
  }

  /** clientServiceOptions answers the client's own service options, in full (fresh plain data). */
  private clientServiceOptions(): ServiceLiveOptions {
    const o = this.stateOptions;
    const backoff = within('ResilientClient', 'retryBackoff', 'Backoff', () => new Backoff({ ...serviceStateDefaults.retryBackoff, ...o.retryBackoff }));
    return {
      timeoutMs: this.timeoutMs,
      maxAttempts: this.maxAttempts,
      bulkhead: new Bulkhead({ ...serviceStateDefaults.bulkhead, ...o.bulkhead }).options(),
      retryBudget: new RetryBudget({ ...o.retryBudget, clock: this.ctx.clock }).options(),
      retryBackoff: { initialMs: backoff.initialMs, maxMs: backoff.maxMs, multiplier: backoff.multiplier, jitter: backoff.jitter },
    };
  }

  /**
   * reconfigureService changes `service`'s options while the client runs — `timeoutMs`, `maxAttempts`,
   * `bulkhead`, `retryBudget`, `retryBackoff`, each nested one laid over the one it runs — validated as the
   * constructor validates them (the same errors); every other option is the whole client's and is refused
   * with a TypeError. All of it applies or, when it throws, none. A service not called yet gets them when
   * it opens. What is kept: calls under way keep their deadline and attempts; the bulkhead keeps its
   * running and queued calls, the budget its counts (see Bulkhead and RetryBudget). Breakers and balancer
   * weights are components of their own (`breakers.get(name)`, the balancer). Bounded: options equal to
   * the client's own free the service's entry, and a service's first options of its own once `maxServices`
   * services hold some are refused with a RangeError, changing nothing.
   */
  reconfigureService(service: string, partial: ServiceLivePartial): void {
    if (typeof service !== 'string' || service.length === 0)
      throw new TypeError(`ResilientClient: service must be a non-empty string, got ${showValue(service)}`);
    const fixed = Object.keys(RESILIENT_CLIENT_KEYS).filter((k) => !(SERVICE_LIVE_KEYS as readonly string[]).includes(k));
    const p = liveOptions('ResilientClient', partial as ResilientClientOptions, RESILIENT_CLIENT_KEYS, []);
    for (const key of fixed) {
      if (Object.hasOwn(p, key))
        throw new TypeError(
          `ResilientClient: ${key} cannot change on a running client; it is set at construction only (reconfigureService changes ${SERVICE_LIVE_KEYS.join(', ')})`,
        );
    }
    const now = this.serviceOptions(service);
    const nested = <K extends 'bulkhead' | 'retryBudget' | 'retryBackoff'>(key: K): ServiceLiveOptions[K] => {
      const v = (p as Record<string, unknown>)[key];
      if (v === undefined) return now[key];
      if (v === null || typeof v !== 'object') throw new TypeError(`ResilientClient: ${key} must be an object, got ${showValue(v)}`);
      return { ...now[key], ...v } as ServiceLiveOptions[K];
    };
    const next: ServiceLiveOptions = {
      timeoutMs: finite('ResilientClient', 'timeoutMs', p.timeoutMs ?? now.timeoutMs, 0, MAX_TIMER_MS),
      maxAttempts: integer('ResilientClient', 'maxAttempts', p.maxAttempts ?? now.maxAttempts, 1, 100),
      bulkhead: nested('bulkhead'),
      retryBudget: nested('retryBudget'),
      retryBackoff: nested('retryBackoff'),
    };
    // Validate the nested ones as the constructor does (named under the client) before anything changes.
    within('ResilientClient', 'bulkhead', 'Bulkhead', () => new Bulkhead(next.bulkhead));
    within('ResilientClient', 'retryBudget', 'RetryBudget', () => new RetryBudget(next.retryBudget));
    within('ResilientClient', 'retryBackoff', 'Backoff', () => new Backoff(next.retryBackoff));
    if (isDeepStrictEqual(next, this.clientServiceOptions())) {
      // Back to the client's own options: the service keeps no entry of its own (see `ownEntry`).
      this.serviceLive.delete(service);
      this.serviceTimeouts.delete(service);
    } else {
      this.ownEntry('reconfigureService', this.serviceLive, service);
      this.serviceLive.set(service, next);
      this.serviceTimeouts.set(service, next.timeoutMs === 0 ? undefined : this.timeoutFor(next.timeoutMs));
    }
    const state = this.services.get(service);
    if (state !== undefined) this.applyService(state, next);
  }

  /** applyService gives an open service state its own options (see reconfigureService). */
  private applyService(state: ServiceState, o: ServiceLiveOptions): void {
    const own = this.serviceTimeouts;
    state.timeout = own.has(state.name) ? own.get(state.name) : this.defaultTimeout;
    state.reconfigure(o);
  }

  /** openServices returns the states of the services called so far. */
  openServices(): ServiceState[] {
    return [...this.services.values()];
  }

  /**
   * close stops every service's balancer (watches, probes), closes the HTTP pools (letting requests in
   * flight finish) and the registry cache the client made; later calls reject with ClosedError. A
   * registry (or RegistryCache) you passed in stays open: close it yourself.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const states = [...this.services.values()];
      this.services.clear();
      this.lastState = undefined;
      await Promise.all(states.map((s) => s.close()));
      await this.pools?.close();
      if (this.ownsRegistry) await this.registry.close();
    })();
    return this.closing;
  }

  /** Symbol.asyncDispose closes the client (`await using client = new ResilientClient(…)`). */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** retainPools closes the pools of instances no service lists any more. */
  private retainPools(): void {
    const pools = this.pools;
    if (pools === undefined || pools.size === 0) return;
    const live = new Set<string>();
    for (const s of this.services.values()) {
      for (const inst of s.instances()) {
        live.add(originOf('http:', inst));
        live.add(originOf('https:', inst));
      }
    }
    pools.retain(live);
  }

  /** run is `call` with an optional result judge (fetch: an HTTP 5xx is a failed attempt). @internal */
  run<T>(service: string, fn: InstanceTask<T>, options: CallOptions<T> | undefined, judge: ResultJudge<T> | undefined): Promise<T> {
    if (clientCallChannel.hasSubscribers) return this.runTraced(service, fn, options, judge);
    return this.runUntraced(service, fn, options, judge);
  }

  /** runTraced is `run` traced on `bulwark:client:call` (a method of its own: no closure in `run`'s plain path). */
  private runTraced<T>(service: string, fn: InstanceTask<T>, options: CallOptions<T> | undefined, judge: ResultJudge<T> | undefined): Promise<T> {
    const key = options?.key;
    return clientCallChannel.tracePromise(() => this.runUntraced(service, fn, options, judge), { service, key: typeof key === 'string' ? key : undefined });
  }

  /** runUntraced is `run` without the `bulwark:client:call` trace around it. */
  private runUntraced<T>(service: string, fn: InstanceTask<T>, options: CallOptions<T> | undefined, judge: ResultJudge<T> | undefined): Promise<T> {
    if (this.closing !== undefined) return Promise.reject(new ClosedError('ResilientClient is closed'));
    const last = this.lastState;
    if (last !== undefined && last.name === service) return this.runOn(last, fn, options, judge);
    const state = this.services.get(service);
    if (state === undefined) return this.stateOf(service).then((s) => this.runOn(s, fn, options, judge));
    this.lastState = state;
    return this.runOn(state, fn, options, judge);
  }

  private runOn<T>(s: ServiceState, fn: InstanceTask<T>, options: CallOptions<T> | undefined, judge: ResultJudge<T> | undefined): Promise<T> {
    const counters = this.counters;
    counters.calls++;
    let timeout = s.timeout;
    let retry = s.retry;
    let signal: AbortSignal | undefined;
    let key: string | undefined;
    let isFailure: ((err: unknown) => boolean) | undefined;
    let fallback: FallbackStrategy<T> | Fallback<T> | undefined;
    if (options !== undefined) {
      try {
        if (options.timeoutMs !== undefined) timeout = this.timeoutFor(options.timeoutMs);
        if (options.retry !== undefined) retry = s.retryFor(options.retry, s.maxAttempts);
        if (options.key !== undefined && typeof options.key !== 'string')
          throw new TypeError(`ResilientClient.call: key must be a string, got ${showValue(options.key)}`);
        if (options.isFailure !== undefined && typeof options.isFailure !== 'function')
          throw new TypeError(`ResilientClient.call: isFailure must be a function, got ${showValue(options.isFailure)}`);
        fallback = options.fallback;
        if (fallback !== undefined && typeof fallback !== 'function' && !(fallback instanceof Fallback)) {
          throw new TypeError(`ResilientClient.call: fallback must be a function or a Fallback, got ${showValue(fallback)}`);
        }
      } catch (err) {
        counters.calls--;
        return Promise.reject(err);
      }
      signal = options.signal;
      key = options.key;
      isFailure = options.isFailure;
    }
    const policyFallback = fallback instanceof Fallback;
    const run = new CallRun<T>(
      this.ctx,
      s,
      fn,
      key,
      timeout,
      signal,
      isFailure,
      judge,
      retry,
      policyFallback ? undefined : (fallback as FallbackStrategy<T> | undefined),
    );
    // The common call (no signal of its own, no policy Fallback, which hears every outcome, and a free
    // bulkhead slot) runs its first attempt on its own promise (see CallRun); counted in the retry
    // budget as Retry.execute counts it (Retry's budget is the service's).
    if (signal === undefined && !policyFallback && s.bulkhead.tryEnter()) {
      s.budget.recordCall();
      return run.call();
    }
    return this.runGeneric(s, run, retry, fallback, signal);
  }

  /** runGeneric runs a call through Retry and the bulkhead from its first attempt (see CallRun). */
  private runGeneric<T>(
    s: ServiceState,
    run: CallRun<T>,
    retry: Retry | undefined,
    fallback: FallbackStrategy<T> | Fallback<T> | undefined,
    signal: AbortSignal | undefined,
  ): Promise<T> {
    const counters = this.counters;
    const measure = this.ctx.measure;
    let p: Promise<T>;
    if (retry === undefined) {
      s.budget.recordCall();
      p = run.inBulkhead(signal ?? neverAborted);
    } else {
      p = retry.execute(run.inBulkhead, signal === undefined ? undefined : { signal });
    }
    if (fallback instanceof Fallback) {
      let failed = false;
      const inner = p;
      p = fallback.execute(() =>
        inner.catch((err: unknown): never => {
          run.ended(err);
          failed = true;
          this.note(err);
          throw err;
        }),
      );
      return p.then(
        (value) => {
          if (failed) counters.fallbacks++;
          else counters.succeeded++;
          if (failed && measure !== undefined) measure.call(s.name, 'fallback', this.since(run));
          return value;
        },
        (err: unknown) =>
          measure === undefined ? this.failed<T>(err, undefined, signal, true) : this.failedMeasured<T>(err, undefined, signal, true, run, measure, s.name),
      );
    }
    return this.settle(run, p, fallback, signal);
  }

  /** settle answers what a call answers once `p`, its attempts, settles: their value, or the fallback's, the last HTTP answer or the error. */
  private settle<T>(run: CallRun<T>, p: Promise<T>, fallback: FallbackStrategy<T> | undefined, signal: AbortSignal | undefined): Promise<T> {
    const counters = this.counters;
    return p.then(
      (value) => {
        counters.succeeded++; // measured as it answered (ClientMeasure.answered)
        return value;
      },
      (err: unknown) => this.attemptsFailed(run, err, fallback, signal),
    );
  }

  /** attemptsFailed answers what a call answers when its attempts failed with `err`: the fallback's, the last HTTP answer, or the error. */
  private attemptsFailed<T>(run: CallRun<T>, err: unknown, fallback: FallbackStrategy<T> | undefined, signal: AbortSignal | undefined): T | PromiseLike<T> {
    run.ended(err);
    const measure = this.ctx.measure;
    return measure === undefined ? this.failed(err, fallback, signal) : this.failedMeasured(err, fallback, signal, false, run, measure, run.service.name);
  }

  /** afterFirst carries on a call whose first attempt ran on its own promise and failed (RunContext.afterFirst). */
  private afterFirst<T>(run: CallRun<T>, err: unknown): T | PromiseLike<T> {
    if (run.retry !== undefined) return this.settle(run, run.retry.retryAfter(err, run.inBulkhead, undefined), run.fallback, undefined);
    return this.attemptsFailed(run, err, run.fallback, undefined);
  }

  /** since answers the ms since the call's first attempt started (0 when none ran). */
  private since(run: { readonly firstStart: number }): number {
    return run.firstStart === -1 ? 0 : this.ctx.clock.now() - run.firstStart;
  }

  /** failedMeasured is `failed` for a measured call: the call's outcome and duration go to `measure` when it ends. */
  private failedMeasured<T>(
    err: unknown,
    fallback: FallbackStrategy<T> | undefined,
    signal: AbortSignal | undefined,
    noted: boolean,
    run: CallRun<T>,
    measure: ClientMeasure,
    service: string,
  ): T | PromiseLike<T> {
    const fallbacks = this.counters.fallbacks;
    let r: T | PromiseLike<T>;
    try {
      r = this.failed(err, fallback, signal, noted);
    } catch (e) {
      measure.call(service, 'failed', this.since(run));
      throw e;
    }
    if (this.counters.fallbacks === fallbacks) {
      measure.call(service, 'failed', this.since(run)); // the last HTTP answer
      return r;
    }
    return Promise.resolve(r).then(
      (value) => {
        measure.call(service, 'fallback', this.since(run));
        return value;
      },
      (e: unknown) => {
        measure.call(service, 'failed', this.since(run));
        throw e;
      },
    );
  }

  /** failed ends a call that failed: the fallback answers, or the last HTTP answer, or the error. */
  private failed<T>(err: unknown, fallback: FallbackStrategy<T> | undefined, signal: AbortSignal | undefined, noted = false): T | PromiseLike<T> {
    const counters = this.counters;
    if (!noted) this.note(err);
    if (fallback !== undefined && !signal?.aborted) {
      counters.fallbacks++;
      return fallback(err, signal ?? neverAborted);
    }
    const last = err instanceof ResultFailure ? err : (err as { cause?: unknown })?.cause;
    if (last instanceof ResultFailure) {
      // The last attempt answered, with a failure (an HTTP 5xx): that answer is the call's answer.
      counters.failed++;
      return last.value as T;
    }
    counters.failed++;
    throw err;
  }

  /** note counts what a failed call's error says about why it failed. */
  private note(err: unknown): void {
    if (isBulwarkError(err, RetryBudgetExhaustedError.code)) this.counters.retriesRefused++;
    else if (isBulwarkError(err, BulkheadRejectedError.code)) this.counters.bulkheadRejections++;
  }

  private timeoutFor(ms: number): AttemptTimeout | undefined {
    if (ms === this.timeoutMs) return this.defaultTimeout;
    finite('ResilientClient.call', 'timeoutMs', ms, 0, MAX_TIMER_MS);
    if (ms === 0) return undefined;
    let t = this.timeouts.get(ms);
    if (t === undefined) {
      if (this.timeouts.size >= 64) this.timeouts.clear(); // bound the cache of per-value timeouts
      t = new AttemptTimeout(ms, this.ctx.clock);
      this.timeouts.set(ms, t);
    }
    return t;
  }

  private stateOf(service: string): Promise<ServiceState> {
    const s = this.services.get(service);
    if (s !== undefined) return Promise.resolve(s);
    if (typeof service !== 'string' || service.length === 0) {
      return Promise.reject(new TypeError(`ResilientClient: service must be a non-empty string, got ${showValue(service)}`));
    }
    return this.opening.do(service, async () => {
      // Ask the registry first: a service it does not know is NotFoundError, not an empty balancer.
      const instances = await this.registry.getService(service);
      if (instances.length === 0) throw new NotFoundError(`service ${service} has no instances`);
      if (this.closing !== undefined) throw new ClosedError('ResilientClient is closed');
      const state = new ServiceState(service, this.registry, this.stateOptions, this.maxAttempts, () => this.retainPools());
      state.timeout = this.defaultTimeout;
      const own = this.serviceLive.get(service);
      if (own !== undefined) this.applyService(state, own);
      try {
        await state.ready();
      } catch (err) {
        await state.close();
        throw err;
      }
      if (this.closing !== undefined) {
        await state.close();
        throw new ClosedError('ResilientClient is closed');
      }
      // The operator's settings as they are now (no await since): weights, and the fault.
      const weights = this.weightsBy.get(service);
      if (weights !== undefined) state.setWeights(weights);
      const fault = this.faultsBy.get(service) ?? this.stateOptions.fault;
      if (fault !== undefined) state.setFault(fault);
      this.services.set(service, state);
      if (this.services.size > this.maxServices) {
        const [oldest, evicted] = this.services.entries().next().value as [string, ServiceState];
        this.services.delete(oldest);
        if (this.lastState === evicted) this.lastState = undefined;
        void evicted.close();
      }
      return state;
    });
  }
}

/** fanOut answers one ClientMeasure for several (undefined for none). */
function fanOut(ms: readonly ClientMeasure[]): ClientMeasure | undefined {
  if (ms.length <= 1) return ms[0];
  return {
    answered: (service, durations, n) => {
      for (const m of ms) m.answered(service, durations, n);
    },
    attempt: (service, failed, latencyMs) => {
      for (const m of ms) m.attempt(service, failed, latencyMs);
    },
    call: (service, outcome, durationMs) => {
      for (const m of ms) m.call(service, outcome, durationMs);
    },
  };
}
