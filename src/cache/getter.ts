/**
 * The getter contract: how a Group loads a key from its origin, and the one place that calls it. A
 * synchronous throw or a wrong result type becomes `LoadError`; a hang is cut off by the Group's
 * singleflight timeout (`TimeoutError`). Nothing of that is ever cached.
 */
import { BulwarkError, LoadError } from '../core/errors.js';

/** GetterResult is what a getter answers: bytes, text (stored as UTF-8), or either with its own TTL. */
export type GetterResult = Uint8Array | string | { value: Uint8Array | string; ttlMs?: number };

/** Getter loads `key` from the origin; it throws `NotFoundError` when there is no such key. */
export type Getter = (key: string, options: { signal: AbortSignal }) => GetterResult | PromiseLike<GetterResult>;

/** Normalized is a checked getter result. */
export interface Normalized {
  value: Uint8Array | string;
  ttlMs: number | undefined;
}

/**
 * callGetter runs `getter` for `key` with `signal` (the shared load's: it aborts on timeout or when
 * every waiter has left). Resolves the checked result; rejects the getter's own coded error, or
 * `LoadError` for anything else — a synchronous throw included.
 */
export function callGetter(getter: Getter, key: string, signal: AbortSignal, group: string): Promise<Normalized> {
  let pending: GetterResult | PromiseLike<GetterResult>;
  try {
    pending = getter(key, { signal });
  } catch (err) {
    return Promise.reject(wrap(err, group));
  }
  return Promise.resolve(pending).then(
    (r) => normalize(r, group),
    (err: unknown) => {
      throw wrap(err, group);
    },
  );
}

function wrap(err: unknown, group: string): unknown {
  if (err instanceof BulwarkError) return err;
  const msg = err instanceof Error ? err.message : String(err);
  return new LoadError(`Group ${group}: getter failed: ${msg}`, { cause: err });
}

function normalize(r: unknown, group: string): Normalized {
  if (typeof r === 'string' || r instanceof Uint8Array) return { value: r, ttlMs: undefined };
  if (r !== null && typeof r === 'object' && 'value' in r) {
    const { value, ttlMs } = r as { value: unknown; ttlMs?: unknown };
    if (
      (typeof value === 'string' || value instanceof Uint8Array) &&
      (ttlMs === undefined || (typeof ttlMs === 'number' && Number.isFinite(ttlMs) && ttlMs >= 0))
    ) {
      return { value, ttlMs: ttlMs as number | undefined };
    }
  }
  throw new LoadError(`Group ${group}: getter must answer a Uint8Array, a string or { value, ttlMs? }`, {
    cause: new TypeError(`got ${r === null ? 'null' : typeof r}`),
  });
}
