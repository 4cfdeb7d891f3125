/**
 * CircuitBreaker options: their defaults (resilience4j's failure rate and minimum calls, a one-minute
 * window, 30 s open) and their validation: bad options throw TypeError / RangeError naming the option
 * and the value.
 */
import type { Clock } from '../core/clock.js';
import { finite, integer, positive, ratio, showValue } from '../core/validate.js';
import type { CircuitBreakerOptions, CircuitWindow } from './types.js';

/** Defaults for CircuitBreakerOptions. */
export const circuitBreakerDefaults = Object.freeze({
  name: 'circuit',
  failureRate: 0.5,
  slowCallRate: 1,
  slowCallMs: Infinity,
  minimumCalls: 10,
  window: Object.freeze({ windowMs: 60_000, buckets: 10 }) as CircuitWindow,
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
  if ('calls' in window && minimumCalls > window.calls) {
    throw new RangeError(`${OWNER}: minimumCalls must be ≤ window.calls (${window.calls}) or the breaker can never trip, got ${minimumCalls}`);
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
  const t = w as { calls?: unknown; windowMs?: unknown; buckets?: unknown };
  if (t.calls !== undefined) {
    if (t.windowMs !== undefined || t.buckets !== undefined) {
      throw new TypeError(`${OWNER}: window takes either { calls } or { windowMs, buckets }, got ${showValue(w)}`);
    }
    return { calls: integer(OWNER, 'window.calls', t.calls, 1, MAX_SLOTS) };
  }
  return { windowMs: positive(OWNER, 'window.windowMs', t.windowMs), buckets: integer(OWNER, 'window.buckets', t.buckets, 1, 10_000) };
}
