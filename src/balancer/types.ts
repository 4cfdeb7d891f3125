/**
 * The balancer's interfaces: what a strategy (`Picker`) is, what a finished call tells it, and how a
 * pick is told which instances to avoid.
 */
import type { ServiceInstance } from '../registry/types.js';

/** CallOutcome is what a finished call tells the balancer: whether it succeeded and how long it took. */
export interface CallOutcome {
  /** The call succeeded (for HTTP: anything but a 5xx or a network error). */
  readonly ok: boolean;
  /** How long the call took, in milliseconds. */
  readonly latencyMs: number;
}

/**
 * Picker is one load-balancing strategy. `pick` chooses one of `instances` (throwing `NoInstanceError`
 * when the list is empty); `key` routes by affinity where the strategy supports it (RingHash).
 *
 * Pickers cache their per-list state keyed by the array's identity: pass the same array while the
 * list is unchanged (the Balancer and the registry cache do) and `pick` allocates nothing. Per-instance
 * state (smooth-WRR weights, EWMA latency, in-flight counts) is keyed by instance id, survives list
 * updates for instances that stay and is dropped for instances that leave. Duplicate ids: the last wins.
 *
 * Load-aware strategies also want `start(instance)` when a call to the picked instance begins and
 * `report(instance, outcome)` when it ends (exactly once per start; without an outcome when the call
 * was not made after all, e.g. its breaker refused it); the Balancer does both.
 * A picker holds the state of one service: give each service its own. Built-in pickers made with
 * `sliceLists` (the Balancer's) take a list differing in thousands of instances in over timer turns
 * and answer from the previous list until then; without it every pick is one of `instances`.
 */
export interface Picker {
  /**
   * pick chooses an instance; throws NoInstanceError when `instances` is empty. With `exclude` (the
   * instances a call already tried, or found refusing), it chooses by its own rule among the instances
   * `exclude` lacks, and ignores `exclude` only when it has every instance. A picker may ignore
   * `exclude` altogether: the Balancer then picks again and, failing that, takes the next allowed
   * instance in list order. Built in: all but SmoothWeightedRoundRobin honour it (its next turn is the
   * Balancer's second pick).
   */
  pick(instances: readonly ServiceInstance[], key?: string, exclude?: ExcludeSet): ServiceInstance;
  /** start tells the picker a call to `instance` began (in-flight + 1). */
  start?(instance: ServiceInstance): void;
  /** report tells the picker a call to `instance` ended (in-flight − 1, latency sample); no outcome: it was never made. */
  report?(instance: ServiceInstance, outcome?: CallOutcome): void;
  /** close releases what the picker holds (RingHash: finishes a rebuild running on timers); the Balancer calls it from its own `close()`. */
  close?(): void | Promise<void>;
}

/** ExcludeSet names instances a pick should avoid (a `Set<string>` of ids is one). */
export interface ExcludeSet {
  has(id: string): boolean;
}

/** StrategyName names a built-in strategy, for `BalancerOptions.strategy`. */
export type StrategyName = 'round-robin' | 'random' | 'weighted-round-robin' | 'ring-hash' | 'p2c' | 'least-request';
