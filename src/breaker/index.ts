/**
 * bulwark/breaker: breakers that stop calling a dependency that is failing, and let it back in as it
 * recovers.
 *
 * - `SreBreaker`: Google SRE adaptive throttling as go-zero builds it: no states, a drop probability
 *   that rises with the failure share of a 10 s window and falls as the dependency answers.
 * - `CircuitBreaker`: the three-state breaker (closed / open / half-open), tripping on the failure rate
 *   and on the slow-call rate.
 * - `BreakerGroup`: breakers by name (one per downstream, instance or method), made by a factory, idle
 *   ones evicted.
 *
 * Both breakers offer two levels: `admit()` returns core's `AdmissionToken` to mark the call's outcome
 * (or throws `BreakerOpenError`), and `execute(fn, options)` runs a task under the breaker. Both
 * implement the core `Guard` shape, so `wrap()` can nest them with the policies. The errors they raise
 * are re-exported here: `BreakerOpenError` (refused), `AbortedError` (the caller's signal aborted before
 * admission), `ClosedError` (after `close()`).
 */
export type {
  Breaker,
  BreakerExecuteOptions,
  BreakerFleetOptions,
  FleetJoin,
  FleetLink,
  FleetMember,
  FleetViewStats,
  BreakerGroupOptions,
  BreakerGroupStats,
  BreakerState,
  CircuitBreakerOptions,
  CircuitBreakerStats,
  OpenBackoff,
  SreBreakerOptions,
  SreBreakerStats,
  StateChange,
} from './types.js';
export type { AdmissionToken } from '../core/admission.js';
export type { WindowOptions } from '../core/rolling-window.js';
export { AbortedError, BreakerOpenError, BulwarkError, ClosedError } from '../core/errors.js';
export { SreBreaker, sreBreakerDefaults } from './sre-breaker.js';
export { CircuitBreaker } from './circuit-breaker.js';
export { circuitBreakerDefaults } from './circuit-options.js';
export {
  BreakerGroup,
  breakerGroupDefaults,
  getDefaultBreakerGroup,
  setDefaultBreakerGroup,
  type BreakerGroupArgs,
  type BreakerMade,
} from './breaker-group.js';
