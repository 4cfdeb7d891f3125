/**
 * An operator's isolation of a breaker (`isolate(reason)`): the reason's check, its default, and how a
 * state change says it.
 */
import { showValue } from '../core/validate.js';

/** The reason recorded when `isolate()` is given none. */
export const DEFAULT_ISOLATE_REASON = 'isolated by an operator';

/** isolateReason checks the reason given to `isolate` (a string, or undefined for the default). */
export function isolateReason(owner: string, reason: unknown): string {
  if (reason === undefined) return DEFAULT_ISOLATE_REASON;
  if (typeof reason !== 'string') throw new TypeError(`${owner}: isolate's reason must be a string, got ${showValue(reason)}`);
  return reason;
}

/** isolatedEvent answers the reason a state change (event, diagnostics message) gives for an isolation. */
export function isolatedEvent(why: string): string {
  return why === DEFAULT_ISOLATE_REASON ? why : `${DEFAULT_ISOLATE_REASON}: ${why}`;
}
