/**
 * bulwark/balancer: client-side load balancing. A `Picker` (one strategy) chooses an instance from a
 * list; the `Balancer` binds a service in a `Registry` to health checks (active probes, passive outlier
 * detection, panic mode) and a picker, and answers `pick(key?)` synchronously from memory.
 *
 * Strategies: RoundRobin, Random, SmoothWeightedRoundRobin (nginx), RingHash (consistent hashing on the
 * core HashRing, optional bounded loads), P2C (power of two choices on EWMA latency × in-flight, slow
 * start) and LeastRequest. Health follows Envoy's outlier detection and panic threshold.
 */
export type { CallOutcome, Picker, ExcludeSet, StrategyName } from './types.js';
export { AbortedError, ClosedError, NoInstanceError } from '../core/errors.js';
/** The registry's types a balancer takes and hands out. */
export type { Registry, ServiceInstance } from '../registry/types.js';
export { RoundRobin, type RoundRobinOptions } from './round-robin.js';
export { Random, type RandomOptions } from './random.js';
export { SmoothWeightedRoundRobin, type SmoothWeightedRoundRobinOptions } from './smooth-weighted.js';
export { RingHash, ringHashDefaults, type RingHashOptions, type RingStats } from './ring-hash.js';
export { P2C, p2cDefaults, type P2COptions } from './p2c.js';
export { LeastRequest, leastRequestDefaults, type LeastRequestOptions } from './least-request.js';
export { createPicker, type StrategyOption } from './strategies.js';
export { weightOf, instanceWeight } from './instance-table.js';
export { checkWeightOverrides, type WeightOverrides } from './weight-overrides.js';
export { OutlierDetector, outlierDefaults, type OutlierOptions, type OutlierEvent } from './health/outlier.js';
export {
  ActiveHealthChecker,
  activeHealthDefaults,
  httpProbe,
  checkHealthPath,
  type ActiveHealthOptions,
  type HealthEvent,
  type Probe,
} from './health/active.js';
export { Balancer, balancerDefaults, type BalancerOptions, type BalancerEvent, type BalancerStats, type HoldReason, type InstanceHealth } from './balancer.js';
