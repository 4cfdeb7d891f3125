/**
 * ServiceState holds what ResilientClient keeps per service: its balancer (following the registry),
 * its breaker and one breaker per instance (from a BreakerGroup, named `<service>` and
 * `<service>/<instance id>`), its bulkhead, its retry budget and the Retry that spends it.
 *
 * Instance breakers obey the balancer's cap and panic rule (Envoy's `max_ejection_percent` and panic
 * threshold), as health ejections do: each breaker that leaves closed is held out in the balancer
 * (`Balancer.hold`: 'breaker' on evidence, 'forced' while `heldOpen`), which counts it with the ejected
 * and down instances. One that the cap or panic keeps in rotation is called through its open breaker
 * (`admitAnyway`: outcomes still counted) instead of being passed over; a forced one never is. So one
 * dead instance and one failing half its calls leave the flaky one serving, and retries answer most
 * calls, where before both were out and every call went to the fallback. A breaker its fleet holds open
 * (bulwark/fleet) is `heldOpen` too, so it is held as forced: the fleet's pooled evidence, and the probes
 * it rations across the fleet, are not one process's to override by cap or panic.
 */
import { NoInstanceError, isBulwarkError } from '../core/errors.js';
import { Backoff, type BackoffOptions } from '../core/backoff.js';
import { systemClock, type Clock } from '../core/clock.js';
import { fn as fnOption, integer, options as optionsObject, showValue, within } from '../core/validate.js';
import { Balancer, type BalancerOptions } from '../balancer/balancer.js';
import { BreakerGroup } from '../breaker/breaker-group.js';
import { CircuitBreaker } from '../breaker/circuit-breaker.js';
import type { Breaker, StateChange } from '../breaker/index.js';
import { SreBreaker } from '../breaker/sre-breaker.js';
import { Bulkhead, type BulkheadOptions } from '../policy/bulkhead.js';
import { Retry, defaultShouldRetry } from '../policy/retry.js';
import { RetryBudget, type RetryBudgetOptions } from '../policy/retry-budget.js';
import { FaultInjector } from '../policy/fault.js';
import type { FaultOptions } from '../policy/types.js';
import type { WeightOverrides } from '../balancer/weight-overrides.js';
import type { Registry, ServiceInstance } from '../registry/types.js';
import { isRetryable, type ServiceParts } from './call-run.js';
import type { AdmissionToken, CallBreaker, ServiceBalancer } from './types.js';
import type { AttemptTimeout } from './deadlines.js';
import type { AnsweredBatch } from './answered-batch.js';

/** ServiceStateOptions are the client options that shape each service's parts. */
export interface ServiceStateOptions {
  /**
   * Options of each service's Balancer (strategy, outlier detection, active health, panic threshold).
   * Defaults to `{ strategy: 'p2c' }` with the balancer's own defaults.
   */
  balancer?: Omit<BalancerOptions, 'registry' | 'service' | 'instances'>;
  /** Makes the balancer of a service instead, e.g. a fake in tests. Defaults to a Balancer over the registry. */
  balancerFactory?: (service: string, registry: Registry) => ServiceBalancer & { ready?(): Promise<void> };
  /**
   * The breakers: `<service>` guards the whole service, `<service>/<instance id>` each instance.
   * Defaults to a group making an SreBreaker per service and a CircuitBreaker per instance.
   */
  breakers?: BreakerGroup;
  /** Each service's retry budget. Defaults to the RetryBudget defaults (20 % of calls + 10/s over 10 s). */
  retryBudget?: RetryBudgetOptions;
  /** Waits between attempts. A retry goes to another instance, so the first wait is short. Defaults to 5 ms doubling up to 1 000 ms, full jitter. */
  retryBackoff?: BackoffOptions;
  /** Each service's bulkhead (attempts in flight at once). Defaults to `{ maxConcurrent: 1 000, maxQueued: 0 }`. */
  bulkhead?: BulkheadOptions;
  /**
   * A fault injected into every attempt of every service (a rehearsal: see `FaultInjector`); each
   * service's injector is made when the service opens, its ttl counting from then. `setFault` sets one
   * service's instead. Defaults to none.
   */
  fault?: FaultOptions;
  /** The time source. Defaults to the monotonic system clock. */
  clock?: Clock;
}

/** Defaults for the per-service parts. */
export const serviceStateDefaults = Object.freeze({
  retryBackoff: Object.freeze({ initialMs: 5, maxMs: 1_000 }) as BackoffOptions,
  bulkhead: Object.freeze({ maxConcurrent: 1_000, maxQueued: 0 }) as BulkheadOptions,
});

/**
 * defaultBreakerGroup makes an SreBreaker for a service name and a CircuitBreaker for `<service>/<id>`,
 * on `clock` (the client's) when one is given, else on the breakers' default coarse clock.
 */
export function defaultBreakerGroup(clock?: Clock): BreakerGroup {
  if (clock === undefined) return new BreakerGroup({ factory: (name) => (name.includes('/') ? new CircuitBreaker({ name }) : new SreBreaker({ name })) });
  return new BreakerGroup({ clock, factory: (name) => (name.includes('/') ? new CircuitBreaker({ name, clock }) : new SreBreaker({ name, clock })) });
}

/** A breaker that admits everything: for names the group excludes. */
const OPEN_DOOR: CallBreaker = Object.freeze({
  admit: (): AdmissionToken => NOOP_TOKEN,
});
const NOOP_TOKEN: AdmissionToken = Object.freeze({ success() {}, failure() {}, release() {} });

/**
 * shouldRetry: the policy default, but not when there is no instance at all (another try finds none
 * either), nor for errors that were not the instance's failure (`isFailure` said so).
 */
function shouldRetry(err: unknown): boolean {
  return defaultShouldRetry(err) && !isBulwarkError(err, NoInstanceError.code) && isRetryable(err);
}

/** ServiceState is one service's balancer, breakers, bulkhead and retry budget. */
export class ServiceState implements ServiceParts {
  readonly balancer: ServiceBalancer & { ready?(): Promise<void> };
  readonly breakers: BreakerGroup;
  readonly breaker: CallBreaker;
  readonly bulkhead: Bulkhead;
  readonly budget: RetryBudget;
  /** The Retry of calls that use the service's maxAttempts (undefined when it is 1). */
  retry: Retry | undefined;
  /** @internal The deadline of each attempt (undefined: none): the client's, or the service's own (`ResilientClient.reconfigureService`). */
  timeout: AttemptTimeout | undefined;
  /** Attempts per call, the first included, when retry is on: the client's, or the service's own (`ResilientClient.reconfigureService`). */
  maxAttempts: number;
  /** The fault injected into this service's attempts (`setFault`), or undefined. */
  fault: FaultInjector | undefined;
  /** The balancer is the Balancer made here on the client's clock: reports carry the attempt's end reading (ServiceParts.sharesClock). */
  readonly sharesClock: boolean;
  /** @internal The durations of the service's answered calls not yet handed to the client's measure (ServiceParts.answered). */
  answered: AnsweredBatch | undefined = undefined;
  private backoff: BackoffOptions;
  private readonly clock: Clock | undefined;
  private readonly instanceBreakers = new Map<string, Breaker | undefined>();
  private readonly retries = new Map<number, Retry>();
  private readonly unsubscribe: (() => void) | undefined;
  /** Ids of instances whose breaker refused a pick, until a look finds it no longer open. */
  private readonly refusingIds = new Set<string>();
  /** The disposers of the instance breakers' state-change subscriptions, by instance id. */
  private readonly watching = new Map<string, () => void>();
  /** The balancer, when it applies the cap and panic rule (a Balancer); else refusals stand. */
  private readonly capper: Balancer | undefined;

  /**
   * validate checks the options once, at the client's construction, nested ones included: a bad
   * `bulkhead`, `retryBudget`, `retryBackoff` or `balancer` throws there, named under the client
   * (`ResilientClient: balancer.strategy must be one of …`), not at every call. `givenClock` is the clock
   * the caller gave, if any: the default breakers run on it (else on their coarse clock, cheaper per call).
   */
  static validate(options: ServiceStateOptions, givenClock?: Clock): ServiceStateOptions {
    const owner = 'ResilientClient';
    const o = optionsObject(owner, options);
    if (o.balancerFactory !== undefined) fnOption(owner, 'balancerFactory', o.balancerFactory);
    if (o.breakers !== undefined && !(o.breakers instanceof BreakerGroup))
      throw new TypeError(`${owner}: breakers must be a BreakerGroup, got ${showValue(o.breakers)}`);
    within(owner, 'retryBudget', 'RetryBudget', () => new RetryBudget(o.retryBudget));
    if (o.fault !== undefined) void within(owner, 'fault', 'FaultInjector', () => new FaultInjector(o.fault)).close();
    within(owner, 'bulkhead', 'Bulkhead', () => new Bulkhead({ ...serviceStateDefaults.bulkhead, ...optionsObject('Bulkhead', o.bulkhead) }));
    within(owner, 'retryBackoff', 'Backoff', () => new Backoff({ ...serviceStateDefaults.retryBackoff, ...optionsObject('Backoff', o.retryBackoff) }));
    if (o.balancerFactory === undefined) {
      // A balancer over no instances, made to check the options and closed at once (it holds nothing yet).
      const clock = o.balancer?.clock ?? o.clock ?? systemClock;
      const probe = within(
        owner,
        'balancer',
        'Balancer',
        () => new Balancer({ strategy: 'p2c', ...optionsObject('Balancer', o.balancer), clock, instances: [] }),
      );
      void probe.close();
    }
    return { ...o, breakers: o.breakers ?? defaultBreakerGroup(givenClock) };
  }

  constructor(
    readonly name: string,
    registry: Registry,
    options: ServiceStateOptions,
    maxAttempts: number,
    onInstances?: () => void,
  ) {
    this.balancer =
      options.balancerFactory?.(name, registry) ??
      new Balancer({ strategy: 'p2c', ...options.balancer, clock: options.balancer?.clock ?? options.clock, registry, service: name });
    // Made here on the client's clock (the clock of every state: see ResilientClient), unless the balancer options name another.
    this.sharesClock = options.balancerFactory === undefined && options.clock !== undefined && (options.balancer?.clock ?? options.clock) === options.clock;
    this.breakers = options.breakers!;
    this.breaker = this.breakers.get(name) ?? OPEN_DOOR;
    this.bulkhead = new Bulkhead({ ...serviceStateDefaults.bulkhead, ...options.bulkhead });
    this.budget = new RetryBudget({ ...options.retryBudget, clock: options.retryBudget?.clock ?? options.clock });
    this.backoff = { ...serviceStateDefaults.retryBackoff, ...options.retryBackoff };
    this.clock = options.clock;
    this.maxAttempts = maxAttempts;
    this.retry = maxAttempts > 1 ? this.makeRetry(maxAttempts) : undefined;
    this.capper = this.balancer instanceof Balancer ? this.balancer : undefined;
    if (this.balancer instanceof Balancer) {
      const b = this.balancer;
      this.unsubscribe = b.onChange((e) => {
        if (e.type !== 'instances') return;
        this.prune(b.instances());
        onInstances?.();
      });
    }
  }

  /** instances answers every instance the balancer knows (healthy or not). */
  instances(): readonly ServiceInstance[] {
    return this.balancer instanceof Balancer ? this.balancer.instances() : [];
  }

  /** ready resolves once the balancer has its first instance list. */
  ready(): Promise<void> {
    return this.balancer.ready?.() ?? Promise.resolve();
  }

  /** instanceBreaker answers the breaker of `instance` (`<service>/<id>` in the group). */
  instanceBreaker(instance: ServiceInstance): CallBreaker {
    let b = this.instanceBreakers.get(instance.id);
    if (b === undefined && !this.instanceBreakers.has(instance.id)) {
      b = this.breakers.get(`${this.name}/${instance.id}`);
      this.instanceBreakers.set(instance.id, b);
      if (b !== undefined) this.follow(instance.id, b);
    }
    return b ?? OPEN_DOOR;
  }

  /** breakerOf answers the breaker of instance `id` if one was made, for views. */
  breakerOf(id: string): Breaker | undefined {
    return this.instanceBreakers.get(id);
  }

  /** isOpen tells whether instance `id`'s breaker is open now: open on evidence, or held open by force (an isolate, a fleet hold; an SreBreaker has no other open state). */
  isOpen(id: string): boolean {
    const b = this.instanceBreakers.get(id) as { readonly state?: string; readonly heldOpen?: boolean } | undefined;
    return b !== undefined && (b.state === 'open' || b.heldOpen === true);
  }

  /** refusing is true while some instance's breaker has refused a pick and may still be open. */
  get refusing(): boolean {
    return this.refusingIds.size > 0;
  }

  /** noteRefusal remembers that instance `id`'s breaker refused a pick, and holds it out in the balancer. */
  noteRefusal(id: string): void {
    const b = this.instanceBreakers.get(id);
    if (b === undefined) return;
    this.refusingIds.add(id); // bounded by the instances known
    this.capper?.hold(id, b.heldOpen === true ? 'forced' : 'breaker');
  }

  /**
   * avoids tells whether picks should leave instance `id` out up front: its breaker refused, is still
   * open, and the balancer holds it out (within the cap, not in panic, or forced). Reading a
   * CircuitBreaker's state moves it to half-open once its open period is over, so the instance comes
   * back for the breaker's probes on time; a breaker without an `open` state (an SreBreaker) is
   * forgotten at the first look unless it is held open (isolated).
   */
  avoids(id: string): boolean {
    if (!this.refusingIds.has(id)) return false;
    if (this.isOpen(id)) return this.capper === undefined || this.capper.isHeldOut(id);
    this.refusingIds.delete(id);
    if (!this.watching.has(id)) this.capper?.unhold(id); // a breaker without events: let go at the first look
    return false;
  }

  /**
   * admitPast answers a token for `instance` when its breaker refused on evidence but the balancer's
   * cap or panic keeps it in rotation: the call goes through the open breaker (`admitAnyway`), whose
   * stats count it. Undefined when the instance is held out, its breaker is forced open or cannot be
   * let past, or it has not refused.
   */
  admitPast(instance: ServiceInstance): AdmissionToken | undefined {
    const id = instance.id;
    if (this.capper === undefined || !this.refusingIds.has(id) || this.capper.isHeldOut(id)) return undefined;
    return this.instanceBreakers.get(id)?.admitAnyway?.();
  }

  /**
   * follow keeps the balancer's hold of instance `id` in step with its breaker: held out ('breaker' on
   * evidence, 'forced' while `heldOpen`) whenever it leaves closed, let go when it closes — so the cap
   * counts every open breaker, also those no pick has run into yet.
   */
  private follow(id: string, b: Breaker): void {
    const capper = this.capper;
    const on = (b as { onStateChange?: (l: (c: StateChange) => void) => () => void }).onStateChange;
    if (capper === undefined || typeof on !== 'function') return;
    const sync = (state: string) => {
      if (state === 'closed') capper.unhold(id);
      else capper.hold(id, b.heldOpen === true ? 'forced' : 'breaker');
    };
    this.watching.set(
      id,
      on.call(b, (c) => sync(c.to)),
    );
    const state = (b as { readonly state?: unknown }).state;
    if (typeof state === 'string' && state !== 'closed') sync(state);
  }

  /** unfollow ends `follow` for instance `id`. */
  private unfollow(id: string): void {
    this.watching.get(id)?.();
    this.watching.delete(id);
  }

  /** isEjected tells whether the balancer's health checks hold `instance` out of rotation. */
  isEjected(instance: ServiceInstance): boolean {
    if (this.balancer.isEjected !== undefined) return this.balancer.isEjected(instance);
    if (this.balancer instanceof Balancer) return !this.balancer.healthy().includes(instance) && !this.balancer.panic;
    return false;
  }

  /** retryFor answers the Retry for a call's `retry` option (undefined: no retry). */
  retryFor(option: boolean | { maxAttempts?: number }, maxAttempts: number): Retry | undefined {
    if (option === true) return this.retry;
    if (option === false) return undefined;
    if (option === null || typeof option !== 'object')
      throw new TypeError(`ResilientClient.call: retry must be a boolean or { maxAttempts }, got ${showValue(option)}`);
    const n = integer('ResilientClient.call', 'retry.maxAttempts', option.maxAttempts ?? maxAttempts, 1, 100);
    if (n === 1) return undefined;
    let r = this.retries.get(n);
    if (r === undefined) {
      r = this.makeRetry(n);
      this.retries.set(n, r);
    }
    return r;
  }

  /**
   * setFault replaces the fault injected into the service's attempts with one made from `options`
   * (on the client's clock unless they name one), or removes it (`undefined`). Throws, changing
   * nothing, on bad options.
   */
  setFault(options: FaultOptions | undefined): void {
    const next = options === undefined ? undefined : new FaultInjector({ ...(this.clock === undefined ? {} : { clock: this.clock }), ...options });
    void this.fault?.close();
    this.fault = next;
  }

  /**
   * setWeights hands the service's balancer weight overrides (`Balancer.setWeights`); a balancer made by
   * `balancerFactory` gets them when it has a `setWeights` method, and ignores them otherwise.
   */
  setWeights(overrides: WeightOverrides | undefined): void {
    (this.balancer as { setWeights?: (w: WeightOverrides | undefined) => void }).setWeights?.(overrides);
  }

  /**
   * reconfigure applies options already validated (by `ResilientClient.reconfigureService`): the bulkhead
   * and the budget are reconfigured in place (see theirs for what they keep), the Retries get the new
   * backoff, and a new maxAttempts swaps the Retry calls use.
   */
  reconfigure(o: {
    maxAttempts: number;
    bulkhead: Required<BulkheadOptions>;
    retryBudget: Required<Omit<RetryBudgetOptions, 'clock'>>;
    retryBackoff: BackoffOptions;
  }): void {
    this.bulkhead.reconfigure(o.bulkhead);
    this.budget.reconfigure(o.retryBudget);
    this.backoff = { ...o.retryBackoff };
    for (const r of this.retries.values()) r.reconfigure({ backoff: this.backoff });
    if (o.maxAttempts !== this.maxAttempts) {
      this.maxAttempts = o.maxAttempts;
      this.retry = o.maxAttempts > 1 ? this.makeRetry(o.maxAttempts) : undefined;
    } else {
      this.retry?.reconfigure({ backoff: this.backoff });
    }
  }

  /** close stops the balancer (watch, probes) and the fault's timer. */
  async close(): Promise<void> {
    void this.fault?.close();
    this.unsubscribe?.();
    for (const id of [...this.watching.keys()]) this.unfollow(id);
    await this.balancer.close();
  }

  private makeRetry(maxAttempts: number): Retry {
    return new Retry({ maxAttempts, budget: this.budget, backoff: this.backoff, shouldRetry, ...(this.clock === undefined ? {} : { clock: this.clock }) });
  }

  /** prune forgets the breakers of instances that left, here and in the group. */
  private prune(live: readonly ServiceInstance[]): void {
    if (this.instanceBreakers.size === 0) return;
    const ids = new Set(live.map((i) => i.id));
    for (const id of this.refusingIds) if (!ids.has(id)) this.refusingIds.delete(id);
    for (const id of this.instanceBreakers.keys()) {
      if (!ids.has(id)) {
        this.unfollow(id);
        this.instanceBreakers.delete(id);
        this.breakers.delete(`${this.name}/${id}`);
      }
    }
  }
}
