/**
 * checkCall validates the arguments of a guard's `execute` at run time (a JavaScript caller, or `any`,
 * can pass anything): a task that is not a function, or a signal that is not an AbortSignal, rejects at
 * once with a TypeError naming the guard and the value, instead of failing later in a confusing way
 * (a retry loop retrying "fn is not a function", a listener added to a number).
 */
import type { ExecuteOptions } from '../core/guard.js';
import { showValue } from '../core/validate.js';

/** checkCall returns the TypeError for bad `execute` arguments, or undefined when they are fine. */
export function checkCall(owner: string, fn: unknown, options: ExecuteOptions | undefined): TypeError | undefined {
  if (typeof fn !== 'function') return new TypeError(`${owner}.execute: fn must be a function, got ${showValue(fn)}`);
  if (options === undefined) return undefined;
  if (options === null || typeof options !== 'object') return new TypeError(`${owner}.execute: options must be an object, got ${showValue(options)}`);
  const signal = options.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    return new TypeError(`${owner}.execute: options.signal must be an AbortSignal, got ${showValue(signal)}`);
  }
  return undefined;
}
