/**
 * wrap composes guards into one, outermost first (cockatiel's `wrap`): `wrap(a, b, c).execute(fn)` is
 * `a.execute(s1 => b.execute(s2 => c.execute(fn, { signal: s2 }), { signal: s1 }), { signal })`. Each
 * guard hands the next one the signal it got or made (a Timeout's own signal, for instance), so the task
 * gets the innermost signal, which aborts when any guard around it aborts.
 *
 * Anything with the Guard shape composes: the policies here, breakers, limiters, another wrap.
 * The recommended order, outermost first, is
 *
 *     wrap(fallback, retry, bulkhead, breaker, timeout)
 *
 * and docs/policy.md explains why.
 */
import { neverAborted, type ExecuteOptions, type Guard, type Task } from '../core/guard.js';
import { showValue } from '../core/validate.js';
import type { Fallback } from './fallback.js';
import { checkCall } from './check-call.js';

/**
 * GuardLike is what `wrap` accepts: anything with an `execute(fn, { signal })` method — every Guard,
 * and a `Fallback<R>`, whose result widens to `T | R`.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type GuardLike = Guard | Fallback<any>;

/** FallbackValue is the union of the value types of the Fallbacks among `G` (never when there are none). */
export type FallbackValue<G> = G extends Fallback<infer R> ? R : never;

/**
 * Wrapped is what `wrap` returns: a guard whose result is the task's, widened by the value type `R` of
 * any Fallback inside (a `Guard` when there is none). `guards` lists what it composes, outermost first.
 */
export interface Wrapped<R = never> {
  execute<T>(fn: Task<T>, options?: ExecuteOptions): Promise<T | R>;
  readonly guards: readonly GuardLike[];
}

/** wrap composes `guards` into one guard, the first outermost. With no guards it runs the task as it is. */
export function wrap<G extends GuardLike[]>(...guards: G): Wrapped<FallbackValue<G[number]>> {
  guards.forEach((g, i) => {
    if (g === null || typeof g !== 'object' || typeof (g as { execute?: unknown }).execute !== 'function') {
      throw new TypeError(`wrap: guards[${i}] must have an execute(fn, options) method, got ${showValue(g)}`);
    }
  });
  return new Wrap(Object.freeze([...guards]));
}

class Wrap {
  constructor(readonly guards: readonly GuardLike[]) {}

  execute<T>(fn: Task<T>, options?: ExecuteOptions): Promise<T> {
    const bad = checkCall('wrap', fn, options);
    if (bad !== undefined) return Promise.reject(bad);
    return this.level(0, fn, options);
  }

  private level<T>(i: number, fn: Task<T>, options: ExecuteOptions | undefined): Promise<T> {
    const guards = this.guards as readonly Guard[];
    if (i === guards.length - 1) return guards[i]!.execute(fn, options);
    if (i >= guards.length) return runBare(fn, options?.signal);
    // neverAborted is "no signal": passing it on as one would make inner guards listen to it for nothing.
    return guards[i]!.execute((signal) => this.level(i + 1, fn, signal === neverAborted ? undefined : { signal }), options);
  }
}

/** runBare runs a task with no guard, turning a synchronous throw into a rejection. */
async function runBare<T>(fn: Task<T>, signal: AbortSignal | undefined): Promise<T> {
  return fn(signal ?? neverAborted);
}
