/**
 * The `bulwark` load-balancing policy: what is per instance, decided per attempt (only the policy sees
 * each attempt, so this is where go-zero's p2c balancer lives in zrpc too).
 *
 * - One grpc-js leaf balancer (pick-first over the endpoint) per instance keeps its connection.
 * - Rotation is the instances whose connection is READY, whose health checks do not say NOT_SERVING,
 *   that outlier detection has not ejected, and whose breaker is not open — within one cap and one
 *   panic rule, the Balancer's (Envoy's `max_ejection_percent` and panic threshold): each channel keeps
 *   a Balancer over its instances that holds out every ejected instance and every breaker not closed
 *   (`hold`: 'forced' while the breaker is `heldOpen`, an operator's isolate; else 'breaker'), and the
 *   policy leaves out only those it answers `isHeldOut`. So no more than the outlier options'
 *   `maxEjectionPercent` (50 % by default) of the instances are out for these reasons at once: past the
 *   cap, the ones that went out last stay in rotation, called through their open breaker
 *   (`admitAnyway`: the outcome is counted in the breaker's stats, `bypassedCalls`, without moving its
 *   state); and when fewer than `panicThreshold` would be left, all but the forced are. A forced
 *   breaker is never called past. While every READY instance is out (NOT_SERVING counts here, outside
 *   the cap), picks go to all of them but the forced: better a probably failing call than none.
 * - The pick is our balancer's strategy (P2C on EWMA latency × in-flight by default; round robin,
 *   smooth weighted, ring hash keyed by `hashHeader`, …). The attempt's start and end feed the picker
 *   (in-flight, latency) and the instance's CircuitBreaker: an instance failing with go-zero's failure
 *   codes has its breaker open and leaves rotation until the open period passes and probes succeed.
 * - Every attempt's outcome also feeds the channel's OutlierDetector (passive health, Envoy's outlier
 *   detection): consecutive failed attempts eject the instance for its ejection time; a timer on the
 *   discovery's clock brings it back. The breaker watches the failure rate, the detector the streak.
 * - Retry attempts (grpc-js retries UNAVAILABLE attempts, see retry.ts) are picked here too: each
 *   withdraws from the service's RetryBudget (refused: UNAVAILABLE with ERR_RETRY_BUDGET_EXHAUSTED, no
 *   call) and avoids the instances that just failed; first attempts deposit.
 */
import type { ChannelOptions } from '@grpc/grpc-js';
import { CircuitBreaker } from '../breaker/circuit-breaker.js';
import type { BreakerState } from '../breaker/types.js';
import { Balancer } from '../balancer/balancer.js';
import type { Picker } from '../balancer/types.js';
import type { ServiceInstance } from '../registry/types.js';
import type { AdmissionToken } from '../core/admission.js';
import {
  childHelper,
  ConnectivityState,
  endpointKey,
  leaf,
  PickResultType,
  Status,
  queuePicker,
  registerPolicy,
  unavailablePicker,
  type ChannelControlHelper,
  type Endpoint,
  type GrpcPicker,
  type LeafBalancer,
  type LoadBalancer,
  type PickArgs,
  type PickResult,
  type StatusOr,
  type TypedLoadBalancingConfig,
} from './adapter.js';
import { HealthProber } from './health-prober.js';
import { refusal } from './status.js';
import { BreakerOpenError } from '../core/errors.js';
import { OutlierDetector } from '../balancer/health/outlier.js';
import type { Clock, TimerHandle } from '../core/clock.js';
import { AVOID_FAILED_MS, budgetRefusal, PREVIOUS_ATTEMPTS_HEADER } from './retry.js';
import type { RetryBudget } from '../policy/retry-budget.js';
import { bindingOf, type DiscoveryBinding, type GrpcInstanceStats } from './bindings.js';

/** The policy's name in service configs. */
export const POLICY_NAME = 'bulwark';

/** How often, at most, open breakers are looked at again (an open period that passed reads as half-open). */
const RECHECK_MS = 100;

class BulwarkConfig implements TypedLoadBalancingConfig {
  constructor(
    readonly discovery: string,
    readonly service: string,
  ) {}
  getLoadBalancerName(): string {
    return POLICY_NAME;
  }
  toJsonObject(): object {
    return { [POLICY_NAME]: { discovery: this.discovery, service: this.service } };
  }
  static createFromJson(obj: unknown): BulwarkConfig {
    const o = (obj ?? {}) as { discovery?: unknown; service?: unknown };
    if (typeof o.discovery !== 'string' || typeof o.service !== 'string') throw new Error('bulwark policy: config needs discovery and service strings');
    return new BulwarkConfig(o.discovery, o.service);
  }
}

interface Child {
  key: string;
  instance: ServiceInstance;
  leaf: LeafBalancer;
  breaker: CircuitBreaker | undefined;
  health: HealthProber | undefined;
  serving: boolean;
  /** Its breaker's state, as its last transition said (closed without a breaker). */
  breakerState: BreakerState;
  /** What the cap knows it by: `{ id: key }` (an address is stable where the registry's id may arrive later). */
  readonly capEntry: ServiceInstance;
  /** Ejected by outlier detection (consecutive failed attempts), until its ejection time passes. */
  ejected: boolean;
  picks: number;
  failures: number;
  inFlight: number;
  /** When its last attempt ended with a failure code (−∞: never): retry attempts avoid it for a while. */
  failedAt: number;
}

class BulwarkLoadBalancer implements LoadBalancer {
  private readonly children = new Map<string, Child>();
  private binding: DiscoveryBinding | undefined;
  private service = '';
  private picker: Picker | undefined;
  private readonly helper: ChannelControlHelper;
  private paused = false;
  private disposeStats: (() => void) | undefined;
  private lastError: string | null = null;
  private note = '';
  /** Every resolved instance, one array while membership is unchanged (pickers cache per array). */
  private all: ServiceInstance[] | undefined;
  /** Outlier detection over the attempts' outcomes (ids are the children's keys), when on. */
  private outlier: OutlierDetector | undefined;
  private disposeOutlier: (() => void) | undefined;
  /** The timer that ends the next ejection. */
  private expiry: TimerHandle | undefined;
  /**
   * The cap and panic rule over every reason an instance is out (ejected, breaker not closed): a
   * Balancer over the children's `capEntry`s, only ever held and asked `isHeldOut` (never picked from
   * or reported to). Made with the binding.
   */
  private capper: Balancer | undefined;

  constructor(private readonly parent: ChannelControlHelper) {
    this.helper = childHelper(parent, (_state, _picker, err) => {
      if (err) this.lastError = err;
      this.update();
    });
  }

  updateAddressList(list: StatusOr<Endpoint[]>, config: TypedLoadBalancingConfig, options: ChannelOptions, note: string): boolean {
    if (!(config instanceof BulwarkConfig)) return false;
    const b = bindingOf(config.discovery);
    if (b === undefined) {
      this.parent.updateState(ConnectivityState.TRANSIENT_FAILURE, unavailablePicker(`bulwark:///${config.service}: its GrpcDiscovery was closed`), null);
      return true;
    }
    if (this.binding !== b) {
      this.disposeStats?.();
      this.binding = b;
      this.picker = b.newPicker();
      this.disposeStats = b.addBalancer(this);
      void this.capper?.close();
      this.capper = new Balancer({
        instances: [...this.children.values()].map((c) => c.capEntry),
        clock: b.clock,
        strategy: 'round-robin',
        outlier: b.outlier,
        panicThreshold: b.panicThreshold,
      });
      this.setOutlier(b);
    }
    this.service = config.service;
    this.note = note;
    this.all = undefined;
    if (!list.ok) {
      if (this.children.size === 0) this.parent.updateState(ConnectivityState.TRANSIENT_FAILURE, unavailablePicker(list.error.details), list.error.details);
      return true;
    }
    const seen = new Set<string>();
    this.paused = true;
    for (const endpoint of list.value) {
      const key = endpointKey(endpoint);
      if (seen.has(key)) continue;
      seen.add(key);
      const instance = b.instance(config.service, key) ?? { id: key, name: config.service, address: key };
      const c = this.children.get(key);
      if (c !== undefined) {
        c.instance = instance;
        c.leaf.updateEndpoint(endpoint, options);
        continue;
      }
      const child: Child = {
        key,
        instance,
        leaf: leaf(endpoint, this.helper, options, note),
        breaker: undefined,
        health: undefined,
        serving: true,
        breakerState: 'closed',
        capEntry: { id: key, name: config.service, address: key },
        ejected: false,
        picks: 0,
        failures: 0,
        inFlight: 0,
        failedAt: -Infinity,
      };
      if (b.instanceBreaker !== false) {
        const br = new CircuitBreaker({ ...b.instanceBreaker, name: `${config.service}/${key}`, clock: b.instanceBreaker.clock ?? b.clock });
        br.onStateChange((e) => {
          child.breakerState = e.to;
          this.hold(child);
          this.update();
        });
        child.breaker = br;
      }
      if (b.health !== false) {
        child.health = new HealthProber(
          key,
          b.health,
          b.clock,
          (serving) => {
            child.serving = serving;
            this.update();
          },
          b.credentials,
        );
      }
      this.children.set(key, child);
      this.outlier?.add(key);
      child.leaf.startConnecting();
    }
    let removed = false;
    for (const [key, c] of this.children) {
      if (seen.has(key)) continue;
      this.children.delete(key);
      this.outlier?.remove(key);
      this.drop(c);
      removed = true;
    }
    if (removed || this.children.size !== this.capper?.instances().length) this.capper?.update([...this.children.values()].map((c) => c.capEntry));
    this.paused = false;
    this.update();
    return true;
  }

  /** setOutlier makes the outlier detector of `b`'s options, whose ejections and returns update the picker. */
  private setOutlier(b: DiscoveryBinding): void {
    this.disposeOutlier?.();
    this.disposeOutlier = undefined;
    this.clearExpiry();
    this.outlier = undefined;
    for (const c of this.children.values()) {
      c.ejected = false;
      this.hold(c);
    }
    if (b.outlier === false) return;
    const detector = (this.outlier = new OutlierDetector({ ...b.outlier, clock: b.outlier.clock ?? b.clock }));
    for (const key of this.children.keys()) detector.add(key);
    this.disposeOutlier = detector.onChange((e) => {
      const c = this.children.get(e.id);
      if (c !== undefined) {
        c.ejected = e.ejected;
        this.hold(c);
      }
      if (e.ejected) this.scheduleExpiry(b.clock);
      this.update();
    });
  }

  /** scheduleExpiry sets the one timer that returns the next ejected instance when its time is up. */
  private scheduleExpiry(clock: Clock): void {
    const next = this.outlier?.nextExpiry() ?? Infinity;
    this.clearExpiry();
    if (next === Infinity) return;
    this.expiry = clock.setTimeout(
      () => {
        this.expiry = undefined;
        this.outlier?.expire(); // emits the returns: each updates the picker
        this.scheduleExpiry(clock);
      },
      Math.max(0, next - clock.now()),
    );
    this.expiry.unref?.();
  }

  private clearExpiry(): void {
    if (this.expiry !== undefined) this.binding?.clock.clearTimeout(this.expiry);
    this.expiry = undefined;
  }

  /**
   * hold tells the cap why child `c` is out, if it is: 'forced' while its breaker is held open by force
   * (never put back), 'breaker' while ejected or its breaker is not closed (put back past the cap or in
   * panic); else it is let go.
   */
  private hold(c: Child): void {
    const cap = this.capper;
    if (cap === undefined) return;
    if (c.breaker?.heldOpen === true) cap.hold(c.key, 'forced');
    else if (c.ejected || c.breakerState !== 'closed') cap.hold(c.key, 'breaker');
    else cap.unhold(c.key);
  }

  private drop(c: Child): void {
    c.leaf.destroy();
    c.health?.close();
    void c.breaker?.close?.();
  }

  /**
   * update hands grpc-js a new picker over every resolved instance, with those out of rotation
   * excluded. The picker sees the whole resolved list (kept as one array while membership is
   * unchanged), not only the connected part: its per-instance state and slow start follow the
   * registry's membership, not the order in which connections came up.
   */
  private update(): void {
    if (this.paused || this.binding === undefined) return;
    let ready = 0;
    let connecting = false;
    for (const c of this.children.values()) {
      const st = c.leaf.getConnectivityState();
      if (st === ConnectivityState.READY) ready++;
      else if (st === ConnectivityState.CONNECTING) connecting = true;
      else if (st === ConnectivityState.IDLE) {
        connecting = true;
        c.leaf.exitIdle();
      }
    }
    if (ready > 0) {
      if (this.all === undefined) this.all = [...this.children.values()].map((c) => c.instance);
      const budget = this.binding.retry?.budget(this.service);
      this.parent.updateState(
        ConnectivityState.READY,
        new BulwarkPicker(this.all, this.children, this.picker!, this.binding, this.service, budget, this.outlier, this.capper!),
        null,
      );
    } else if (connecting) {
      this.parent.updateState(ConnectivityState.CONNECTING, queuePicker(this), null);
    } else {
      const why =
        this.children.size === 0
          ? `bulwark:///${this.service}: ${this.note || 'no instance resolved'}`
          : `bulwark:///${this.service}: no connection to any of ${this.children.size} instance(s); last error: ${this.lastError}`;
      this.parent.updateState(ConnectivityState.TRANSIENT_FAILURE, unavailablePicker(why), why);
    }
  }

  exitIdle(): void {
    for (const c of this.children.values()) c.leaf.exitIdle();
  }
  resetBackoff(): void {}
  destroy(): void {
    for (const c of this.children.values()) this.drop(c);
    this.children.clear();
    this.disposeStats?.();
    this.disposeStats = undefined;
    this.disposeOutlier?.();
    this.disposeOutlier = undefined;
    this.clearExpiry();
    void this.capper?.close();
    this.capper = undefined;
  }
  getTypeName(): string {
    return POLICY_NAME;
  }

  /** inRotation tells whether picks go to child `c` now, as BulwarkPicker decides (`lastResort`: no READY instance is usable). */
  private inRotation(c: Child, lastResort: boolean): boolean {
    if (c.leaf.getConnectivityState() !== ConnectivityState.READY) return false;
    if (lastResort) return c.breaker?.heldOpen !== true;
    return usable(c, this.capper);
  }

  stats(): { service: string; instances: GrpcInstanceStats[] } {
    let lastResort = true;
    for (const c of this.children.values()) if (usable(c, this.capper)) lastResort = false;
    return {
      service: this.service,
      instances: [...this.children.values()].map((c) => ({
        id: c.instance.id,
        address: c.key,
        connectivity: ConnectivityState[c.leaf.getConnectivityState()] ?? 'UNKNOWN',
        serving: c.serving,
        ejected: c.ejected,
        breaker: c.breaker?.state ?? 'none',
        inRotation: this.inRotation(c, lastResort),
        inFlight: c.inFlight,
        picks: c.picks,
        failures: c.failures,
      })),
    };
  }
}

/** usable tells whether child `c` is in rotation by the usual rule: READY, serving, and not held out by the cap. */
function usable(c: Child, capper: Balancer | undefined): boolean {
  return c.leaf.getConnectivityState() === ConnectivityState.READY && c.serving && !(capper?.isHeldOut(c.key) ?? false);
}

/**
 * BulwarkPicker picks by the strategy among every resolved instance, excluding those not connected
 * and, unless that would leave none, those NOT_SERVING or held out by the cap (ejected, breaker not
 * closed, within the cap and not in panic); see the module comment.
 */
class BulwarkPicker implements GrpcPicker {
  private readonly out = new Set<string>();
  /** Ids out only because their breaker is open: looked at again, as an open period ends. */
  private readonly opened = new Set<string>();
  private readonly byId = new Map<string, Child>();
  private nextCheck = 0;
  private readonly hashHeader: string | undefined;

  constructor(
    private readonly all: readonly ServiceInstance[],
    children: ReadonlyMap<string, Child>,
    private readonly picker: Picker,
    private readonly b: DiscoveryBinding,
    private readonly service: string,
    /** The service's retry budget, when retries are on. */
    private readonly budget: RetryBudget | undefined,
    /** The channel's outlier detection, fed every attempt's outcome. */
    private readonly outlier: OutlierDetector | undefined,
    /** The cap and panic rule: who is held out of rotation now. */
    private readonly capper: Balancer,
  ) {
    this.hashHeader = b.hashHeader;
    let usableCount = 0;
    for (const c of children.values()) {
      this.byId.set(c.instance.id, c);
      if (c.leaf.getConnectivityState() !== ConnectivityState.READY) this.out.add(c.instance.id);
      else if (usable(c, capper)) usableCount++;
    }
    if (usableCount === 0) {
      // Every connected instance is out: use them all but the forced (better a probably failing call than none).
      for (const c of children.values()) if (c.breaker?.heldOpen === true) this.out.add(c.instance.id);
      return;
    }
    for (const c of children.values()) {
      const id = c.instance.id;
      if (this.out.has(id)) continue;
      if (!c.serving) this.out.add(id);
      else if (capper.isHeldOut(c.key)) {
        this.out.add(id);
        // Out for its breaker (open or half-open): looked at again, so that a half-open one takes its probes.
        if (!c.ejected && c.breaker?.heldOpen !== true) this.opened.add(id);
      }
    }
  }

  pick(args: PickArgs): PickResult {
    const now = this.b.clock.now();
    if (this.opened.size > 0 && now >= this.nextCheck) {
      // An open period that has passed reads as half-open: let such instances be picked (and probed) again.
      this.nextCheck = now + RECHECK_MS;
      for (const id of this.opened) {
        const br = this.byId.get(id)!.breaker;
        if (br !== undefined && br.state !== 'open') {
          this.opened.delete(id);
          this.out.delete(id);
        }
      }
    }
    const key = this.hashHeader === undefined ? undefined : args.metadata.get(this.hashHeader)[0]?.toString();
    // A retry attempt (grpc-js marks it) avoids the instances that just failed, the one it retries among them.
    const retry = this.budget !== undefined && args.metadata.get(PREVIOUS_ATTEMPTS_HEADER).length > 0;
    let exclude = retry ? this.avoidFailed(now) : this.out.size > 0 ? this.out : undefined;
    let inst = this.picker.pick(this.all, key, exclude);
    let child = this.byId.get(inst.id)!;
    let token: AdmissionToken | undefined = this.admit(child);
    if (child.breaker !== undefined && token === undefined && (exclude?.size ?? 0) < this.all.length - 1) {
      // Its breaker refuses (open, or half-open with every probe out) and the cap holds it out: avoid it and pick once more.
      this.out.add(inst.id);
      if (child.breaker.heldOpen !== true) this.opened.add(inst.id);
      if (exclude === undefined) exclude = this.out;
      else exclude.add(inst.id);
      inst = this.picker.pick(this.all, key, exclude);
      child = this.byId.get(inst.id)!;
      token = this.admit(child);
    }
    if (child.breaker !== undefined && token === undefined) {
      // Nothing else to pick: through its breaker unless it is held open by force, as in panic.
      token = child.breaker.admitAnyway();
      if (token === undefined)
        return {
          pickResultType: PickResultType.DROP,
          subchannel: null,
          status: heldOpenRefusal(this.service, child.key),
          onCallStarted: null,
          onCallEnded: null,
        };
    }
    const result = child.leaf.getPicker().pick(args);
    if (result.pickResultType !== PickResultType.COMPLETE) {
      token?.release();
      return result;
    }
    if (this.budget !== undefined) {
      if (!retry) this.budget.recordCall();
      else if (!this.budget.allowRetry()) {
        token?.release();
        return { pickResultType: PickResultType.DROP, subchannel: null, status: budgetRefusal(this.service), onCallStarted: null, onCallEnded: null };
      }
    }
    const picker = this.picker;
    const b = this.b;
    const outlier = this.outlier;
    const chosen = inst;
    const c = child;
    let start = 0;
    return {
      pickResultType: PickResultType.COMPLETE,
      subchannel: result.subchannel,
      status: null,
      onCallStarted: () => {
        start = b.clock.now();
        c.picks++;
        c.inFlight++;
        picker.start?.(chosen);
        result.onCallStarted?.();
      },
      onCallEnded: (code, details, metadata) => {
        c.inFlight--;
        const latencyMs = b.clock.now() - start;
        const failed = b.isFailure(code);
        picker.report?.(chosen, { ok: !failed, latencyMs });
        if (token !== undefined) {
          if (code === Status.CANCELLED) token.release();
          else if (failed) token.failure();
          else token.success();
          token = undefined;
        }
        if (failed) {
          c.failures++;
          c.failedAt = b.clock.now();
        }
        if (outlier !== undefined && code !== Status.CANCELLED) outlier.record(c.key, !failed);
        result.onCallEnded?.(code, details, metadata);
      },
    };
  }

  /**
   * admit answers the token of an attempt on `c`: its breaker's admission, or — when the breaker refuses
   * on evidence but the cap or panic keeps `c` in rotation — a call let past it (`admitAnyway`, counted
   * in its stats). Undefined: refused (held out, or held open by force). Without a breaker, undefined too.
   */
  private admit(c: Child): AdmissionToken | undefined {
    const br = c.breaker;
    if (br === undefined) return undefined;
    const token = br.tryAdmit();
    if (token !== undefined || this.capper.isHeldOut(c.key)) return token;
    return br.admitAnyway();
  }

  /** avoidFailed is the exclude set of a retry attempt: those out of rotation and those that failed within AVOID_FAILED_MS, unless that is every one. */
  private avoidFailed(now: number): Set<string> | undefined {
    const avoid = new Set(this.out);
    for (const c of this.byId.values()) if (now - c.failedAt < AVOID_FAILED_MS) avoid.add(c.instance.id);
    if (avoid.size < this.all.length) return avoid;
    return this.out.size > 0 ? new Set(this.out) : undefined;
  }
}

/** heldOpenRefusal is the status of an attempt whose only instance left has its breaker held open by force (an operator's isolate). */
function heldOpenRefusal(service: string, address: string) {
  return refusal(
    Status.UNAVAILABLE,
    BreakerOpenError.code,
    `bulwark:///${service}: the breaker of ${address} is held open and no other instance is in rotation`,
  );
}

/** registerBulwarkPolicy registers the `bulwark` policy with grpc-js (once per process). */
export function registerBulwarkPolicy(): void {
  registerPolicy(POLICY_NAME, BulwarkLoadBalancer, BulwarkConfig);
}
