/**
 * CircuitBreaker options: their defaults (resilience4j's failure rate and minimum calls, a one-minute
 * window, 30 s open), their validation (bad options throw TypeError / RangeError naming the option and
 * the value; a key under its old name is refused with the name it was renamed to), and how
 * `reconfigure` lays a partial change over the options a breaker runs.
 */
import type { Clock } from '../core/clock.js';
import { finite, integer, options as optionsObject, positive, ratio, showValue, type OptionKeys } from '../core/validate.js';
import type { CircuitBreakerOptions, OpenBackoff } from './types.js';

/** Defaults for CircuitBreakerOptions. */
export const circuitBreakerDefaults = Object.freeze({
  name: 'circuit',
  failureRate: 0.5,
  slowCallRate: 1,
  slowCallMs: Infinity,
  minimumCalls: 10,
  windowMs: 60_000,
  buckets: 10,
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
  /** The time window (ignored when `windowCalls` is set). */
  windowMs: number;
  buckets: number;
  /** The count window's size; undefined for a time window. */
  windowCalls: number | undefined;
  openMs: number;
  openBackoff: { multiplier: number; maxMs: number } | undefined;
  halfOpenCalls: number;
  probeTimeoutMs: number;
  clock: Clock | undefined;
}

const OWNER = 'CircuitBreaker';
/** Sizes are bounded so that a typo cannot allocate gigabytes. */
const MAX_SLOTS = 1_000_000;

/** The keys of CircuitBreakerOptions, all of them: any other is refused. */
export const CIRCUIT_BREAKER_KEYS = {
  name: true,
  failureRate: true,
  slowCallRate: true,
  slowCallMs: true,
  minimumCalls: true,
  windowMs: true,
  buckets: true,
  windowCalls: true,
  openMs: true,
  openBackoff: true,
  halfOpenCalls: true,
  probeTimeoutMs: true,
  clock: true,
  fleet: true,
} as const satisfies OptionKeys<CircuitBreakerOptions>;

const OPEN_BACKOFF_KEYS = { multiplier: true, maxMs: true } as const satisfies OptionKeys<OpenBackoff>;

/** The keys a running breaker cannot change: `reconfigure` refuses them. */
const FIXED_KEYS = ['name', 'clock', 'fleet'] as const;

/** positiveOrInfinity accepts a number > 0, Infinity included. */
function positiveOrInfinity(name: string, value: unknown): number {
  if (value === Infinity) return Infinity;
  return positive(OWNER, name, value);
}

/**
 * refuseRenamed throws a TypeError for a key given under the name it had before the package settled on
 * one window shape (flat `windowMs` and `buckets`, as every module has them) and one backoff shape
 * (`multiplier`, as core's Backoff has it).
 */
function refuseRenamed(o: object): void {
  if (Object.hasOwn(o, 'window')) {
    const w = (o as { window?: unknown }).window;
    const inner = w !== null && typeof w === 'object' ? (['calls', 'windowMs', 'buckets'] as const).find((k) => Object.hasOwn(w, k)) : undefined;
    const to = { calls: 'windowCalls', windowMs: 'windowMs', buckets: 'buckets' } as const;
    if (inner !== undefined) throw new TypeError(`${OWNER}: window.${inner} was renamed to ${to[inner]}`);
    throw new TypeError(`${OWNER}: window was renamed to windowMs and buckets (or windowCalls for a window of the last calls)`);
  }
  const b = (o as { openBackoff?: unknown }).openBackoff;
  if (b !== null && typeof b === 'object' && Object.hasOwn(b, 'factor')) {
    throw new TypeError(`${OWNER}: openBackoff.factor was renamed to openBackoff.multiplier`);
  }
}

/** readCircuitOptions checks the constructor's options (keys, old names, values) and fills in the defaults. */
export function readCircuitOptions(options: CircuitBreakerOptions | undefined): ValidCircuitOptions {
  if (options !== null && typeof options === 'object') refuseRenamed(options);
  return validateCircuitOptions(optionsObject(OWNER, options, CIRCUIT_BREAKER_KEYS));
}

/**
 * reconfiguredOptions answers the options a breaker running `current` runs after `reconfigure(partial)`,
 * checked as the constructor checks them. A key given as undefined returns to its default; a count
 * window (`windowCalls`) replaces a time window (`windowMs`, `buckets`) and the reverse. Keys a running
 * breaker cannot change (its name, clock, fleet) are refused unless given unchanged.
 */
export function reconfiguredOptions(current: ValidCircuitOptions, partial: Partial<CircuitBreakerOptions>, fleet: unknown): ValidCircuitOptions {
  if (partial === null || typeof partial !== 'object') throw new TypeError(`${OWNER}: reconfigure takes an object of options, got ${showValue(partial)}`);
  refuseRenamed(partial);
  const p = optionsObject(OWNER, partial, CIRCUIT_BREAKER_KEYS);
  const now: Record<string, unknown> = { name: current.name, clock: current.clock, fleet };
  for (const key of FIXED_KEYS) {
    if (Object.hasOwn(p, key) && p[key] !== now[key])
      throw new TypeError(`${OWNER}: ${key} cannot change on a running breaker (reconfigure), got ${showValue(p[key])}`);
  }
  const merged: CircuitBreakerOptions = { ...plainCircuitOptions(current), name: current.name, clock: current.clock };
  if (p.windowCalls !== undefined) {
    delete merged.windowMs;
    delete merged.buckets;
  } else if (p.windowMs !== undefined || p.buckets !== undefined) delete merged.windowCalls;
  for (const key of Object.keys(p) as (keyof CircuitBreakerOptions)[]) {
    if (key === 'fleet' || key === 'name' || key === 'clock') continue;
    (merged as Record<string, unknown>)[key] = p[key];
  }
  return validateCircuitOptions(merged);
}

/** plainCircuitOptions answers the options a breaker can change while it runs, as fresh plain data (see `options()`). */
export function plainCircuitOptions(v: ValidCircuitOptions): CircuitBreakerOptions {
  return {
    failureRate: v.failureRate,
    slowCallRate: v.slowCallRate,
    slowCallMs: v.slowCallMs,
    minimumCalls: v.minimumCalls,
    ...(v.windowCalls === undefined ? { windowMs: v.windowMs, buckets: v.buckets } : { windowCalls: v.windowCalls }),
    openMs: v.openMs,
    ...(v.openBackoff === undefined ? {} : { openBackoff: { multiplier: v.openBackoff.multiplier, maxMs: v.openBackoff.maxMs } }),
    halfOpenCalls: v.halfOpenCalls,
    probeTimeoutMs: v.probeTimeoutMs,
  };
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
    refuseUnknown('openBackoff', b, OPEN_BACKOFF_KEYS);
    const multiplier = b.multiplier === undefined ? 2 : finite(OWNER, 'openBackoff.multiplier', b.multiplier, 1, 1_000);
    const maxMs = positive(OWNER, 'openBackoff.maxMs', b.maxMs);
    if (maxMs < openMs) throw new RangeError(`${OWNER}: openBackoff.maxMs must be ≥ openMs (${openMs}), got ${showValue(maxMs)}`);
    openBackoff = { multiplier, maxMs };
  }
  let windowCalls: number | undefined;
  let windowMs: number = d.windowMs;
  let buckets: number = d.buckets;
  if (o.windowCalls !== undefined) {
    if (o.windowMs !== undefined || o.buckets !== undefined) {
      throw new TypeError(
        `${OWNER}: windowCalls (a window of the last calls) excludes windowMs and buckets (a time window), got windowCalls ${showValue(o.windowCalls)} with ` +
          (o.windowMs !== undefined ? `windowMs ${showValue(o.windowMs)}` : `buckets ${showValue(o.buckets)}`),
      );
    }
    windowCalls = integer(OWNER, 'windowCalls', o.windowCalls, 1, MAX_SLOTS);
  } else {
    windowMs = positive(OWNER, 'windowMs', o.windowMs ?? d.windowMs);
    buckets = integer(OWNER, 'buckets', o.buckets ?? d.buckets, 1, 10_000);
  }
  const minimumCalls = integer(OWNER, 'minimumCalls', o.minimumCalls ?? d.minimumCalls, 1, MAX_SLOTS);
  if (windowCalls !== undefined && minimumCalls > windowCalls) {
    throw new RangeError(`${OWNER}: minimumCalls must be ≤ windowCalls (${windowCalls}) or the breaker can never trip, got ${minimumCalls}`);
  }
  return {
    name,
    failureRate: ratio(OWNER, 'failureRate', o.failureRate ?? d.failureRate),
    slowCallRate: ratio(OWNER, 'slowCallRate', o.slowCallRate ?? d.slowCallRate),
    slowCallMs: positiveOrInfinity('slowCallMs', o.slowCallMs ?? d.slowCallMs),
    minimumCalls,
    windowMs,
    buckets,
    windowCalls,
    openMs,
    openBackoff,
    halfOpenCalls: integer(OWNER, 'halfOpenCalls', o.halfOpenCalls ?? d.halfOpenCalls, 1, 10_000),
    probeTimeoutMs: positiveOrInfinity('probeTimeoutMs', o.probeTimeoutMs ?? d.probeTimeoutMs),
    clock: o.clock,
  };
}

/** refuseUnknown refuses a key of a nested option object that is not one of `keys`. */
function refuseUnknown(path: string, value: object, keys: Readonly<Record<string, true>>): void {
  for (const key of Object.keys(value)) {
    if (!Object.hasOwn(keys, key)) throw new TypeError(`${OWNER}: ${path}.${key} is not an option; the options are ${Object.keys(keys).join(', ')}`);
  }
}
