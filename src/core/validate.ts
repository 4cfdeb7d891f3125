/**
 * Option validation shared by every constructor: bad options throw TypeError / RangeError naming the
 * option and the value received (STYLE.md §9).
 */
import { isClock, type Clock } from './clock.js';

function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined) return String(value);
  if (typeof value === 'function') return 'a function';
  return Object.prototype.toString.call(value);
}

/** finite checks that `value` is a finite number in [min, max] and returns it. */
export function finite(owner: string, name: string, value: unknown, min = -Infinity, max = Infinity): number {
  if (typeof value !== 'number') throw new TypeError(`${owner}: ${name} must be a number, got ${show(value)}`);
  if (!Number.isFinite(value) || value < min || value > max) {
    const range = max === Infinity ? `≥ ${min}` : `in [${min}, ${max}]`;
    throw new RangeError(`${owner}: ${name} must be a finite number ${range}, got ${show(value)}`);
  }
  return value;
}

/** positive checks that `value` is a finite number > 0 and returns it. */
export function positive(owner: string, name: string, value: unknown): number {
  if (typeof value !== 'number') throw new TypeError(`${owner}: ${name} must be a number, got ${show(value)}`);
  if (!Number.isFinite(value) || value <= 0) throw new RangeError(`${owner}: ${name} must be a finite number > 0, got ${show(value)}`);
  return value;
}

/** integer checks that `value` is an integer in [min, max] and returns it. */
export function integer(owner: string, name: string, value: unknown, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number') throw new TypeError(`${owner}: ${name} must be a number, got ${show(value)}`);
  if (!Number.isInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `≥ ${min}` : `in [${min}, ${max}]`;
    throw new RangeError(`${owner}: ${name} must be an integer ${range}, got ${show(value)}`);
  }
  return value;
}

/** ratio checks that `value` is a number in (0, 1] and returns it. */
export function ratio(owner: string, name: string, value: unknown): number {
  if (typeof value !== 'number') throw new TypeError(`${owner}: ${name} must be a number, got ${show(value)}`);
  if (!(value > 0 && value <= 1)) throw new RangeError(`${owner}: ${name} must be a number in (0, 1], got ${show(value)}`);
  return value;
}

/** fn checks that `value` is a function and returns it. */
export function fn<F extends (...args: never[]) => unknown>(owner: string, name: string, value: unknown): F {
  if (typeof value !== 'function') throw new TypeError(`${owner}: ${name} must be a function, got ${show(value)}`);
  return value as F;
}

/**
 * OptionKeys lists every key of an options type, each `true`: a constructor's list, written
 * `const KEYS = { … } as const satisfies OptionKeys<XOptions>`, fails to compile when it misses an option
 * or names one the type does not have, so the runtime check below cannot drift from the type.
 */
export type OptionKeys<T> = { readonly [K in keyof T]-?: true };

/**
 * options checks that `value` is a plain options object (or undefined, read as `{}`) and returns it. With
 * `keys`, a key it does not list — a typo a JavaScript caller would never hear of, `timeoutMS` for
 * `timeoutMs` — throws a TypeError naming the key and the options there are.
 */
export function options<T extends object>(owner: string, value: T | undefined, keys?: Readonly<Record<string, true>>): Partial<T> {
  if (value === undefined) return {};
  if (value === null || typeof value !== 'object') throw new TypeError(`${owner}: options must be an object, got ${show(value)}`);
  if (keys !== undefined) {
    for (const key in value) {
      if (!Object.hasOwn(keys, key) && Object.hasOwn(value, key)) {
        throw new TypeError(`${owner}: ${key} is not an option; the options are ${Object.keys(keys).join(', ')}`);
      }
    }
  }
  return value;
}

/** clockOption checks that `value` is a Clock (now, setTimeout, setInterval, clearTimeout), or answers `fallback` when undefined. */
export function clockOption<C extends Clock>(owner: string, value: unknown, fallback: C, name = 'clock'): C {
  if (value === undefined) return fallback;
  if (!isClock(value)) {
    throw new TypeError(`${owner}: ${name} must be a Clock (now, setTimeout, setInterval, clearTimeout), got ${show(value)}`);
  }
  return value as C;
}

/** showValue renders a received value for an error message. */
export const showValue = show;

/**
 * within builds a part from options its owner took, and reports a bad one under the owner: where the part
 * says `Bulkhead: maxConcurrent must be …`, ResilientClient's `bulkhead` option says `ResilientClient:
 * bulkhead.maxConcurrent must be …`. `path` is the option the part's options sit under; '' when they are
 * the owner's own (KeyedLimiter's `rate` makes its TokenLimiters: `KeyedLimiter: rate must be …`). A
 * TypeError or RangeError keeps its class, with the part's error as its `cause`; any other error passes.
 */
export function within<T>(owner: string, path: string, part: string, build: () => T): T {
  try {
    return build();
  } catch (err) {
    if (!(err instanceof TypeError || err instanceof RangeError)) throw err;
    const own = `${part}: `;
    let message: string;
    if (!err.message.startsWith(own)) message = `${owner}: ${path === '' ? '' : `${path}: `}${err.message}`;
    else {
      const rest = err.message.slice(own.length);
      if (path === '') message = `${owner}: ${rest}`;
      else if (rest.startsWith('options ')) message = `${owner}: ${path} ${rest.slice('options '.length)}`;
      else message = `${owner}: ${path}.${rest}`;
    }
    throw err instanceof RangeError ? new RangeError(message, { cause: err }) : new TypeError(message, { cause: err });
  }
}

/**
 * liveOptions checks the `partial` a `reconfigure` was handed, as `options` checks a constructor's (the same
 * TypeError for a key the owner does not know), and refuses with a TypeError each key in `fixed`: an option
 * the owner takes at construction only (its clock, a callback), which cannot change while it runs.
 */
export function liveOptions<T extends object>(owner: string, value: T, keys: Readonly<Record<string, true>>, fixed: readonly string[]): Partial<T> {
  if (value === undefined || value === null || typeof value !== 'object')
    throw new TypeError(`${owner}.reconfigure: options must be an object, got ${show(value)}`);
  const o = options(owner, value, keys);
  for (const key of fixed) {
    if (Object.hasOwn(o, key)) throw new TypeError(`${owner}: ${key} cannot change on a running ${owner}; it is set at construction only`);
  }
  return o;
}
