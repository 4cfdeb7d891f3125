/**
 * bulwark/core: the shared mechanics every other module builds on — clock, coded errors, typed events,
 * singleflight, rolling window, backoff, the follower (list → watch → resync), shared deadlines, hashing,
 * the hash ring, the metrics description protocol (types), and the names and message shapes of the
 * diagnostics_channel channels every module publishes on. Imports only `node:` built-ins.
 */
export { systemClock, wallClock, ManualClock, isClock, MAX_TIMER_MS, type Clock, type TimerHandle } from './clock.js';
export { CoarseClock, coarseClockDefaults, getDefaultCoarseClock, setDefaultCoarseClock, type CoarseClockOptions } from './coarse-clock.js';
export * from './errors.js';
export type { AdmissionToken, LimitDecision } from './admission.js';
export type {
  Emit,
  HistogramObserver,
  HistogramPairObserver,
  Labels,
  MetricFamilySpec,
  MetricType,
  MetricsContext,
  MetricsDescription,
  MetricsPart,
  MetricsSink,
  Trackable,
} from './metrics-description.js';
export { Emitter, type Disposer, type Listener } from './events.js';
export type { Reconfigurable, Isolatable } from './reconfigurable.js';
export { SingleFlight, singleFlightDefaults, type SingleFlightOptions, type FlightFn } from './singleflight.js';
export { RollingWindow, rollingWindowDefaults, type RollingWindowOptions, type WindowOptions } from './rolling-window.js';
export { Backoff, backoffDefaults, addJitter, type BackoffOptions, type Jitter } from './backoff.js';
export { Follower, followerDefaults, type FollowerOptions, type FollowerSource, type FollowerStats } from './follower.js';
export { delay, throwIfAborted, linkSignal, raceSignal, type DelayOptions } from './abort.js';
export { neverAborted, type Guard, type Task, type ExecuteOptions } from './guard.js';
export { Deadlines, deadlinesDefaults, type DeadlinesOptions, type DeadlineNode, type Granule } from './deadline.js';
export { hash32, type HashFn } from './hash.js';
export { HashRing, hashRingDefaults, type HashRingOptions, type RingBuild } from './hash-ring.js';
export {
  diagnosticsChannels,
  type DiagnosticsChannel,
  type InstanceRef,
  type BreakerStateMessage,
  type BreakerRejectMessage,
  type LimiterKind,
  type LimitRefusedMessage,
  type LimitModeMessage,
  type ShedderDropMessage,
  type RegistryChangeMessage,
  type BalancerHealthMessage,
  type ClientCallContext,
  type ClientAttemptMessage,
  type CacheLoadContext,
  type HttpRefusedMessage,
  type GrpcCallMessage,
  type RulesAppliedMessage,
  type RulesRefusedMessage,
} from './diagnostics.js';
