/**
 * SreBreaker options: their defaults (go-zero's googlebreaker), their validation (bad options throw
 * TypeError / RangeError naming the option and the value), and how `reconfigure` lays a partial change
 * over the options a breaker runs.
 */
import type { Clock } from '../core/clock.js';
import { finite, fn as fnOption, integer, options as optionsObject, positive, showValue, type OptionKeys } from '../core/validate.js';
import type { SreBreakerOptions } from './types.js';

/** Defaults for SreBreakerOptions. */
export const sreBreakerDefaults = Object.freeze({
  name: 'sre',
  windowMs: 10_000,
  buckets: 40,
  k: 1.5,
  protection: 5,
  forcePassMs: 1_000,
  countRejections: false,
});

/** The keys of SreBreakerOptions, all of them: any other is refused. */
export const SRE_BREAKER_KEYS = {
  name: true,
  windowMs: true,
  buckets: true,
  k: true,
  protection: true,
  forcePassMs: true,
  countRejections: true,
  clock: true,
  fleet: true,
  random: true,
} as const satisfies OptionKeys<SreBreakerOptions>;

/** ValidSreOptions is SreBreakerOptions checked and filled with defaults (but the fleet, which the breaker joins). */
export interface ValidSreOptions {
  name: string;
  windowMs: number;
  buckets: number;
  k: number;
  protection: number;
  forcePassMs: number;
  countRejections: boolean;
  clock: Clock | undefined;
  random: (() => number) | undefined;
}

const OWNER = 'SreBreaker';

/** The keys a running breaker cannot change: `reconfigure` refuses them. */
const FIXED_KEYS = ['name', 'clock', 'random', 'fleet'] as const;

/** readSreOptions checks the constructor's options (keys and values) and fills in the defaults. */
export function readSreOptions(options: SreBreakerOptions | undefined): ValidSreOptions {
  return validateSreOptions(optionsObject(OWNER, options, SRE_BREAKER_KEYS));
}

/**
 * reconfiguredSreOptions answers the options a breaker running `current` runs after
 * `reconfigure(partial)`, checked as the constructor checks them; a key given as undefined returns to
 * its default. Keys a running breaker cannot change (its name, clock, random source, fleet) are
 * refused unless given unchanged.
 */
export function reconfiguredSreOptions(current: ValidSreOptions, partial: Partial<SreBreakerOptions>, fleet: unknown): ValidSreOptions {
  if (partial === null || typeof partial !== 'object') throw new TypeError(`${OWNER}: reconfigure takes an object of options, got ${showValue(partial)}`);
  const p = optionsObject(OWNER, partial, SRE_BREAKER_KEYS);
  const now: Record<string, unknown> = { name: current.name, clock: current.clock, random: current.random, fleet };
  for (const key of FIXED_KEYS) {
    if (Object.hasOwn(p, key) && p[key] !== now[key])
      throw new TypeError(`${OWNER}: ${key} cannot change on a running breaker (reconfigure), got ${showValue(p[key])}`);
  }
  const merged: SreBreakerOptions = { ...plainSreOptions(current), name: current.name };
  if (current.clock !== undefined) merged.clock = current.clock;
  if (current.random !== undefined) merged.random = current.random;
  for (const key of Object.keys(p) as (keyof SreBreakerOptions)[]) {
    if ((FIXED_KEYS as readonly string[]).includes(key)) continue;
    (merged as Record<string, unknown>)[key] = p[key];
  }
  return validateSreOptions(merged);
}

/** plainSreOptions answers the options a breaker can change while it runs, as fresh plain data (see `options()`). */
export function plainSreOptions(v: ValidSreOptions): SreBreakerOptions {
  return { windowMs: v.windowMs, buckets: v.buckets, k: v.k, protection: v.protection, forcePassMs: v.forcePassMs, countRejections: v.countRejections };
}

/** validateSreOptions checks every option and fills in the defaults. */
export function validateSreOptions(o: Partial<SreBreakerOptions>): ValidSreOptions {
  const d = sreBreakerDefaults;
  const name = o.name ?? d.name;
  if (typeof name !== 'string') throw new TypeError(`${OWNER}: name must be a string, got ${showValue(name)}`);
  const windowMs = positive(OWNER, 'windowMs', o.windowMs ?? d.windowMs);
  const buckets = integer(OWNER, 'buckets', o.buckets ?? d.buckets, 1, 10_000);
  const k = finite(OWNER, 'k', o.k ?? d.k, 1, 1e6);
  const protection = finite(OWNER, 'protection', o.protection ?? d.protection, 0, 1e9);
  const forcePassMs = positive(OWNER, 'forcePassMs', o.forcePassMs ?? d.forcePassMs);
  const countRejections = o.countRejections ?? d.countRejections;
  if (typeof countRejections !== 'boolean') throw new TypeError(`${OWNER}: countRejections must be a boolean, got ${showValue(countRejections)}`);
  const random = o.random === undefined ? undefined : fnOption<() => number>(OWNER, 'random', o.random);
  return { name, windowMs, buckets, k, protection, forcePassMs, countRejections, clock: o.clock, random };
}
