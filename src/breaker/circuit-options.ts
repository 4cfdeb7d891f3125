/**
 * CircuitBreaker options, their defaults (reference 004 §三 and the governance chapter's table) and
 * their validation: bad options throw TypeError / RangeError naming the option and the value.
 */
import type { Clock } from '../core/clock.js';
import { finite, integer, positive, ratio, showValue } from '../core/validate.js';

/** CircuitWindow is what the failure and slow-call rates are computed over. */
export type CircuitWindow =
  /** The last `size` calls, however long ago. */
  | { kind: 'count'; size: number }
  /** The calls of the last `ms` milliseconds, kept in `buckets` buckets. */
  | { kind: 'time'; ms: number; buckets: number };

/** OpenBackoff makes each consecutive trip (a failed half-open) stay open longer, up to a cap. */
export interface OpenBackoff {
  /** Multiplier applied to the open period on each consecutive trip (> 1). Defaults to 2. */
  factor?: number;
  /** The longest open period in milliseconds (≥ openMs). */
  maxMs: number;
}

/** CircuitBreakerOptions configures a CircuitBreaker. */
export interface CircuitBreakerOptions {
  /** Name used in errors and events. Defaults to 'circuit'. */
  name?: string;
  /** Trip when this share of the window's calls failed, in (0, 1]. Defaults to 0.5. */
  failureRate?: number;
  /** Trip when this share of the window's calls were slow, in (0, 1]. Defaults to 1 (all of them). */
  slowCallRate?: number;
  /** A call taking at least this many milliseconds is slow (> 0; Infinity turns slow-call detection off). Defaults to Infinity. */
  slowCallMs?: number;
  /** Calls the window must hold before either rate can trip the breaker (≥ 1). Defaults to 10. */
  minimumCalls?: number;
  /** The window the rates are computed over. Defaults to `{ kind: 'time', ms: 60_000, buckets: 10 }`. */
  window?: CircuitWindow;
  /** How long the breaker stays open before probing, in milliseconds. Defaults to 30 000. */
  openMs?: number;
  /** Growth of the open period over consecutive trips. Defaults to none (always `openMs`). */
  openBackoff?: OpenBackoff;
  /** Probes half-open admits; all must succeed to close (≥ 1). Defaults to 5. */
  halfOpenCalls?: number;
  /** A probe not reported within this many milliseconds frees its permit (Infinity: never). Defaults to 10 000. */
  probeTimeoutMs?: number;
  /** The time source. Defaults to the process-wide coarse clock (`getDefaultCoarseClock()`). */
  clock?: Clock;
}

/** Defaults for CircuitBreakerOptions. */
export const circuitBreakerDefaults = Object.freeze({
  name: 'circuit',
  failureRate: 0.5,
  slowCallRate: 1,
  slowCallMs: Infinity,
  minimumCalls: 10,
  window: Object.freeze({ kind: 'time', ms: 60_000, buckets: 10 }) as CircuitWindow,
  openMs: 30_000,
  halfOpenCalls: 5,
  probeTimeoutMs: 10_000,
});

/** ValidCircuitOptions is CircuitBreakerOptions checked and filled with defaults. */
export interface ValidCircuitOptions {
  name: string;
  failureRate: number;
  slowCallRate: number;
  slowCallMs: number;
  minimumCalls: number;
  window: CircuitWindow;
  openMs: number;
  openBackoff: { factor: number; maxMs: number } | undefined;
  halfOpenCalls: number;
  probeTimeoutMs: number;
  clock: Clock | undefined;
}

const OWNER = 'CircuitBreaker';
/** Sizes are bounded so that a typo cannot allocate gigabytes. */
const MAX_SLOTS = 1_000_000;

/** positiveOrInfinity accepts a number > 0, Infinity included. */
function positiveOrInfinity(name: string, value: unknown): number {
  if (value === Infinity) return Infinity;
  return positive(OWNER, name, value);
}

/** validateCircuitOptions checks every option and fills in the defaults. */
export function validateCircuitOptions(o: Partial<CircuitBreakerOptions>): ValidCircuitOptions {
  const d = circuitBreakerDefaults;
  const name = o.name ?? d.name;
  if (typeof name !== 'string') throw new TypeError(`${OWNER}: name must be a string, got ${showValue(name)}`);
  const openMs = positive(OWNER, 'openMs', o.openMs ?? d.openMs);
  let openBackoff: ValidCircuitOptions['openBackoff'];
  if (o.openBackoff !== undefined) {
    const b = o.openBackoff;
    if (b === null || typeof b !== 'object') throw new TypeError(`${OWNER}: openBackoff must be an object, got ${showValue(b)}`);
    const factor = b.factor === undefined ? 2 : finite(OWNER, 'openBackoff.factor', b.factor, 1, 1_000);
    const maxMs = positive(OWNER, 'openBackoff.maxMs', b.maxMs);
    if (maxMs < openMs) throw new RangeError(`${OWNER}: openBackoff.maxMs must be ≥ openMs (${openMs}), got ${showValue(maxMs)}`);
    openBackoff = { factor, maxMs };
  }
  const window = validateWindow(o.window ?? d.window);
  const minimumCalls = integer(OWNER, 'minimumCalls', o.minimumCalls ?? d.minimumCalls, 1, MAX_SLOTS);
  if (window.kind === 'count' && minimumCalls > window.size) {
    throw new RangeError(`${OWNER}: minimumCalls must be ≤ window.size (${window.size}) or the breaker can never trip, got ${minimumCalls}`);
  }
  return {
    name,
    failureRate: ratio(OWNER, 'failureRate', o.failureRate ?? d.failureRate),
    slowCallRate: ratio(OWNER, 'slowCallRate', o.slowCallRate ?? d.slowCallRate),
    slowCallMs: positiveOrInfinity('slowCallMs', o.slowCallMs ?? d.slowCallMs),
    minimumCalls,
    window,
    openMs,
    openBackoff,
    halfOpenCalls: integer(OWNER, 'halfOpenCalls', o.halfOpenCalls ?? d.halfOpenCalls, 1, 10_000),
    probeTimeoutMs: positiveOrInfinity('probeTimeoutMs', o.probeTimeoutMs ?? d.probeTimeoutMs),
    clock: o.clock,
  };
}

function validateWindow(w: unknown): CircuitWindow {
  if (w === null || typeof w !== 'object') throw new TypeError(`${OWNER}: window must be an object, got ${showValue(w)}`);
  const kind = (w as { kind?: unknown }).kind;
  if (kind === 'count') {
    return { kind, size: integer(OWNER, 'window.size', (w as { size?: unknown }).size, 1, MAX_SLOTS) };
  }
  if (kind === 'time') {
    const t = w as { ms?: unknown; buckets?: unknown };
    return { kind, ms: positive(OWNER, 'window.ms', t.ms), buckets: integer(OWNER, 'window.buckets', t.buckets, 1, 10_000) };
  }
  throw new TypeError(`${OWNER}: window.kind must be 'count' or 'time', got ${showValue(kind)}`);
}
