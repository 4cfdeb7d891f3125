/**
 * DeadlineTimer: the timer of a deadline that blames a dependency — a call's timeout, a peer's, a
 * probe's — and that does not blame it for the process's own stall.
 *
 * Why: Node runs due timers before it polls for I/O. A process blocked past a deadline (a long GC
 * pause, synchronous work, a starved core) would run the deadline's timer first and fail the call,
 * although the answer arrived in time and sits unread in the socket. A timer that runs LATE_MS or more
 * after its deadline says the process was busy: it fires one timer turn later (GRACE_MS), once the
 * event loop has polled for I/O in between, so that answers read then settle their calls first. A
 * timer on time fires at once.
 *
 * The price, documented where a deadline is: after a stall, a deadline fires one timer turn (≥ 1 ms)
 * later than it would have. A deadline runs on the injected clock; a `ManualClock` fires its timers at
 * their due time, so in tests they are on time unless the test's clock says otherwise.
 */
import type { Clock, TimerHandle } from './clock.js';

/** A deadline timer that runs this many ms or more late says the process was busy. */
export const LATE_MS = 1;
/** How long after a late run the deadline fires: one timer turn, with an I/O poll before it. */
export const GRACE_MS = 1;

/** DeadlineTimer calls `fire` once `ms` from now on `clock`, or one turn later after a stall; see the module comment. */
export class DeadlineTimer {
  private timer: TimerHandle | undefined;
  private referenced = true;
  /** The deadline: a reading of `clock`. */
  private readonly deadline: number;

  constructor(
    private readonly clock: Clock,
    ms: number,
    private readonly fire: () => void,
  ) {
    this.deadline = clock.now() + ms;
    this.timer = clock.setTimeout(() => this.due(), ms);
  }

  /** due runs at the deadline, or late: then the deadline fires one timer turn later. */
  private due(): void {
    if (this.clock.now() - this.deadline >= LATE_MS) {
      this.timer = this.clock.setTimeout(() => this.graceOver(), GRACE_MS);
      if (!this.referenced) this.timer.unref();
      return;
    }
    this.timer = undefined;
    this.fire();
  }

  private graceOver(): void {
    this.timer = undefined;
    this.fire();
  }

  /** pending is true until the deadline fires or the timer is cancelled. */
  get pending(): boolean {
    return this.timer !== undefined;
  }

  /** cancel stops the timer: `fire` is not called. Idempotent. */
  cancel(): void {
    if (this.timer === undefined) return;
    this.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** ref makes the pending timer hold the event loop open (the default). */
  ref(): this {
    this.referenced = true;
    this.timer?.ref();
    return this;
  }

  /** unref lets the process exit while the timer is pending. */
  unref(): this {
    this.referenced = false;
    this.timer?.unref();
    return this;
  }
}
