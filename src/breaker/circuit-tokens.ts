/**
 * The tokens a CircuitBreaker hands out: one for a call admitted while closed, one for a half-open
 * probe. Each reports its call's outcome back to the breaker once; a later report is ignored.
 */
import type { InternalToken } from './execute-path.js';
import type { CircuitBreaker } from './circuit-breaker.js';

/** ClosedToken reports a call admitted in the closed state; only its first report counts. */
export class ClosedToken implements InternalToken {
  private b: CircuitBreaker | undefined;
  constructor(
    b: CircuitBreaker,
    private readonly epoch: number,
    private readonly start: number,
  ) {
    this.b = b;
  }
  success(): void {
    const b = this.b;
    if (b === undefined) return;
    this.b = undefined;
    b.reportClosed(this.epoch, false, this.start, undefined);
  }
  failure(err?: unknown): void {
    const b = this.b;
    if (b === undefined) return;
    this.b = undefined;
    b.reportClosed(this.epoch, true, this.start, err);
  }
  /** release gives the admission back without counting the call. */
  release(): void {
    this.b = undefined;
  }
}

/**
 * ReportOnce is a token whose success, failure and release each report once, through `deliver`
 * (`failed` undefined for a release); any report after the first is ignored.
 */
abstract class ReportOnce implements InternalToken {
  protected b: CircuitBreaker | undefined;
  constructor(b: CircuitBreaker) {
    this.b = b;
  }
  success(): void {
    this.report(false, undefined);
  }
  failure(err?: unknown): void {
    this.report(true, err);
  }
  release(): void {
    this.report(undefined, undefined);
  }
  private report(failed: boolean | undefined, err: unknown): void {
    const b = this.b;
    if (b === undefined) return;
    this.b = undefined;
    this.deliver(b, failed, err);
  }
  /** deliver hands the breaker the token's one report (`failed` undefined: released without counting). */
  protected abstract deliver(b: CircuitBreaker, failed: boolean | undefined, err: unknown): void;
}

/** ProbeToken reports a half-open probe; only its first report counts, and none after its permit expired. A release frees the probe's permit at once. */
export class ProbeToken extends ReportOnce {
  constructor(
    b: CircuitBreaker,
    private readonly epoch: number,
    private readonly slot: number,
    private readonly gen: number,
  ) {
    super(b);
  }
  protected deliver(b: CircuitBreaker, failed: boolean | undefined, err: unknown): void {
    b.reportProbe(this.epoch, this.slot, this.gen, failed, err);
  }
}

/**
 * BypassToken reports a call `admitAnyway()` let past the open state: its outcome is counted in the
 * breaker's totals (and a failure's reason kept) without moving the state machine. Only the first
 * report counts; a release gives the admission back without counting the call.
 */
export class BypassToken extends ReportOnce {
  protected deliver(b: CircuitBreaker, failed: boolean | undefined, err: unknown): void {
    if (failed !== undefined) b.reportBypass(failed, err);
  }
}

/** FleetProbeToken reports a call admitted with a fleet-wide probe permit (bulwark/fleet); only its first report counts. A release gives the permit back without counting the call. */
export class FleetProbeToken extends ReportOnce {
  constructor(
    b: CircuitBreaker,
    private readonly epoch: number,
  ) {
    super(b);
  }
  protected deliver(b: CircuitBreaker, failed: boolean | undefined, err: unknown): void {
    b.reportFleetProbe(this.epoch, failed, err);
  }
}
