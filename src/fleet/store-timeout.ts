/** withTimeout bounds a store operation: a store that does not answer in time counts as down. */
import type { Clock } from '../core/clock.js';
import { DeadlineTimer } from '../core/deadline-timer.js';

/**
 * withTimeout answers `p`, or rejects once `ms` milliseconds passed on `clock` without an answer (one
 * timer turn later after a stall of this process, so that an answer that came meanwhile is read: core
 * DeadlineTimer).
 */
export function withTimeout<T>(p: Promise<T>, ms: number, clock: Clock, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = new DeadlineTimer(clock, ms, () => reject(new Error(`${what}: no answer within ${ms} ms`))).unref();
    p.then(
      (v) => {
        t.cancel();
        resolve(v);
      },
      (err: unknown) => {
        t.cancel();
        reject(err);
      },
    );
  });
}
