/**
 * The live GrpcDiscovery instances by id: channel options carry only the id (a string), and the
 * resolver and the policy, which grpc-js constructs, find their discovery here.
 */
import type { ChannelCredentials } from '@grpc/grpc-js';
import type { BreakerState, CircuitBreakerOptions } from '../breaker/types.js';
import type { Clock } from '../core/clock.js';
import type { Disposer } from '../core/events.js';
import type { Picker } from '../balancer/types.js';
import type { ServiceInstance } from '../registry/types.js';
import type { HealthCheckOptions } from './health-prober.js';
import type { RetryConfig } from './retry.js';
import type { OutlierOptions } from '../balancer/health/outlier.js';

/** GrpcInstanceStats is one instance as a channel's policy sees it. */
export interface GrpcInstanceStats {
  id: string;
  address: string;
  /** grpc-js's connectivity state of the instance's subchannel. */
  connectivity: string;
  /** false while health checks say NOT_SERVING. */
  serving: boolean;
  /** true while outlier detection has it ejected (consecutive failed attempts). */
  ejected: boolean;
  breaker: BreakerState | 'none';
  /**
   * true while picks go to it: READY and not held out — ejected instances and breakers not closed are
   * out only within the cap (`maxEjectionPercent`) and outside panic, NOT_SERVING ones unless none else is.
   */
  inRotation: boolean;
  inFlight: number;
  /** Attempts started on it. */
  picks: number;
  /** Attempts that ended with a failure code. */
  failures: number;
}

/** What a policy asks of its discovery. */
export interface DiscoveryBinding {
  readonly clock: Clock;
  readonly random: () => number;
  readonly hashHeader: string | undefined;
  readonly instanceBreaker: CircuitBreakerOptions | false;
  readonly health: Required<HealthCheckOptions> | false;
  readonly credentials: ChannelCredentials | undefined;
  readonly isFailure: (code: number) => boolean;
  readonly retry: RetryConfig | undefined;
  readonly outlier: OutlierOptions | false;
  /** Below this share of instances left in rotation after the cap, all but the forced are picked from (panic). */
  readonly panicThreshold: number;
  newPicker(): Picker;
  instance(service: string, address: string): ServiceInstance | undefined;
  addBalancer(b: { stats(): { service: string; instances: GrpcInstanceStats[] } }): Disposer;
  follow(service: string, listener: () => void): Disposer;
  instances(service: string): readonly ServiceInstance[];
}

const bindings = new Map<string, DiscoveryBinding>();

/** bind makes `binding` findable by `id`; unbind forgets it. */
export function bind(id: string, binding: DiscoveryBinding): void {
  bindings.set(id, binding);
}

export function unbind(id: string): void {
  bindings.delete(id);
}

/** bindingOf answers the live discovery with `id`. */
export function bindingOf(id: unknown): DiscoveryBinding | undefined {
  return typeof id === 'string' ? bindings.get(id) : undefined;
}
