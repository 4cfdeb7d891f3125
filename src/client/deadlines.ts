/**
 * AttemptTimeout is the per-attempt timeout of ResilientClient. Attempts nobody else can abort join the
 * shared deadlines of core `Deadlines` (one AbortSignal and one timer per granule of 1 % of the
 * timeout, see src/core/deadline.ts: a signal may abort up to 1 % late, and after its attempt ended);
 * attempts with a caller signal go through the policy `Timeout`, which links a signal of their own to
 * the caller's.
 */
import type { Clock } from '../core/clock.js';
import { Deadlines } from '../core/deadline.js';
import { neverAborted, type Task } from '../core/guard.js';
import { Timeout } from '../policy/timeout.js';

/** AttemptTimeout holds the shared deadlines and the policy Timeout of one timeout value. */
export class AttemptTimeout {
  readonly deadlines: Deadlines;
  readonly policy: Timeout;

  constructor(
    readonly timeoutMs: number,
    clock?: Clock,
  ) {
    this.deadlines = new Deadlines({ timeoutMs, what: 'attempt', clock });
    this.policy = new Timeout({ timeoutMs, clock });
  }

  /** run runs `task` under the deadline; `signal` is the caller's (or `neverAborted`). */
  run<T>(task: Task<T>, signal: AbortSignal): Promise<T> {
    return signal === neverAborted ? this.deadlines.run(task) : this.policy.execute(task, { signal });
  }
}
