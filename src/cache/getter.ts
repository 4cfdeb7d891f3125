/**
 * The getter contract: how a Group loads a key from its origin, and the one place that calls it —
 * bounded in time, with a synchronous throw, a wrong result type or a hang each turned into a coded
 * error (nothing of which is ever cached).
 */
import { BulwarkError, LoadError, TimeoutError } from '../core/errors.js';

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
 * callGetter runs `getter` for `key` with a signal that aborts when `parent` does or after `timeoutMs`.
 * Resolves the checked result; rejects `TimeoutError`, the getter's own coded error, or `LoadError`.
 */
export function callGetter(getter: Getter, key: string, parent: AbortSignal, timeoutMs: number, group: string): Promise<Normalized> {
  const controller = new AbortController();
  const onAbort = () => controller.abort(parent.reason);
  parent.addEventListener('abort', onAbort, { once: true });
  return new Promise<Normalized>((resolve, reject) => {
    const timer = setTimeout(() => {
      const err = new TimeoutError(`Group ${group}: getter did not settle within ${timeoutMs} ms`);
      controller.abort(err);
      reject(err);
    }, timeoutMs);
    const done = () => {
      clearTimeout(timer);
      parent.removeEventListener('abort', onAbort);
    };
    let pending: GetterResult | PromiseLike<GetterResult>;
    try {
      pending = getter(key, { signal: controller.signal });
    } catch (err) {
      done();
      reject(wrap(err, group));
      return;
    }
    Promise.resolve(pending).then(
      (r) => {
        done();
        try {
          resolve(normalize(r, group));
        } catch (err) {
          reject(err);
        }
      },
      (err: unknown) => {
        done();
        reject(wrap(err, group));
      },
    );
  });
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
    if ((typeof value === 'string' || value instanceof Uint8Array) && (ttlMs === undefined || (typeof ttlMs === 'number' && Number.isFinite(ttlMs) && ttlMs >= 0))) {
      return { value, ttlMs: ttlMs as number | undefined };
    }
  }
  throw new LoadError(`Group ${group}: getter must answer a Uint8Array, a string or { value, ttlMs? }`, {
    cause: new TypeError(`got ${r === null ? 'null' : typeof r}`),
  });
}
