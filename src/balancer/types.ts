/**
 * The balancer's interfaces: what a strategy (`Picker`) is, what a finished call tells it, and how a
 * pick is told which instances to avoid.
 */
import type { Clock } from '../core/clock.js';
import type { Registry, ServiceInstance } from '../registry/types.js';
import type { ActiveHealthOptions } from './health/active.js';
import type { OutlierOptions } from './health/outlier.js';
import type { StrategyOption } from './strategies.js';

/** CallOutcome is what a finished call tells the balancer: whether it succeeded and how long it took. */
export interface CallOutcome {
  /** The call succeeded (for HTTP: anything but a 5xx or a network error). */
  readonly ok: boolean;
  /** How long the call took, in milliseconds. */
  readonly latencyMs: number;
  /**
   * When the call ended, read from the balancer's own clock, for a caller that has that reading at hand
   * (it timed the call on that clock): the strategy then reads no clock of its own. Defaults to the
   * clock's reading at the report.
   */
  readonly at?: number | undefined;
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
  /**
   * prepare takes `instances` in ahead of picks and calls `done` once it has (a pick of them before
   * then takes the rest in at once). Built-in pickers made with `sliceLists` take even a first list
   * of thousands in over timer turns; the Balancer prepares its first list so that `ready()` resolves
   * only once it is in.
   */
  prepare?(instances: readonly ServiceInstance[], done: () => void): void;
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

/** RingHashOptions configures a RingHash. */
export interface RingHashOptions {
  /** Virtual nodes per unit of weight, ≥ 1 (fewer when the ring would pass `maxRingSize`). Defaults to 1 280 (measured; see the module comment). */
  replicas?: number;
  /** The ring grows past `replicas` per unit of weight while it has fewer points than this (Envoy's `minimum_ring_size`). Defaults to 1 024. */
  minRingSize?: number;
  /** The most points on the ring (Envoy's `maximum_ring_size`); 8 bytes each. Defaults to 1 048 576. */
  maxRingSize?: number;
  /** Bound each instance's load to `loadFactor` × the mean (Google's bounded loads). Defaults to false. */
  boundedLoad?: boolean;
  /** The bound c for `boundedLoad`, > 1. Defaults to 1.25 (the paper's and Vimeo's choice). */
  loadFactor?: number;
  /** Uniform random numbers in [0, 1), for picks without a key. Defaults to `Math.random`. */
  random?: () => number;
  /**
   * The most ring work an update does at once, in units (a point kept, sorted or merged is one, a point
   * hashed eight); a larger update is built in slices of this size, one per timer turn. With
   * `sliceLists` it bounds the list work too (an instance compared is one unit, looked up 8, new or
   * changed 32). Defaults to 262 144 (about 1–2 ms).
   */
  sliceSize?: number;
  /** Sets the timers that run a sliced rebuild. Defaults to `systemClock`. */
  clock?: Clock;
  /** Take a list differing from the last in thousands of instances in in slices on `clock`'s timer turns: until then picks answer from the previous list (an instance may no longer be listed). The Balancer turns it on. Defaults to false. */
  sliceLists?: boolean;
}

/** RingStats is what `RingHash.stats()` answers. */
export interface RingStats {
  /** Instances in the list. */
  instances: number;
  /** Virtual nodes on the ring, absent instances' included. */
  points: number;
  /** Virtual nodes of instances no longer in the list (skipped by picks until dropped). */
  absentPoints: number;
  /** Virtual nodes per unit of weight now. */
  pointsPerWeight: number;
  /** Calls in flight (counted with `boundedLoad`'s start / report). */
  inFlight: number;
  /** A new ring is being built in slices (picks use the previous one meanwhile). */
  rebuilding: boolean;
  /** Rebuilds run in slices so far. */
  rebuilds: number;
  /** A list differing in thousands of instances is being taken in in slices (picks use the previous list meanwhile). */
  listPending: boolean;
}

/** BalancerOptions configures a Balancer. Give either `registry` + `service`, or `instances`. */
export interface BalancerOptions {
  /** Where the instances come from (a Registry or a RegistryCache). Defaults to none: use `instances` / `update()`. */
  registry?: Registry;
  /** The service to balance over; required with `registry`. Defaults to none. */
  service?: string;
  /** A fixed instance list, for use without a registry (replace it with `update()`). Defaults to []. */
  instances?: readonly ServiceInstance[];
  /** The strategy: a name, a Picker, or a factory. Defaults to `'p2c'`. */
  strategy?: StrategyOption;
  /** Passive outlier detection, or false to turn it off. Defaults to `{}` (Envoy's defaults, 50 % max). */
  outlier?: OutlierOptions | false;
  /** Active HTTP probes, or false for none. Defaults to false (instances need a health endpoint). */
  activeHealth?: ActiveHealthOptions | false;
  /** Below this share of healthy instances, pick among all (panic mode), in [0, 1]; 0 never panics. Defaults to 0.5. */
  panicThreshold?: number;
  /** Time source (shared with outlier detection and the strategy). Defaults to `systemClock`. */
  clock?: Clock;
  /** Uniform random numbers in [0, 1) (strategy, backoff, probe jitter). Defaults to `Math.random`. */
  random?: () => number;
}

/** BalancerEvent tells what changed: the list, an instance's health, or panic mode. */
export type BalancerEvent =
  | { readonly type: 'instances'; readonly count: number }
  | { readonly type: 'ejected'; readonly id: string; readonly untilMs: number }
  | { readonly type: 'returned'; readonly id: string }
  | { readonly type: 'down'; readonly id: string }
  | { readonly type: 'up'; readonly id: string }
  | { readonly type: 'panic'; readonly panic: boolean };

/** InstanceHealth is one instance's health as the balancer sees it. */
export interface InstanceHealth {
  readonly instance: ServiceInstance;
  /** Ejected by outlier detection. */
  readonly ejected: boolean;
  /** Up according to active probes (true when probes are off). */
  readonly up: boolean;
  /** How many times outlier detection has ejected it. */
  readonly timesEjected: number;
}

/**
 * HoldReason is why a caller holds an instance out (`Balancer.hold`): `'breaker'`, its breaker is open
 * on evidence (the cap and panic may keep it in rotation); `'forced'`, something other than evidence
 * holds it open, such as an operator's isolate (never overridden).
 */
export type HoldReason = 'breaker' | 'forced';

/** BalancerStats is what `Balancer.stats()` answers. */
export interface BalancerStats {
  /** Instances known, healthy or not. */
  instances: number;
  /** Instances in rotation now (all but the forced in panic mode). */
  available: number;
  /** Instances ejected by outlier detection now. */
  ejected: number;
  /** Instances down according to active probes. */
  down: number;
  /** Instances listed with a weight override of 0 (`setWeights`): out of rotation, whatever their health. */
  drained: number;
  /** Instances out of rotation because their caller's breaker is open on evidence (`hold(id, 'breaker')`, within the cap). */
  breakerOpen: number;
  /** Instances held out by force (`hold(id, 'forced')`: an operator's isolate); never put back by the cap or panic. */
  forced: number;
  /** Instances that would be out (ejected, down or breaker open) but stay in rotation: the cap (`maxEjectionPercent`) keeps them in. */
  capped: number;
  /** True while too few instances are healthy and picks go to all of them. */
  panic: boolean;
}
