/**
 * GrpcDiscovery: `bulwark:///<service>` targets for grpc-js, resolved through a registry (a
 * `RegistryCache` over Memory or etcd), balanced per attempt by the `bulwark` load-balancing policy.
 *
 * 1. The resolver follows the service with the registry follower (one listing, then watch events,
 *    reconnecting after a backoff). Through a RegistryCache, the cache's one watch of the service serves
 *    every follower; within one GrpcDiscovery, every channel to the service shares one follower.
 *    Instances appear and disappear without restarting the client.
 * 2. The resolver hands grpc-js the endpoints and a service config naming the `bulwark` policy (or
 *    grpc-js's own `round_robin`, for comparison), with grpc-js retrying UNAVAILABLE attempts under the
 *    bulwark policy (see retry.ts); see policy.ts for what the policy does per attempt.
 * 3. A service without instances resolves to no endpoints, and calls fail at once with UNAVAILABLE
 *    and a message naming the service (no hang); a channel made without `channelOptions()` fails the
 *    same way, saying so.
 *
 * Pass `discovery.channelOptions()` as the client's channel options. The channel options carry only
 * the discovery's id (a string): grpc-js copies channel options into subchannel keys.
 */
import type { ChannelCredentials } from '@grpc/grpc-js';
import type { CircuitBreakerOptions } from '../breaker/types.js';
import { systemClock, type Clock } from '../core/clock.js';
import { ClosedError } from '../core/errors.js';
import type { Disposer } from '../core/events.js';
import type { Follower } from '../core/follower.js';
import { clockOption, finite, fn, options as checkOptions, type OptionKeys } from '../core/validate.js';
import { balancerDefaults } from '../balancer/balancer.js';
import { createPicker, type StrategyOption } from '../balancer/strategies.js';
import type { Picker } from '../balancer/types.js';
import { followService } from '../registry/follow.js';
import type { Registry, RegistryEvent, ServiceInstance } from '../registry/types.js';
import {
  errorList,
  okList,
  registerResolver,
  toEndpoint,
  type ChannelOptions,
  type GrpcResolver,
  type GrpcUri,
  type ResolverListener,
  type ServiceConfig,
} from './adapter.js';
import { healthCheckDefaults, type HealthCheckOptions } from './health-prober.js';
import { failureSet } from './status.js';
import type { MetricsDescription } from '../core/metrics-description.js';
import { ensureGrpcJs } from './version.js';
import { POLICY_NAME, registerBulwarkPolicy } from './policy.js';
import { RetryConfig, type GrpcRetryOptions } from './retry.js';
import { OutlierDetector, type OutlierOptions } from '../balancer/health/outlier.js';
import type { RetryBudgetStats } from '../policy/types.js';
import { bind, bindingOf, unbind, type DiscoveryBinding, type GrpcInstanceStats } from './bindings.js';

/** The keys of GrpcDiscoveryOptions, all of them: any other is refused (see `options`). */
const GRPC_DISCOVERY_KEYS = {
  registry: true,
  strategy: true,
  hashHeader: true,
  instanceBreaker: true,
  outlier: true,
  health: true,
  credentials: true,
  retry: true,
  failureCodes: true,
  panicThreshold: true,
  clock: true,
  random: true,
} as const satisfies OptionKeys<GrpcDiscoveryOptions>;
/** The keys of HealthCheckOptions, all of them: any other is refused (see `options`). */
const HEALTH_KEYS = { service: true, intervalMs: true, timeoutMs: true, watch: true } as const satisfies OptionKeys<HealthCheckOptions>;

export type { GrpcInstanceStats } from './bindings.js';

/** The URI scheme of discovery targets: `bulwark:///<service>`. */
export const SCHEME = 'bulwark';
/** The channel option carrying the GrpcDiscovery's id. */
export const DISCOVERY_OPTION = 'bulwark.discovery';
/** The channel option naming the policy ('bulwark' or 'round_robin'). */
export const POLICY_OPTION = 'bulwark.policy';

/** GrpcDiscoveryOptions configures a GrpcDiscovery. */
export interface GrpcDiscoveryOptions {
  /** Where instances come from: a Registry, or (better) a RegistryCache over one. Required. */
  registry: Pick<Registry, 'getService' | 'watch'>;
  /** The pick strategy per attempt: a balancer strategy name, a Picker, or a factory (one picker per channel). Defaults to 'p2c'. */
  strategy?: StrategyOption;
  /** The metadata header whose value keys the ring-hash strategy. Defaults to none. */
  hashHeader?: string;
  /**
   * Options of the CircuitBreaker kept per instance, or false for none: a breaker not closed takes its
   * instance out of rotation within the cap and outside panic (see `outlier` and `panicThreshold`); past
   * them, calls go through the open breaker, counted in its stats. Defaults to `{}` (CircuitBreaker's defaults).
   */
  instanceBreaker?: CircuitBreakerOptions | false;
  /**
   * Outlier detection per channel over every attempt's outcome (the failure codes below; CANCELLED does
   * not count): `consecutiveFailures` failed attempts in a row eject an instance for its ejection time
   * (growing with each ejection); or false for none. Its `maxEjectionPercent` is the cap of every reason
   * an instance is out, ejected or its breaker open: past it, the instances that went out last stay in
   * rotation (50 % without outlier detection). Defaults to `{}` (OutlierDetector's: 5 in a row, 30 s, at most 50 %).
   */
  outlier?: OutlierOptions | false;
  /**
   * Envoy's panic threshold, as the Balancer's: when, after the cap (the outlier options'
   * `maxEjectionPercent`, which bounds ejected instances and open instance breakers together), fewer than
   * this share of a channel's instances would be left in rotation, all of them but those whose breaker
   * is held open by force are picked from; in [0, 1], 0 never panics. Defaults to 0.5.
   */
  panicThreshold?: number;
  /** Active grpc.health.v1 checks of each instance, or false for none. Defaults to `{}` (Watch, falling back to Check every 5 000 ms). */
  health?: HealthCheckOptions | false;
  /** Credentials of the health-check connections. Defaults to insecure. */
  credentials?: ChannelCredentials;
  /**
   * Retries on another instance of attempts that failed UNAVAILABLE before any response (a killed or
   * refusing instance), bounded by a RetryBudget per service (see retry.ts), or false for none.
   * Defaults to `{}` (3 attempts, 10–100 ms backoff, RetryBudget's defaults: 20 % of calls + 10/s).
   */
  retry?: GrpcRetryOptions | false;
  /** The status codes an instance's breaker counts as failures. Defaults to go-zero's (see `defaultFailureCodes`). */
  failureCodes?: readonly number[];
  /** Time source of the pickers, breakers, health timers and statistics. Defaults to `systemClock`. */
  clock?: Clock;
  /** Uniform random numbers in [0, 1). Defaults to `Math.random`. */
  random?: () => number;
}

/** Defaults for GrpcDiscoveryOptions. */
export const grpcDiscoveryDefaults = Object.freeze({ strategy: 'p2c' as StrategyOption });

/** GrpcDiscoveryStats is what `GrpcDiscovery.stats()` answers. */
export interface GrpcDiscoveryStats {
  /** Services followed, the channels resolving each, and its retry budget (when retries are on). */
  services: { service: string; instances: number; channels: number; retryBudget?: RetryBudgetStats }[];
  /** Per channel policy: its service and its instances. */
  balancers: { service: string; instances: GrpcInstanceStats[] }[];
}

let nextId = 0;

interface Feed {
  follower: Follower<readonly ServiceInstance[], RegistryEvent>;
  instances: readonly ServiceInstance[];
  byAddress: Map<string, ServiceInstance>;
  listeners: Set<() => void>;
  listed: boolean;
}

/** GrpcDiscovery resolves `bulwark:///<service>` targets through a registry; see the module comment. */
export class GrpcDiscovery implements DiscoveryBinding {
  /** id names this discovery in channel options. */
  readonly id: string;
  readonly clock: Clock;
  readonly random: () => number;
  readonly hashHeader: string | undefined;
  readonly instanceBreaker: CircuitBreakerOptions | false;
  readonly health: Required<HealthCheckOptions> | false;
  readonly credentials: ChannelCredentials | undefined;
  readonly isFailure: (code: number) => boolean;
  readonly retry: RetryConfig | undefined;
  readonly outlier: OutlierOptions | false;
  readonly panicThreshold: number;
  private readonly registry: Pick<Registry, 'getService' | 'watch'>;
  private readonly strategy: StrategyOption;
  private readonly feeds = new Map<string, Feed>();
  private readonly balancers = new Set<{ stats(): GrpcDiscoveryStats['balancers'][number] }>();
  private closed = false;

  constructor(options: GrpcDiscoveryOptions) {
    ensureGrpcJs();
    const o = checkOptions('GrpcDiscovery', options, GRPC_DISCOVERY_KEYS);
    const r = o.registry as Partial<Registry> | undefined;
    if (r === null || typeof r !== 'object' || typeof r.getService !== 'function' || typeof r.watch !== 'function') {
      throw new TypeError('GrpcDiscovery: registry must implement getService() and watch() (a Registry or a RegistryCache)');
    }
    this.registry = o.registry!;
    this.clock = clockOption('GrpcDiscovery', o.clock, systemClock);
    this.random = o.random === undefined ? Math.random : fn('GrpcDiscovery', 'random', o.random);
    this.strategy = o.strategy ?? grpcDiscoveryDefaults.strategy;
    createPicker(this.strategy, { clock: this.clock, random: this.random, owner: 'GrpcDiscovery' }); // throws on a bad strategy, naming it
    if (o.hashHeader !== undefined && (typeof o.hashHeader !== 'string' || o.hashHeader.length === 0)) {
      throw new TypeError(`GrpcDiscovery: hashHeader must be a non-empty string, got ${JSON.stringify(o.hashHeader)}`);
    }
    this.hashHeader = o.hashHeader?.toLowerCase();
    if (o.instanceBreaker !== undefined && o.instanceBreaker !== false && (o.instanceBreaker === null || typeof o.instanceBreaker !== 'object')) {
      throw new TypeError('GrpcDiscovery: instanceBreaker must be CircuitBreaker options or false');
    }
    this.instanceBreaker = o.instanceBreaker ?? {};
    this.health = o.health === false ? false : { ...healthCheckDefaults, ...checkOptions('GrpcDiscovery.health', o.health, HEALTH_KEYS) };
    this.credentials = o.credentials;
    this.isFailure = failureSet('GrpcDiscovery', o.failureCodes);
    if (o.retry !== undefined && o.retry !== false && (o.retry === null || typeof o.retry !== 'object')) {
      throw new TypeError(`GrpcDiscovery: retry must be retry options or false, got ${JSON.stringify(o.retry)}`);
    }
    this.outlier = o.outlier === false ? false : checkOptions('GrpcDiscovery.outlier', o.outlier);
    new OutlierDetector({ ...this.outlier, clock: this.clock }); // throws on bad options, naming them
    this.panicThreshold = finite('GrpcDiscovery', 'panicThreshold', o.panicThreshold ?? balancerDefaults.panicThreshold, 0, 1);
    this.retry = o.retry === false ? undefined : new RetryConfig(o.retry, this.clock);
    this.id = `d${++nextId}`;
    registerResolver(SCHEME, BulwarkResolver);
    registerBulwarkPolicy();
    bind(this.id, this);
  }

  /**
   * channelOptions answers the channel options that bind a client to this discovery: pass them (merged
   * with your own) as the client's options. `policy: 'round_robin'` uses grpc-js's own round robin
   * instead of the bulwark policy. Defaults to 'bulwark'.
   */
  channelOptions(options?: { policy?: 'bulwark' | 'round_robin' }): ChannelOptions {
    const policy = options?.policy ?? 'bulwark';
    if (policy !== 'bulwark' && policy !== 'round_robin')
      throw new TypeError(`GrpcDiscovery.channelOptions: policy must be 'bulwark' or 'round_robin', got ${JSON.stringify(policy)}`);
    if (this.closed) throw new ClosedError('GrpcDiscovery is closed');
    return { [DISCOVERY_OPTION]: this.id, [POLICY_OPTION]: policy };
  }

  newPicker(): Picker {
    return createPicker(this.strategy, { clock: this.clock, random: this.random });
  }

  instance(service: string, address: string): ServiceInstance | undefined {
    return this.feeds.get(service)?.byAddress.get(address);
  }

  addBalancer(b: { stats(): GrpcDiscoveryStats['balancers'][number] }): Disposer {
    this.balancers.add(b);
    return () => void this.balancers.delete(b);
  }

  /** follow subscribes `listener` to `service`'s instance list (one follower per service); returns the disposer. */
  follow(service: string, listener: () => void): Disposer {
    let feed = this.feeds.get(service);
    if (feed === undefined) {
      const f: Feed = { instances: [], byAddress: new Map(), listeners: new Set(), listed: false, follower: undefined! };
      const publish = (list: readonly ServiceInstance[]): void => {
        f.instances = list;
        f.byAddress = new Map(list.map((i) => [i.address, i]));
        f.listed = true;
        for (const l of f.listeners) l();
      };
      f.follower = followService(this.registry, service, {
        onList: (l) => publish(l),
        onEvent: (e) => {
          const rest = f.instances.filter((i) => i.id !== e.instance.id);
          publish(e.type === 'delete' ? rest : [...rest, e.instance]);
        },
        clock: this.clock,
        random: this.random,
      });
      this.feeds.set(service, (feed = f));
    }
    const fd = feed;
    fd.listeners.add(listener);
    if (fd.listed) queueMicrotask(() => fd.listeners.has(listener) && listener());
    return () => {
      fd.listeners.delete(listener);
      if (fd.listeners.size === 0 && this.feeds.get(service) === fd) {
        this.feeds.delete(service);
        void fd.follower.close();
      }
    };
  }

  /** instances answers the instances `service` resolves to now (empty before the first listing). */
  instances(service: string): readonly ServiceInstance[] {
    return this.feeds.get(service)?.instances ?? [];
  }

  /** stats answers the followed services, each channel policy's instances, and the attempts. */
  stats(): GrpcDiscoveryStats {
    return {
      services: [...this.feeds].map(([service, f]) => ({
        service,
        instances: f.instances.length,
        channels: f.listeners.size,
        ...(this.retry === undefined ? {} : { retryBudget: this.retry.budget(service).stats() }),
      })),
      balancers: [...this.balancers].map((b) => b.stats()),
    };
  }

  /**
   * describeMetrics offers `grpc_balancer_instances` (a gauge by service and state: ready, not_serving,
   * ejected, breaker_open, connecting) to a metrics registry.
   */
  describeMetrics(): MetricsDescription {
    return {
      kind: 'GrpcDiscovery',
      families: [
        {
          name: 'grpc_balancer_instances',
          type: 'gauge',
          help: 'Instances known to the gRPC balancing policies, by service and state.',
          labelNames: ['service', 'state'],
        },
      ],
      collect: (emit) => {
        if (this.closed) return;
        const counts = new Map<string, Map<string, number>>();
        for (const b of this.balancers) {
          const s = b.stats();
          let m = counts.get(s.service);
          if (m === undefined)
            counts.set(
              s.service,
              (m = new Map([
                ['ready', 0],
                ['not_serving', 0],
                ['ejected', 0],
                ['breaker_open', 0],
                ['connecting', 0],
              ])),
            );
          for (const i of s.instances) {
            const state =
              i.connectivity !== 'READY' ? 'connecting' : !i.serving ? 'not_serving' : i.ejected ? 'ejected' : i.breaker === 'open' ? 'breaker_open' : 'ready';
            m.set(state, (m.get(state) ?? 0) + 1);
          }
        }
        for (const [service, m] of counts) for (const [state, n] of m) emit('grpc_balancer_instances', { service, state }, n);
      },
      snapshot: () => this.stats(),
    };
  }

  /** close stops following every service; channels bound to it then fail their resolution. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    unbind(this.id);
    const feeds = [...this.feeds.values()];
    this.feeds.clear();
    await Promise.all(feeds.map((f) => f.follower.close()));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/** BulwarkResolver is grpc-js's resolver for `bulwark:///<service>`. */
class BulwarkResolver implements GrpcResolver {
  private dispose: Disposer | undefined;
  private readonly service: string;

  constructor(
    target: GrpcUri,
    private readonly listener: ResolverListener,
    private readonly options: ChannelOptions,
  ) {
    this.service = target.path.replace(/^\/+/, '');
  }

  static getDefaultAuthority(target: GrpcUri): string {
    return target.path.replace(/^\/+/, '');
  }

  updateResolution(): void {
    if (this.dispose !== undefined) return;
    const id = this.options[DISCOVERY_OPTION];
    const d = bindingOf(id);
    if (d === undefined || this.service === '') {
      const why =
        this.service === ''
          ? `bulwark:///${this.service}: the target names no service (write bulwark:///<service>)`
          : `bulwark:///${this.service}: no GrpcDiscovery is bound to this channel (pass discovery.channelOptions() to the client) or it was closed`;
      queueMicrotask(() => this.listener(errorList(why), {}, null, why));
      return;
    }
    const policy = this.options[POLICY_OPTION] === 'round_robin' ? 'round_robin' : POLICY_NAME;
    // Retries only under the bulwark policy: it is what bounds them by the budget (see retry.ts).
    const config: ServiceConfig = {
      loadBalancingConfig: [policy === POLICY_NAME ? { [POLICY_NAME]: { discovery: id, service: this.service } } : { round_robin: {} }],
      methodConfig: policy === POLICY_NAME && d.retry !== undefined ? [d.retry.methodConfig as ServiceConfig['methodConfig'][number]] : [],
    };
    const disc = d;
    this.dispose = disc.follow(this.service, () => {
      const list = disc.instances(this.service);
      const endpoints = [];
      for (const i of list) {
        const e = toEndpoint(i.address);
        if (e !== undefined) endpoints.push(e);
      }
      const note = list.length === 0 ? `no instance of service "${this.service}" is registered` : '';
      this.listener(okList(endpoints), {}, okList(config), note);
    });
  }

  destroy(): void {
    this.dispose?.();
    this.dispose = undefined;
  }
}
