/**
 * The one shape every call guard shares (STYLE.md §7): breakers, retry, timeout, bulkhead and fallback
 * all implement `Guard`, so `wrap(a, b, c)` can nest any of them.
 */

/**
 * Task is the guarded work. It receives an AbortSignal: the caller's, or one a guard (timeout, retry)
 * aborts; when no one can abort the call it is `neverAborted`, so no guard allocates a controller it
 * does not need. A task may return a plain value, a promise, or throw synchronously.
 */
export type Task<T> = (signal: AbortSignal) => T | PromiseLike<T>;

/** ExecuteOptions are the per-call options every guard accepts. */
export interface ExecuteOptions {
  /** Aborts the call (and any wait for a slot, a retry or a probe). */
  signal?: AbortSignal | undefined;
}

/** Guard runs a task under some protection and answers its result or a coded error. */
export interface Guard {
  execute<T>(fn: Task<T>, options?: ExecuteOptions): Promise<T>;
}

/** neverAborted is an AbortSignal that never aborts: what a task gets when nobody can cancel it. */
export const neverAborted: AbortSignal = new AbortController().signal;
