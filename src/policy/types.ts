/**
 * The shapes of bulwark/policy: what `wrap` accepts and answers. The option, stats and event shapes of
 * each policy are declared here too, beside nothing but types.
 */
import type { ExecuteOptions, Guard, Task } from '../core/guard.js';
import type { Fallback } from './fallback.js';

/**
 * GuardLike is what `wrap` accepts: anything with an `execute(fn, { signal })` method — every Guard,
 * and a `Fallback<R>`, which guards tasks answering `R`s.
 */
export type GuardLike = Guard | Fallback<unknown>;

/** FallbackValue is the union of the value types of the Fallbacks among `G` (never when there are none). */
export type FallbackValue<G> = G extends Fallback<infer R> ? R : never;

/** WrappedTask is the result type a wrap may guard: anything without a Fallback, an `R` with a Fallback<R> inside. */
export type WrappedResult<R> = [R] extends [never] ? unknown : R;

/**
 * Wrapped is what `wrap` returns: a guard whose result is the task's, widened by the value type `R` of
 * any Fallback inside (a plain Guard when there is none). With a Fallback<R> inside, tasks must answer
 * `R`s, as that Fallback requires. `guards` lists what it composes, outermost first.
 */
export interface Wrapped<R = never> {
  execute<T extends WrappedResult<R>>(fn: Task<T>, options?: ExecuteOptions): Promise<T | R>;
  readonly guards: readonly GuardLike[];
}
