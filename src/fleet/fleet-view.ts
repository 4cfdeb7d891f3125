/**
 * FleetView: one breaker's view of its fleet. It publishes the breaker's window counts (on a change, at
 * most every `publishMs`, and as a heartbeat every ttlMs / 3: never per call; the failure that makes
 * the window a failing reporter at once, see `failed`), follows the other
 * processes' reports through the store's watch, and applies the quorum rule (quorum.ts). When the rule
 * holds it holds the breaker open (reason `fleet`); probing is then the fleet's: every `openMs`, at most
 * `halfOpenCalls` probes across the fleet, each from a permit taken in the store, and when a period's
 * probes all succeed the store moves the generation on and every view lets its breaker close. Reports
 * of an older generation no longer count, so the evidence that opened the fleet cannot reopen it.
 *
 * The store failing never fails a call: a view that cannot reach its store says so in its stats and
 * hands a held breaker back to its own open period (local half-open as without a fleet); when the store
 * answers again the view reads a fresh snapshot.
 */
import type { Clock, TimerHandle } from '../core/clock.js';
import type { Disposer } from '../core/events.js';
import { integer, positive, showValue } from '../core/validate.js';
import type { BreakerFleetOptions, FleetLink, FleetMember, FleetViewStats } from '../breaker/types.js';
import { decideQuorum, isFailingReporter, type FleetReport, type QuorumRule, type QuorumVerdict } from './quorum.js';
import type { FleetEvent, FleetStore } from './types.js';

/** Defaults of the fleet options (BreakerFleetOptions). */
export const fleetDefaults = Object.freeze({
  minReports: 2,
  ttlMs: 5_000,
  publishMs: 100,
});

const OWNER = 'fleet';
/**
 * Operations in a row that may fail (a publish, a permit, a probe's result) before the view counts the
 * store as down: one slow answer (an etcd fsync on a busy disk) is not an outage while the watch is up.
 * A lost watch or a failed snapshot counts at once.
 */
const FAILURES_TO_DOWN = 3;
/**
 * A window whose failures did not change is published again only once its calls moved by more than this
 * share (or at the heartbeat): a healthy process's counts change with every call, and publishing each
 * change would cost the store a write per instance per publishMs for nothing the rule needs.
 */
const CALLS_DRIFT = 0.25;
const NO_VERDICT: QuorumVerdict = Object.freeze({ open: false, reporters: 0, failingReporters: 0, quorum: 2, pooledCalls: 0, pooledFailures: 0, cap: 0 });

interface Seen {
  report: FleetReport;
  at: number;
}

/** FleetView is the link between one breaker and its store; see the module comment. */
export class FleetView implements FleetLink {
  readonly key: string;
  private readonly rule: QuorumRule;
  private readonly ttlMs: number;
  private readonly publishMs: number;
  private readonly reports = new Map<string, Seen>();
  private gen = 0;
  private holding = false;
  private available = false;
  private verdict: QuorumVerdict = NO_VERDICT;
  private lastCalls = -1;
  private lastFailures = -1;
  private lastGen = -1;
  private lastPublishAt = -Infinity;
  /** The report last handed to the store (in flight or stored) counted as failing: ≥ minReports calls at the failure rate. */
  private sentFailing = false;
  /** A failing report waits for the publish in flight: it is sent on that one's answer. */
  private failingPending = false;
  /** When the last publish out of the tick (a failing report's) started: at most one per publishMs. */
  private lastEarlyAt = -Infinity;
  /** No publish before this time: after a failed one, the next waits publishMs, doubled per failure up to 1 s. */
  private publishRetryAt = -Infinity;
  private publishBackoff = 0;
  private lastResyncAt = -Infinity;
  private probeFrom = Infinity;
  private busy = false;
  private permitPending = false;
  private permits = 0;
  private errors = 0;
  private failuresInARow = 0;
  private closed = false;
  private readonly timer: TimerHandle;
  private readonly unwatch: Disposer;

  constructor(
    private readonly store: FleetStore,
    private readonly member: FleetMember,
    options: BreakerFleetOptions,
    private readonly clock: Clock,
  ) {
    const key = options.key ?? member.name;
    if (typeof key !== 'string' || key === '') throw new TypeError(`${OWNER}: key must be a non-empty string, got ${showValue(key)}`);
    this.key = key;
    this.rule = {
      minimumCalls: member.minimumCalls,
      failureRate: member.failureRate,
      minReports: integer(OWNER, 'minReports', options.minReports ?? fleetDefaults.minReports, 1, 1_000_000),
      quorum: options.quorum === undefined ? undefined : integer(OWNER, 'quorum', options.quorum, 1, 1_000_000),
    };
    this.ttlMs = positive(OWNER, 'ttlMs', options.ttlMs ?? fleetDefaults.ttlMs);
    this.publishMs = positive(OWNER, 'publishMs', options.publishMs ?? fleetDefaults.publishMs);
    this.unwatch = store.watch(
      key,
      (e) => this.onEvent(e),
      (up) => this.onStatus(up),
    );
    this.timer = clock.setInterval(() => this.tick(), this.publishMs);
    this.timer.unref();
    this.resync();
  }

  probeDone(ok: boolean): void {
    if (this.closed) return;
    const gen = this.gen;
    this.store.probeResult(this.key, gen, ok, this.member.halfOpenCalls).then(
      (g) => {
        this.failuresInARow = 0;
        this.setGen(g);
      },
      () => this.fail(false),
    );
  }

  /**
   * failed: the breaker counted a failed call. Once the window is a failing reporter (at least minReports
   * calls at the failure rate) and the last report sent was not, the report goes out now, not at the next
   * tick: it is the evidence the others' rule waits for, and the tick's phase (up to publishMs) was the
   * first wait of the chain. At most one such publish per publishMs, one in flight; a failure that does
   * not change what the others' rule sees costs a window read and nothing else.
   */
  failed(): void {
    if (this.closed) return;
    this.publish(this.clock.now(), true);
  }

  stats(): FleetViewStats {
    const v = this.verdict;
    return {
      available: this.available,
      holding: this.holding,
      reporters: v.reporters,
      failingReporters: v.failingReporters,
      quorum: v.quorum,
      pooledCalls: v.pooledCalls,
      pooledFailures: v.pooledFailures,
      generation: this.gen,
      probePermits: this.permits,
      storeErrors: this.errors,
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.clock.clearTimeout(this.timer);
    this.unwatch();
    await this.store.leave(this.key).catch(() => undefined);
  }

  /** tick runs every publishMs: expiry, publishing, probe permits, and the operator's reset put right. */
  private tick(): void {
    if (this.closed) return;
    const now = this.clock.now();
    const self = this.store.callerId;
    for (const [caller, seen] of this.reports) {
      if (caller !== self && now - seen.at >= this.ttlMs) this.reports.delete(caller);
    }
    if (!this.available && now - this.lastResyncAt >= Math.min(1_000, this.ttlMs / 3)) this.resync();
    this.publish(now);
    // The breaker's rule as it runs now: a reconfigure of minimumCalls or failureRate reaches the pool at the next tick.
    if (this.rule.minimumCalls !== this.member.minimumCalls || this.rule.failureRate !== this.member.failureRate) {
      this.rule.minimumCalls = this.member.minimumCalls;
      this.rule.failureRate = this.member.failureRate;
      this.evaluate();
    }
    if (this.holding && !this.member.heldByFleet) this.member.fleetHold(this.reason()); // reset by hand: the fleet still holds
    if (this.holding && this.member.heldByFleet && this.available && !this.permitPending && now >= this.probeFrom) this.takePermit(); // an isolated breaker takes no permit it cannot use
  }

  /** publish keeps the own report and sends it by the rules of the module comment; `early`: a failure's call, out of the tick. */
  private publish(now: number, early = false): void {
    const c = this.member.fleetCounts();
    const report: FleetReport = { caller: this.store.callerId, gen: this.gen, calls: c.calls, failures: c.failures };
    const own = this.reports.get(report.caller)?.report;
    this.reports.set(report.caller, { report, at: now });
    if (own === undefined || own.calls !== c.calls || own.failures !== c.failures || own.gen !== this.gen) this.evaluate();
    const min = this.rule.minReports;
    // A window of fewer than minReports calls does not count in anyone's rule: it is not published
    // (nor kept alive), unless it replaces one that counted. So a fleet's first write for a dependency
    // is the first report that counts — it used to queue behind an empty one, which on etcd (a lease
    // and a raft write) could take longer than the failures it should have carried.
    if (c.calls < min && this.lastCalls < min) return;
    const failing = isFailingReporter(c.calls, c.failures, this.rule);
    if (early) {
      // Out of the tick only for the crossing into a failing reporter; anything else waits for the tick.
      if (!failing || this.sentFailing) return;
      if (this.busy) {
        this.failingPending = true;
        return;
      }
      if (now < this.publishRetryAt || now - this.lastEarlyAt < this.publishMs) return;
      this.lastEarlyAt = now;
    } else {
      const changed =
        c.failures !== this.lastFailures ||
        this.gen !== this.lastGen ||
        c.calls >= min !== this.lastCalls >= min ||
        Math.abs(c.calls - this.lastCalls) > this.lastCalls * CALLS_DRIFT;
      if (this.busy || now < this.publishRetryAt || (!changed && now - this.lastPublishAt < this.ttlMs / 3)) return;
    }
    this.busy = true;
    this.failingPending = false;
    this.sentFailing = failing;
    this.lastPublishAt = now;
    this.store.publish(this.key, report, this.ttlMs).then(
      () => {
        this.busy = false;
        this.lastCalls = report.calls;
        this.lastFailures = report.failures;
        this.lastGen = report.gen;
        this.failuresInARow = 0;
        this.publishBackoff = 0;
        if (!this.available) this.resync();
        // A window that became failing while this one was on its way goes now, not at the next tick.
        if (this.failingPending && !this.closed) this.publish(this.clock.now(), true);
      },
      () => {
        this.busy = false;
        this.sentFailing = false;
        // A store that failed is not asked again at every tick: a partitioned or struggling store would get
        // a write per view per publishMs; a store that answers again gets the current counts within 1 s.
        this.publishBackoff = Math.min(1_000, Math.max(this.publishMs, this.publishBackoff * 2));
        this.publishRetryAt = this.clock.now() + this.publishBackoff;
        this.fail(false);
      },
    );
  }

  private resync(): void {
    if (this.closed) return;
    this.lastResyncAt = this.clock.now();
    this.store.snapshot(this.key).then(
      (snap) => {
        if (this.closed) return;
        const now = this.clock.now();
        const self = this.store.callerId;
        const own = this.reports.get(self);
        this.reports.clear();
        if (own !== undefined) this.reports.set(self, own);
        for (const r of snap.reports) if (r.caller !== self) this.reports.set(r.caller, { report: r, at: now });
        this.available = true;
        this.failuresInARow = 0;
        this.setGen(snap.gen);
        this.evaluate();
      },
      () => this.fail(true),
    );
  }

  private onEvent(e: FleetEvent): void {
    if (this.closed) return;
    if (e.type === 'generation') {
      this.setGen(e.gen);
      return;
    }
    if (e.type === 'gone') {
      if (e.caller !== this.store.callerId) this.reports.delete(e.caller);
    } else {
      const r = e.report;
      if (r.caller === this.store.callerId) return;
      this.reports.set(r.caller, { report: r, at: this.clock.now() });
      if (r.gen > this.gen) {
        this.setGen(r.gen); // a generation we missed
        return;
      }
    }
    this.evaluate();
  }

  private onStatus(up: boolean): void {
    if (this.closed) return;
    if (up) this.resync();
    else this.fail(true);
  }

  private setGen(gen: number): void {
    if (this.closed || gen <= this.gen) return;
    this.gen = gen;
    if (this.holding) {
      this.holding = false;
      this.probeFrom = Infinity;
      this.member.fleetRelease('closed', `fleet: all ${this.member.halfOpenCalls} probes of the fleet succeeded`);
    }
    this.lastPublishAt = -Infinity;
    this.sentFailing = false;
    this.publish(this.clock.now());
  }

  private evaluate(): void {
    const v = decideQuorum(
      (function* (m) {
        for (const s of m.values()) yield s.report;
      })(this.reports),
      this.gen,
      this.rule,
    );
    this.verdict = v;
    if (!this.available) return;
    if (this.member.kind === 'sre') {
      this.poolSre(v);
      return;
    }
    if (!this.holding && v.open) {
      this.holding = true;
      this.probeFrom = this.clock.now() + this.member.openMs;
      this.member.fleetHold(this.reason());
    }
  }

  /** poolSre hands an SreBreaker the rest of the fleet's pooled counts while a quorum fails, and nothing otherwise. */
  private poolSre(v: QuorumVerdict): void {
    if (!v.open) {
      this.member.fleetPool?.(undefined);
      return;
    }
    const own = this.reports.get(this.store.callerId)?.report;
    const ownCalls = own !== undefined && own.calls >= this.rule.minReports ? Math.min(own.calls, v.cap) : 0;
    const ownFailures = ownCalls === 0 ? 0 : (ownCalls * own!.failures) / own!.calls;
    const requests = Math.max(0, v.pooledCalls - ownCalls);
    const failures = Math.max(0, v.pooledFailures - ownFailures);
    this.member.fleetPool?.({ requests, accepts: Math.max(0, requests - failures) });
  }

  private reason(): string {
    const v = this.verdict;
    const rate = v.pooledCalls === 0 ? 0 : Math.round((v.pooledFailures / v.pooledCalls) * 1000) / 10;
    return `fleet: ${v.failingReporters} of ${v.reporters} reporters failing (quorum ${v.quorum}), pooled failure rate ${rate}% over ${v.pooledCalls} calls`;
  }

  private takePermit(): void {
    this.permitPending = true;
    const gen = this.gen;
    this.store.takePermit(this.key, gen, this.member.halfOpenCalls, this.member.openMs).then(
      (a) => {
        this.permitPending = false;
        this.failuresInARow = 0;
        if (!this.holding || gen !== this.gen) return;
        if (a.granted) {
          this.permits++;
          this.member.fleetProbe();
        } else this.probeFrom = this.clock.now() + Math.max(1, a.periodLeftMs);
      },
      () => {
        this.permitPending = false;
        this.fail(false);
      },
    );
  }

  /** fail counts a failed operation; the view goes down at once (`now`: the watch or a snapshot) or after FAILURES_TO_DOWN in a row. */
  private fail(now: boolean): void {
    this.errors++;
    if (!this.available || (!now && ++this.failuresInARow < FAILURES_TO_DOWN)) return;
    this.available = false;
    if (this.holding) {
      this.holding = false;
      this.probeFrom = Infinity;
      this.member.fleetRelease('open', 'fleet store unavailable: open on its own terms');
    }
  }
}
