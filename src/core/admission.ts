/**
 * The two answers every guard in bulwark gives, one type each: an `AdmissionToken` from whatever admits
 * a call and wants to hear how it went (breakers, the shedder, the HTTP and gRPC seams over them), and a
 * `LimitDecision` from whatever counts calls against a budget (every limiter, local or Redis).
 */

/**
 * AdmissionToken marks the outcome of one admitted call: call exactly one of `success`, `failure` or
 * `release`. Only the first report counts; later ones are ignored.
 */
export interface AdmissionToken {
  /** success reports that the call worked. */
  success(): void;
  /** failure reports that the call failed; `err`, when given, may be kept as a reason a later refusal lists. */
  failure(err?: unknown): void;
  /**
   * release gives the admission back without counting the call as a success or a failure: for a call
   * that never ran (a later guard refused it, the request went away first) or that the caller itself
   * cancelled, which says nothing about the dependency.
   */
  release(): void;
}

/** LimitDecision is one limiter's answer with the numbers behind it (what `RateLimit-*` and `Retry-After` headers are made of). */
export interface LimitDecision {
  /** allowed is true when the call may go ahead (its tokens or quota were taken). */
  readonly allowed: boolean;
  /** limit is the budget: the bucket's burst, or the period's quota. */
  readonly limit: number;
  /** remaining is what is left after this decision, in whole calls (≥ 0). */
  readonly remaining: number;
  /**
   * retryAfterMs is 0 when allowed; otherwise how long until the same request could be allowed
   * (`Infinity` when it never can, e.g. n > burst).
   */
  readonly retryAfterMs: number;
  /** resetMs is how long until the budget is whole again (bucket full, or the window ends). */
  readonly resetMs: number;
}
