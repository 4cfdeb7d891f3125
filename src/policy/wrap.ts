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
import { neverAborted, type ExecuteOptions, type Task } from '../core/guard.js';
import { showValue } from '../core/validate.js';
import { checkCall } from './check-call.js';
import type { FallbackValue, GuardLike, Wrapped } from './types.js';

/** wrap composes `guards` into one guard, the first outermost. With no guards it runs the task as it is. */
export function wrap<G extends GuardLike[]>(...guards: G): Wrapped<FallbackValue<G[number]>> {
  guards.forEach((g, i) => {
    if (g === null || typeof g !== 'object' || typeof (g as { execute?: unknown }).execute !== 'function') {
      throw new TypeError(`wrap: guards[${i}] must have an execute(fn, options) method, got ${showValue(g)}`);
    }
  });
  return new Wrap<FallbackValue<G[number]>>(Object.freeze([...guards]));
}

/**
 * Step is how Wrap calls each guard: with a task of `unknown` result. Every Guard is one, and so is a
 * Fallback<R> widened to Fallback<unknown>; `Wrapped<R>.execute` requires its tasks to answer `R`s
 * when a Fallback<R> is inside (`T extends R`), so what comes back is a `T | R`.
 */
interface Step {
  execute(fn: Task<unknown>, options?: ExecuteOptions): Promise<unknown>;
}

class Wrap<R> implements Wrapped<R> {
  private readonly steps: readonly Step[];

  constructor(readonly guards: readonly GuardLike[]) {
    this.steps = guards;
  }

  execute<T>(fn: Task<T>, options?: ExecuteOptions): Promise<T | R> {
    const bad = checkCall('wrap', fn, options);
    if (bad !== undefined) return Promise.reject(bad);
    // Each guard answers the task's result or, for a Fallback<R>, an R: what Wrapped<R> promises.
    return this.level(0, fn, options) as Promise<T | R>;
  }

  private level(i: number, fn: Task<unknown>, options: ExecuteOptions | undefined): Promise<unknown> {
    const steps = this.steps;
    if (i === steps.length - 1) return steps[i]!.execute(fn, options);
    if (i >= steps.length) return runBare(fn, options?.signal);
    // neverAborted is "no signal": passing it on as one would make inner guards listen to it for nothing.
    return steps[i]!.execute((signal) => this.level(i + 1, fn, signal === neverAborted ? undefined : { signal }), options);
  }
}

/** runBare runs a task with no guard, turning a synchronous throw into a rejection. */
async function runBare<T>(fn: Task<T>, signal: AbortSignal | undefined): Promise<T> {
  return fn(signal ?? neverAborted);
}
