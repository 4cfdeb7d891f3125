/**
 * Balancer binds one service of a `Registry` (or a `RegistryCache`, which is one) to health checks and
 * a strategy:
 *
 * 1. The instance list follows the registry (registry `followService`, core's Follower): one listing,
 *    then the service's watch events; a broken watch is re-established after a backoff, listing again
 *    first. Through a RegistryCache it shares the cache's one watch of the service. State of removed
 *    instances (health, strategy) is dropped.
 * 2. Health: passive outlier detection on every reported call (on by default) and, when configured,
 *    active HTTP probes. Ejected or down instances are left out of the list the strategy sees.
 * 3. One cap and one panic rule for every reason an instance is out (Envoy's `max_ejection_percent` and
 *    panic threshold): ejected, down, or held out by its caller — its breaker is open on evidence, or
 *    forced open by an operator (`hold`). Never more than the outlier detector's `maxEjectionPercent`
 *    of the instances are out at once: past the cap, the instances that went out last stay in rotation
 *    (forced and down ones are always out and count first, then ejected ones, then open breakers, each
 *    in the order they went out). When, after the cap, fewer than `panicThreshold` of the instances are
 *    left, the strategy picks among all of them but the forced ones (panic mode: picking an unhealthy
 *    instance beats failing every call). Held instances stay in the list the strategy sees; the caller steers
 *    around those `isHeldOut` names (its `exclude` set), and lets the others through its breakers.
 * 4. `pick(key?)` answers synchronously from memory; the list handed to the strategy keeps its
 *    identity until something changes, so strategies pick without allocating.
 * 5. Changes cost what changed: one watch event or one ejection updates the health bookkeeping in
 *    O(1) and hands the strategy a new list that differs by one instance, which it applies
 *    incrementally (a pointer comparison per instance, then work for the one that changed): well
 *    under 1 ms at 10 000 instances for every built-in strategy (bench/scale.bench.ts). A list that
 *    differs in thousands of instances (a registry's whole new list) is taken in over timer turns of
 *    `clock`, the previous list answering meanwhile: the table walk, then the health bookkeeping,
 *    then the strategy's own, each a thousand or so instances per turn. A first list of thousands is
 *    taken in the same way (the strategy's part through `Picker.prepare`); `ready()` waits for it,
 *    and reading the list before then takes the rest in at once.
 *
 * Every `pick` must be followed by exactly one `report(instance, { ok, latencyMs })`: it ends the
 * call's in-flight count and feeds latency and passive health — or by `release(instance)` when the
 * call was never made.
 */
import { systemClock, type Clock, type TimerHandle } from '../core/clock.js';
import { AbortedError, ClosedError, NoInstanceError } from '../core/errors.js';
import { balancerHealthChannel } from '../core/diagnostics.js';
import { Emitter } from '../core/events.js';
import { clockOption, finite, fn, options as checkOptions, within, type OptionKeys } from '../core/validate.js';
import type { Registry, RegistryEvent, ServiceInstance } from '../registry/types.js';
import { sameInstance } from '../registry/validate.js';
import { followService } from '../registry/follow.js';
import type { Follower } from '../core/follower.js';
import type { BalancerEvent, BalancerOptions, BalancerStats, CallOutcome, ExcludeSet, HoldReason, InstanceHealth, Picker } from './types.js';
import { InstanceTable, type Entry } from './instance-table.js';
import { ActiveHealthChecker } from './health/active.js';
import { OutlierDetector, outlierDefaults } from './health/outlier.js';
import { createPicker, type StrategyOption } from './strategies.js';
import type { MetricsContext, MetricsDescription } from '../core/metrics-description.js';
import { describeBalancer } from './balancer-metrics.js';
import { checkWeightOverrides, type WeightOverrides } from './weight-overrides.js';

/** The keys of BalancerOptions, all of them: any other is refused (see `options`). */
const BALANCER_KEYS = {
  registry: true,
  service: true,
  instances: true,
  strategy: true,
  outlier: true,
  activeHealth: true,
  panicThreshold: true,
  clock: true,
  random: true,
} as const satisfies OptionKeys<BalancerOptions>;

export type { BalancerEvent, BalancerOptions, BalancerStats, HoldReason, InstanceHealth } from './types.js';

/** Defaults for BalancerOptions. */
export const balancerDefaults = Object.freeze({ strategy: 'p2c' as StrategyOption, panicThreshold: 0.5 });

const EMPTY: readonly ServiceInstance[] = Object.freeze([]);
/** The most instances whose health bookkeeping (outlier and probe state) one turn of the loop starts or drops. */
const HEALTH_SLICE = 1_024;

/** HealthBatch is the health bookkeeping of a large list change, done HEALTH_SLICE instances per timer turn. */
interface HealthBatch {
  readonly removed: readonly Entry[];
  readonly added: readonly Entry[];
  readonly updated: readonly Entry[];
  /** How far it got: an index into removed, then added, then updated, as if concatenated. */
  done: number;
  timer: TimerHandle | undefined;
}

/** Balancer picks instances of one service, following the registry and leaving unhealthy ones out. */
export class Balancer {
  readonly service: string | undefined;
  readonly picker: Picker;
  readonly panicThreshold: number;
  /** The most instances out at once for any reason, in percent: the outlier detector's `maxEjectionPercent` (50 without one). */
  readonly maxEjectionPercent: number;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly outlier: OutlierDetector | undefined;
  private readonly active: ActiveHealthChecker | undefined;
  private readonly events = new Emitter<BalancerEvent>();
  /** The instances by id, diffed against each new list so that only what changed is handled. */
  private readonly table: InstanceTable<Entry>;
  /** The last list applied: `all` once the table has taken it over (a list differing in thousands is synced in slices). */
  private latest: readonly ServiceInstance[] = EMPTY;
  /** Ids of instances ejected or down (only ids in the list). */
  private readonly out = new Set<string>();
  /** Ids of instances their caller holds out (`hold`), with why, in the order they went out (only ids in the list). */
  private readonly held = new Map<string, HoldReason>();
  /** Of the held ids, those out of rotation now (after the cap and panic): `isHeldOut`. */
  private readonly heldOut = new Set<string>();
  /** Instances that would be out (ejected, down, breaker open) but stay in rotation under the cap. */
  private capped = 0;
  private all: readonly ServiceInstance[] = EMPTY;
  /** Weight overrides by instance id (`setWeights`), or undefined: none. */
  private overrides: ReadonlyMap<string, number> | undefined;
  /** `all` as the strategy sees it: drained instances left out, overridden ones as copies carrying their weight (`all` itself without overrides). */
  private routed: readonly ServiceInstance[] = EMPTY;
  /** Ids of listed instances whose override is 0. */
  private readonly drained = new Set<string>();
  /** The copies of overridden instances, by id, kept while the instance object and its weight stay (so the strategy sees no change). */
  private readonly copies = new Map<string, { readonly of: ServiceInstance; readonly weight: number; readonly copy: ServiceInstance }>();
  private available: readonly ServiceInstance[] = EMPTY;
  private nextExpiry = Infinity;
  private inPanic = false;
  private closed = false;
  private rotate = 0;
  private readonly follower: Follower<readonly ServiceInstance[], RegistryEvent> | undefined;
  private healthBatch: HealthBatch | undefined;
  /** The first list has been taken in by the table and the strategy (see `ready`). */
  private primed = false;
  private readonly primedWaiters = new Set<(err?: Error) => void>();

  constructor(options: BalancerOptions) {
    const o = checkOptions('Balancer', options, BALANCER_KEYS);
    this.clock = clockOption('Balancer', o.clock, systemClock);
    this.random = o.random === undefined ? Math.random : fn('Balancer', 'random', o.random);
    this.panicThreshold = finite('Balancer', 'panicThreshold', o.panicThreshold ?? balancerDefaults.panicThreshold, 0, 1);
    this.table = new InstanceTable<Entry>((instance, prev) => (prev === undefined ? { instance, seen: 0, index: 0 } : ((prev.instance = instance), prev)), {
      clock: this.clock,
      onReady: (list) => {
        if (!this.closed && list === this.latest) this.apply(list);
      },
    });
    this.picker = createPicker(o.strategy ?? balancerDefaults.strategy, { clock: this.clock, random: o.random, sliceLists: true, owner: 'Balancer' });
    if (o.registry !== undefined) {
      const r = o.registry as Partial<Registry>;
      if (r === null || typeof r !== 'object' || typeof r.getService !== 'function' || typeof r.watch !== 'function') {
        throw new TypeError('Balancer: registry must implement getService() and watch()');
      }
      if (typeof o.service !== 'string' || o.service.length === 0)
        throw new TypeError(`Balancer: service must be a non-empty string with a registry, got ${JSON.stringify(o.service)}`);
      if (o.instances !== undefined) throw new TypeError('Balancer: give either registry + service or instances, not both');
    }
    this.service = o.service;
    const outlierOpts = o.outlier;
    this.outlier =
      outlierOpts === false
        ? undefined
        : within('Balancer', 'outlier', 'OutlierDetector', () => new OutlierDetector({ ...checkOptions('OutlierDetector', outlierOpts), clock: this.clock }));
    this.maxEjectionPercent = this.outlier?.maxEjectionPercent ?? outlierDefaults.maxEjectionPercent;
    const activeOpts = o.activeHealth ?? false;
    this.active =
      activeOpts === false
        ? undefined
        : within(
            'Balancer',
            'activeHealth',
            'ActiveHealthChecker',
            () => new ActiveHealthChecker({ random: o.random, clock: this.clock, ...checkOptions('ActiveHealthChecker', activeOpts) }),
          );
    this.outlier?.onChange((e) => {
      if (e.ejected) this.out.add(e.id);
      else if (this.active?.isHealthy(e.id) ?? true) this.out.delete(e.id);
      const event: BalancerEvent = e.ejected ? { type: 'ejected', id: e.id, untilMs: e.untilMs! } : { type: 'returned', id: e.id };
      if (balancerHealthChannel.hasSubscribers) balancerHealthChannel.publish({ service: this.service, ...event });
      this.events.emit(event);
    });
    this.active?.onChange((e) => {
      if (!e.healthy) this.out.add(e.id);
      else if (!(this.outlier?.isEjected(e.id) ?? false)) this.out.delete(e.id);
      if (balancerHealthChannel.hasSubscribers) balancerHealthChannel.publish({ service: this.service, type: e.healthy ? 'up' : 'down', id: e.id });
      this.events.emit({ type: e.healthy ? 'up' : 'down', id: e.id });
      this.recompute();
    });
    if (o.registry === undefined) {
      this.update(o.instances ?? EMPTY);
    } else {
      const service = o.service!;
      this.follower = followService(o.registry, service, {
        onList: (l) => this.onList(l, service),
        onEvent: (e) => this.onEvent(e, service),
        clock: this.clock,
        random: this.random,
      });
    }
  }

  /**
   * ready resolves once the first listing of the service has arrived (a service with no instances
   * counts) and has been taken in — by the balancer and by the strategy, a list of thousands over
   * timer turns of `clock` (a pick before then takes the rest in at once, however long that takes);
   * without a registry, once `instances` has. It rejects with the error of the first listing if that
   * failed (the balancer keeps retrying in the background), with `AbortedError` when `signal` aborts
   * first, and with `ClosedError` once closed.
   */
  async ready(options?: { signal?: AbortSignal | undefined }): Promise<void> {
    const signal = options?.signal;
    if (this.follower !== undefined) await this.follower.ready(options);
    if (this.closed) throw new ClosedError('balancer is closed');
    if (signal?.aborted) throw new AbortedError('Balancer.ready aborted', { cause: signal.reason });
    if (this.primed) return;
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        this.primedWaiters.delete(waiter);
        reject(new AbortedError('Balancer.ready aborted', { cause: signal!.reason }));
      };
      const waiter = (err?: Error) => {
        signal?.removeEventListener('abort', onAbort);
        if (err === undefined) resolve();
        else reject(err);
      };
      this.primedWaiters.add(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * pick chooses an instance for one call: among the healthy instances (all of them in panic mode),
   * by the strategy, routed by `key` where the strategy supports it. Instances whose id `exclude`
   * has (those a retry already tried, or whose breaker refused) are avoided while any other is
   * available: the strategy chooses among the others by its own rule (P2C draws its two choices from
   * them), on its usual state — the list is not filtered, which would reset per-list state. Throws
   * NoInstanceError when the service has no instance, ClosedError after `close()`.
   */
  pick(key?: string, exclude?: ExcludeSet): ServiceInstance {
    if (this.closed) throw new ClosedError('balancer is closed');
    if (this.all.length === 0) this.takeFirst();
    if (this.nextExpiry !== Infinity && this.clock.now() >= this.nextExpiry) this.recompute();
    const list = this.available;
    if (list.length === 0) throw this.noInstance();
    let inst = this.picker.pick(list, key, exclude);
    if (!this.primed) this.prime(undefined); // the pick took the list in
    if (exclude !== undefined && exclude.has(inst.id)) inst = this.avoid(list, key, exclude, inst);
    this.picker.start?.(inst);
    return inst;
  }

  /**
   * setWeights sets the weight overrides of the service's instances (instance id → weight), replacing
   * the ones set before; `undefined` (or `{}`) removes them all. An override beats the instance's
   * `metadata.weight`, for instances listed now and later (ids not listed wait for their instance).
   * Each weight is a finite number in [0, 1 000000] (TypeError / RangeError otherwise, and nothing
   * changes). An overridden instance reaches the strategy as a copy whose `metadata.weight` is the
   * override (so `pick` answers that copy): the weighted strategies (`weighted-round-robin`,
   * `ring-hash`, `p2c`) share picks by it. Weight 0 drains the instance in every strategy: it is left
   * out of the list the strategy sees, takes no new picks, and its calls in flight finish and report
   * as usual; drained instances count for neither the ejection cap nor the panic rule. With every
   * instance drained, `pick` throws NoInstanceError saying so.
   */
  setWeights(overrides: WeightOverrides | undefined): void {
    const next = checkWeightOverrides('Balancer', overrides);
    if (this.closed) return;
    this.overrides = next;
    this.route();
    this.recompute();
  }

  /** weights answers the weight overrides set now (a fresh object), or undefined when there are none. */
  weights(): Record<string, number> | undefined {
    return this.overrides === undefined ? undefined : Object.fromEntries(this.overrides);
  }

  /** report ends the call to `instance` that `pick` started: feeds passive health and the strategy. */
  report(instance: ServiceInstance, outcome: CallOutcome): void {
    if (instance === null || typeof instance !== 'object' || typeof instance.id !== 'string')
      throw new TypeError('Balancer.report: instance must be a ServiceInstance');
    if (outcome === null || typeof outcome !== 'object' || typeof outcome.ok !== 'boolean')
      throw new TypeError('Balancer.report: outcome must be { ok: boolean, latencyMs: number }');
    if (this.closed) return;
    if (this.all.length === 0) this.takeFirst();
    this.picker.report?.(instance, outcome);
    if (this.outlier?.record(instance.id, outcome.ok)) this.recompute();
  }

  /**
   * release ends a pick whose call was never made (its breaker refused it, the caller gave up before
   * sending): the in-flight count drops, and neither latency nor health learns anything. Use it
   * instead of `report` for such picks.
   */
  release(instance: ServiceInstance): void {
    if (instance === null || typeof instance !== 'object' || typeof instance.id !== 'string')
      throw new TypeError('Balancer.release: instance must be a ServiceInstance');
    if (this.closed) return;
    this.picker.report?.(instance);
  }

  /**
   * update replaces the instance list (for balancers without a registry). Duplicate ids: the last
   * object wins, in the place of the first. Instances that stay keep their health and strategy state;
   * the cost is a pointer comparison per instance plus work for the instances that changed. A list
   * differing from the current one in thousands of instances is taken in over timer turns of `clock`
   * (`instances()` and picks answer the current list until then).
   */
  update(instances: readonly ServiceInstance[]): void {
    if (!Array.isArray(instances)) throw new TypeError('Balancer.update: instances must be an array');
    for (const inst of instances) {
      if (inst === null || typeof inst !== 'object' || typeof inst.id !== 'string' || inst.id.length === 0)
        throw new TypeError('Balancer.update: every instance needs a non-empty string id');
    }
    if (this.closed) return;
    this.apply(instances);
  }

  /** instances returns every known instance, healthy or not. */
  instances(): readonly ServiceInstance[] {
    if (this.all.length === 0) this.takeFirst();
    return this.all;
  }

  /** healthy returns the instances picks are made from now (all of them in panic mode). */
  healthy(): readonly ServiceInstance[] {
    if (this.all.length === 0) this.takeFirst();
    if (this.nextExpiry !== Infinity && this.clock.now() >= this.nextExpiry) this.recompute();
    return this.available;
  }

  /** panic is true while too few instances are healthy and picks go to all of them. */
  get panic(): boolean {
    return this.inPanic;
  }

  /**
   * describeMetrics answers the balancer's families (`balancer_…`: instances by state, the cap, panic,
   * and with `ctx.instanceLabel` health and EWMA per instance), read from its stats at scrape time.
   */
  describeMetrics(ctx: MetricsContext): MetricsDescription {
    return describeBalancer(this, ctx, () => this.closed);
  }

  /**
   * stats answers the counts of instances known, in rotation, out by reason (ejected, down, breaker
   * open, forced), kept in rotation by the cap, and panic mode.
   */
  stats(): BalancerStats {
    const listed = this.healthy().length;
    let breakerOpen = 0;
    let forced = 0;
    for (const [id, reason] of this.held) {
      if (reason === 'forced') forced++;
      else if (this.heldOut.has(id) && !this.out.has(id)) breakerOpen++;
    }
    return {
      instances: this.all.length,
      available: listed - this.heldOutListed(),
      ejected: this.outlier?.stats().ejected ?? 0,
      down: this.active?.stats().down ?? 0,
      drained: this.drained.size,
      breakerOpen,
      forced,
      capped: this.capped,
      panic: this.inPanic,
    };
  }

  /**
   * hold counts instance `id` as out of rotation for a reason only its caller sees: `'breaker'`, its
   * breaker is open on evidence; `'forced'`, something other than evidence holds it open (an
   * operator's isolate). Both count against the cap and the panic rule; a forced instance is always
   * out, a breaker-held one only while the cap and panic allow (`isHeldOut`). Holding again replaces
   * the reason. Ids the balancer does not list are ignored.
   */
  hold(id: string, reason: HoldReason): void {
    if (reason !== 'breaker' && reason !== 'forced') throw new TypeError(`Balancer.hold: reason must be 'breaker' or 'forced', got ${String(reason)}`);
    if (this.closed || this.held.get(id) === reason || this.table.get(id) === undefined) return;
    this.held.delete(id); // a new reason goes to the back: the order is when it went out for it
    this.held.set(id, reason);
    this.recompute();
  }

  /** unhold ends a `hold` of instance `id` (its breaker closed, the operator reset it). */
  unhold(id: string): void {
    if (this.held.delete(id)) this.recompute();
  }

  /**
   * isHeldOut tells whether the caller should keep instance `id` out of rotation now: forced, or held
   * by its breaker within the cap and not in panic. False for an instance not held: a breaker-held
   * instance the cap or panic keeps in rotation is to be called through its open breaker.
   */
  isHeldOut(id: string): boolean {
    if (this.nextExpiry !== Infinity && this.clock.now() >= this.nextExpiry) this.recompute();
    return this.heldOut.has(id);
  }

  /** health returns a snapshot of every instance's health. */
  health(): InstanceHealth[] {
    if (this.all.length === 0) this.takeFirst();
    const now = this.clock.now();
    return this.all.map((instance) => ({
      instance,
      ejected: this.outlier?.isEjected(instance.id, now) ?? false,
      up: this.active?.isHealthy(instance.id) ?? true,
      timesEjected: this.outlier?.timesEjected(instance.id) ?? 0,
    }));
  }

  /** onChange subscribes to list, health and panic changes; the returned disposer unsubscribes. */
  onChange(listener: (event: BalancerEvent) => void): () => void {
    return this.events.on(listener);
  }

  /** checkNow runs one round of active probes now (no-op without active health). */
  async checkNow(): Promise<void> {
    await this.active?.checkNow();
  }

  /** [Symbol.asyncDispose] closes the balancer (`await using b = new Balancer(…)`). */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** close stops the watch and the probes and closes the picker; later picks throw ClosedError. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.prime(new ClosedError('balancer is closed'));
    this.table.close();
    if (this.healthBatch?.timer !== undefined) this.clock.clearTimeout(this.healthBatch.timer);
    this.healthBatch = undefined;
    await this.active?.close();
    await this.follower?.close();
    await this.picker.close?.();
    this.events.clear();
  }

  /**
   * avoid is the fallback for a strategy that answered an excluded instance: one that ignores
   * `exclude` (a custom Picker), one that moves on in turn (round robin), or every instance excluded.
   * It picks once more, then takes the next allowed instance in list order.
   */
  private avoid(list: readonly ServiceInstance[], key: string | undefined, exclude: ExcludeSet, first: ServiceInstance): ServiceInstance {
    const again = this.picker.pick(list, key, exclude);
    if (!exclude.has(again.id)) return again;
    const n = list.length;
    const start = this.rotate++ % n;
    for (let k = 0; k < n; k++) {
      const inst = list[(start + k) % n]!;
      if (!exclude.has(inst.id)) return inst;
    }
    return first; // every instance was tried: the same one again beats failing
  }

  /**
   * apply makes `list` the instance list: the table reports what changed, and only those instances'
   * health state is added or dropped.
   */
  private apply(list: readonly ServiceInstance[]): void {
    const t = this.table;
    this.latest = list;
    t.sync(list, true);
    if (t.pending && t.entries.length === 0) return; // a first list, walked in slices: `onReady` applies it
    if (t.added.length === 0 && t.removed.length === 0 && t.updated.length === 0 && t.entries.length === this.all.length) {
      if (!this.primed) this.prepare(); // an empty first list
      return;
    }
    const entries = t.entries;
    const all = new Array<ServiceInstance>(entries.length);
    for (let i = 0; i < entries.length; i++) all[i] = entries[i]!.instance;
    this.all = Object.freeze(all);
    this.route();
    // Health state is started and dropped for what changed: at once for a few instances, for
    // thousands over timer turns (an instance's passive health counts from when its state starts).
    this.flushHealth(); // an earlier batch first: each instance's changes apply in order
    const batch: HealthBatch = { removed: t.removed, added: t.added, updated: t.updated, done: 0, timer: undefined };
    if (this.outlier !== undefined || this.active !== undefined || this.out.size > 0) {
      // A batch of thousands starts on the next turn: this one has taken the list over.
      const total = batch.removed.length + batch.added.length + batch.updated.length;
      if (this.closed || total <= HEALTH_SLICE) this.healthStep(batch, Infinity);
      else this.scheduleHealth(batch);
    }
    this.events.emit({ type: 'instances', count: this.all.length });
    this.recompute();
    if (!this.primed) this.prepare();
  }

  /** takeFirst completes a first list being walked in slices, health state included: the balancer's list is read before it is in. */
  private takeFirst(): void {
    if (!this.table.pending || this.closed) return;
    this.apply(this.latest);
    this.flushHealth();
  }

  /** prepare has the strategy take the first list in (over timer turns), then resolves `ready`. */
  private prepare(): void {
    const p = this.picker;
    const list = this.available;
    if (p.prepare === undefined || list.length === 0) return this.prime(undefined);
    p.prepare(list, () => this.prime(undefined));
  }

  /** prime marks the first list taken in (or the balancer closed: `err`) and settles `ready`. */
  private prime(err: Error | undefined): void {
    this.primed = true;
    const waiters = [...this.primedWaiters];
    this.primedWaiters.clear();
    for (const w of waiters) w(err);
  }

  /** healthStep does up to `budget` instances of `b`'s health bookkeeping; answers true when it is done. */
  private healthStep(b: HealthBatch, budget: number): boolean {
    const { removed, added, updated } = b;
    const total = removed.length + added.length + updated.length;
    const end = Math.min(total, b.done + budget);
    for (let k = b.done; k < end; k++) {
      if (k < removed.length) {
        const id = removed[k]!.instance.id;
        this.out.delete(id);
        this.held.delete(id);
        this.outlier?.remove(id);
        this.active?.remove(id);
      } else if (k < removed.length + added.length) {
        const e = added[k - removed.length]!;
        this.outlier?.add(e.instance.id);
        this.active?.add(e.instance);
      } else {
        this.active?.add(updated[k - removed.length - added.length]!.instance); // takes the new object (address)
      }
    }
    b.done = end;
    return end === total;
  }

  private scheduleHealth(b: HealthBatch): void {
    this.healthBatch = b;
    b.timer = this.clock.setTimeout(() => {
      b.timer = undefined;
      if (this.healthBatch !== b) return;
      if (!this.healthStep(b, HEALTH_SLICE)) return this.scheduleHealth(b);
      this.healthBatch = undefined;
      this.recompute();
    }, 0);
    b.timer.unref();
  }

  /** flushHealth completes a batch of health bookkeeping still running on timers. */
  private flushHealth(): void {
    const b = this.healthBatch;
    if (b === undefined) return;
    this.healthBatch = undefined;
    if (b.timer !== undefined) this.clock.clearTimeout(b.timer);
    this.healthStep(b, Infinity);
  }

  /**
   * route derives `routed` from `all` and the overrides: drained instances out, overridden ones as
   * frozen copies with `metadata.weight` set (one copy per instance object and weight, so recomputing
   * hands the strategy the same objects). Without overrides it is `all`.
   */
  private route(): void {
    const all = this.all;
    const o = this.overrides;
    this.drained.clear();
    if (o === undefined) {
      this.copies.clear();
      this.routed = all;
      return;
    }
    const list: ServiceInstance[] = [];
    let changed = false;
    for (let i = 0; i < all.length; i++) {
      const inst = all[i]!;
      const w = o.get(inst.id);
      if (w === undefined) {
        list.push(inst);
        continue;
      }
      changed = true;
      if (w === 0) {
        this.drained.add(inst.id);
        continue;
      }
      const known = this.copies.get(inst.id);
      if (known !== undefined && known.of === inst && known.weight === w) list.push(known.copy);
      else {
        const copy: ServiceInstance = Object.freeze({ ...inst, metadata: Object.freeze({ ...inst.metadata, weight: String(w) }) });
        this.copies.set(inst.id, { of: inst, weight: w, copy });
        list.push(copy);
      }
    }
    for (const [id, c] of this.copies) if (o.get(id) !== c.weight || this.table.get(id)?.instance !== c.of) this.copies.delete(id);
    this.routed = changed ? Object.freeze(list) : all;
  }

  /** noInstance builds the error of a pick with nothing to pick from: no instance, or every one drained. */
  private noInstance(): NoInstanceError {
    const service = this.service ?? 'the service';
    if (this.all.length > 0 && this.drained.size === this.all.length) {
      return new NoInstanceError(`no instance of ${service} to pick: every instance is drained (weight 0)`);
    }
    return new NoInstanceError(`no instance of ${service} to pick`);
  }

  /**
   * recompute derives the list the strategy sees from the instances and those out (ejected, down,
   * held): the whole list while none is (no copy), else the others (a new array only when it
   * differs). The cap and panic rule of the module comment decide who is out: forced holds and down
   * instances first, then ejected ones, then breaker holds, each in the order they went out.
   */
  private recompute(): void {
    const all = this.routed;
    const drained = this.drained;
    this.outlier?.expire(this.clock.now()); // returns update `out` through the change listener
    let next: readonly ServiceInstance[] = all;
    let panic = false;
    this.heldOut.clear();
    this.capped = 0;
    if (this.out.size > 0 || this.held.size > 0) {
      const { out, held, heldOut } = this;
      const n = all.length;
      let forced = 0;
      for (const [id, reason] of held) if (reason === 'forced' && !drained.has(id)) forced++;
      // The cap first (Envoy ejects no more than max_ejection_percent), then panic on what is left.
      let room = Math.max(0, Math.floor((n * this.maxEjectionPercent) / 100) - forced);
      const leftOut = new Set<string>();
      for (const [id, reason] of held) {
        if (reason !== 'forced' || drained.has(id)) continue;
        heldOut.add(id);
        if (out.has(id)) leftOut.add(id);
      }
      const breakerOut: string[] = [];
      // Down instances (active probes) are counted but never put back: a probe saw them fail to answer.
      if (this.active !== undefined) {
        for (const id of out) {
          if (leftOut.has(id) || drained.has(id) || this.active.isHealthy(id)) continue;
          leftOut.add(id);
          if (room > 0) room--;
        }
      }
      for (const id of out) {
        if (leftOut.has(id) || drained.has(id)) continue;
        if (room > 0) {
          room--;
          leftOut.add(id);
        } else this.capped++;
      }
      for (const [id, reason] of held) {
        if (reason !== 'breaker' || out.has(id) || drained.has(id)) continue;
        if (room > 0) {
          room--;
          heldOut.add(id);
          breakerOut.push(id);
        } else this.capped++;
      }
      // Panic: too few are left in rotation. Everything but the forced is picked from.
      let outNow = leftOut.size;
      for (const id of heldOut) if (!leftOut.has(id)) outNow++;
      panic = n - outNow < this.panicThreshold * n;
      if (panic) {
        for (const id of breakerOut) heldOut.delete(id);
        for (const id of [...leftOut]) if (held.get(id) !== 'forced') leftOut.delete(id);
      }
      if (leftOut.size > 0) {
        const healthy: ServiceInstance[] = [];
        for (let i = 0; i < all.length; i++) if (!leftOut.has(all[i]!.id)) healthy.push(all[i]!);
        next = healthy;
      }
    }
    if (!sameList(next, this.available)) this.available = next === all ? all : Object.freeze(next as ServiceInstance[]);
    this.nextExpiry = this.outlier?.nextExpiry() ?? Infinity;
    if (panic !== this.inPanic) {
      this.inPanic = panic;
      if (balancerHealthChannel.hasSubscribers) balancerHealthChannel.publish({ service: this.service, type: 'panic', panic });
      this.events.emit({ type: 'panic', panic });
    }
  }

  /** heldOutListed counts the held-out instances still in the list the strategy sees (not also ejected or down). */
  private heldOutListed(): number {
    if (this.heldOut.size === 0) return 0;
    let k = 0;
    for (const id of this.heldOut) if (!this.out.has(id)) k++; // a held id also in `out` is left out of the list
    return k;
  }

  /** onList replaces the instance list with a registry listing, unless it changes nothing. */
  private onList(instances: readonly ServiceInstance[], service: string): void {
    if (this.closed) return;
    // Instances equal to the ones known keep their objects, so a listing that changes nothing (a
    // re-list after a broken watch) keeps the list and its identity: strategies keep their state.
    const list: ServiceInstance[] = [];
    for (const inst of instances) {
      if (inst?.name !== service || typeof inst.id !== 'string' || inst.id.length === 0) continue;
      const known = this.table.get(inst.id)?.instance;
      list.push(known !== undefined && (known === inst || sameInstance(known, inst)) ? known : inst);
    }
    this.apply(list);
  }

  /** onEvent applies one watch event; events that change nothing are ignored. */
  private onEvent(event: RegistryEvent, service: string): void {
    const inst = event?.instance;
    if (this.closed || inst === undefined || inst === null || inst.name !== service || typeof inst.id !== 'string' || inst.id.length === 0) return;
    // While a large list is synced in slices, the event applies to that list (the table does not know it yet).
    const latest = this.latest;
    const known = this.table.pending ? latest.find((x) => x.id === inst.id) : this.table.get(inst.id)?.instance;
    if (event.type === 'delete') {
      if (known === undefined) return;
      this.apply(latest.filter((x) => x.id !== inst.id));
    } else if (known === undefined) {
      this.apply([...latest, inst]);
    } else if (known !== inst && !sameInstance(known, inst)) {
      this.apply(latest.map((x) => (x.id === inst.id ? inst : x)));
    }
  }
}

function sameList(a: readonly ServiceInstance[], b: readonly ServiceInstance[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
