/** withTimeout bounds a store operation: a store that does not answer in time counts as down. */
import type { Clock } from '../core/clock.js';

/** withTimeout answers `p`, or rejects once `ms` milliseconds passed on `clock` without an answer. */
export function withTimeout<T>(p: Promise<T>, ms: number, clock: Clock, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = clock.setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    t.unref();
    p.then(
      (v) => {
        clock.clearTimeout(t);
        resolve(v);
      },
      (err: unknown) => {
        clock.clearTimeout(t);
        reject(err);
      },
    );
  });
}
