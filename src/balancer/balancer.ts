/**
 * Balancer binds one service of a `Registry` (or a `RegistryCache`, which is one) to health checks and
 * a strategy (reference 004 §2.4 and §五):
 *
 * 1. The instance list follows the registry (`RegistryFollower`): one listing, then the service's
 *    watch events; a broken watch is re-established after a backoff, listing again first. State of
 *    removed instances (health, strategy) is dropped.
 * 2. Health: passive outlier detection on every reported call (on by default) and, when configured,
 *    active HTTP probes. Ejected or down instances are left out of the list the strategy sees.
 * 3. Panic mode (Envoy's panic threshold, reference 004's "better than failing"): when fewer than
 *    `panicThreshold` of the instances are healthy, the strategy picks among all of them.
 * 4. `pick(key?)` answers synchronously from memory; the list handed to the strategy keeps its
 *    identity until something changes, so strategies pick without allocating.
 *
 * Every `pick` must be followed by exactly one `report(instance, { ok, latencyMs })`: it ends the
 * call's in-flight count and feeds latency and passive health — or by `release(instance)` when the
 * call was never made.
 */
import { systemClock, type Clock } from '../core/clock.js';
import { ClosedError, NoInstanceError } from '../core/errors.js';
import { Emitter } from '../core/events.js';
import { clockOption, finite, fn, options as checkOptions } from '../core/validate.js';
import type { Registry, RegistryEvent, ServiceInstance } from '../registry/types.js';
import { sameInstance } from '../registry/validate.js';
import type { CallOutcome, ExcludeSet, Picker } from './types.js';
import { ActiveHealthChecker, type ActiveHealthOptions } from './health/active.js';
import { OutlierDetector, type OutlierOptions } from './health/outlier.js';
import { RegistryFollower } from './registry-follower.js';
import { createPicker, type StrategyOption } from './strategies.js';

/** BalancerOptions configures a Balancer. Give either `registry` + `service`, or `instances`. */
export interface BalancerOptions {
  /** Where the instances come from (a Registry or a RegistryCache). Defaults to none: use `instances` / `update()`. */
  registry?: Registry;
  /** The service to balance over; required with `registry`. Defaults to none. */
  service?: string;
  /** A fixed instance list, for use without a registry (replace it with `update()`). Defaults to []. */
  instances?: readonly ServiceInstance[];
  /** The strategy: a name, a Picker, or a factory. Defaults to `'p2c'`. */
  strategy?: StrategyOption;
  /** Passive outlier detection, or false to turn it off. Defaults to `{}` (Envoy's defaults, 50 % max). */
  outlier?: OutlierOptions | false;
  /** Active HTTP probes, or false for none. Defaults to false (instances need a health endpoint). */
  activeHealth?: ActiveHealthOptions | false;
  /** Below this share of healthy instances, pick among all (panic mode), in [0, 1]; 0 never panics. Defaults to 0.5. */
  panicThreshold?: number;
  /** Time source (shared with outlier detection and the strategy). Defaults to `systemClock`. */
  clock?: Clock;
  /** Uniform random numbers in [0, 1) (strategy, backoff, probe jitter). Defaults to `Math.random`. */
  random?: () => number;
}

/** Defaults for BalancerOptions. */
export const balancerDefaults = Object.freeze({ strategy: 'p2c' as StrategyOption, panicThreshold: 0.5 });

/** BalancerEvent tells what changed: the list, an instance's health, or panic mode. */
export type BalancerEvent =
  | { readonly type: 'instances'; readonly count: number }
  | { readonly type: 'ejected'; readonly id: string; readonly untilMs: number }
  | { readonly type: 'returned'; readonly id: string }
  | { readonly type: 'down'; readonly id: string }
  | { readonly type: 'up'; readonly id: string }
  | { readonly type: 'panic'; readonly panic: boolean };

/** InstanceHealth is one instance's health as the balancer sees it. */
export interface InstanceHealth {
  readonly instance: ServiceInstance;
  /** Ejected by outlier detection. */
  readonly ejected: boolean;
  /** Up according to active probes (true when probes are off). */
  readonly up: boolean;
  /** How many times outlier detection has ejected it. */
  readonly timesEjected: number;
}

const EMPTY: readonly ServiceInstance[] = Object.freeze([]);

/** Balancer picks instances of one service, following the registry and leaving unhealthy ones out. */
export class Balancer {
  readonly service: string | undefined;
  readonly picker: Picker;
  readonly panicThreshold: number;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly outlier: OutlierDetector | undefined;
  private readonly active: ActiveHealthChecker | undefined;
  private readonly events = new Emitter<BalancerEvent>();
  private byId = new Map<string, ServiceInstance>();
  private all: readonly ServiceInstance[] = EMPTY;
  private available: readonly ServiceInstance[] = EMPTY;
  private nextExpiry = Infinity;
  private inPanic = false;
  private closed = false;
  private rotate = 0;
  private readonly follower: RegistryFollower | undefined;

  constructor(options: BalancerOptions) {
    const o = checkOptions('Balancer', options);
    this.clock = clockOption('Balancer', o.clock, systemClock);
    this.random = o.random === undefined ? Math.random : fn('Balancer', 'random', o.random);
    this.panicThreshold = finite('Balancer', 'panicThreshold', o.panicThreshold ?? balancerDefaults.panicThreshold, 0, 1);
    this.picker = createPicker(o.strategy ?? balancerDefaults.strategy, { clock: this.clock, random: o.random });
    if (o.registry !== undefined) {
      const r = o.registry as Partial<Registry>;
      if (r === null || typeof r !== 'object' || typeof r.getService !== 'function' || typeof r.watch !== 'function') {
        throw new TypeError('Balancer: registry must implement getService() and watch()');
      }
      if (typeof o.service !== 'string' || o.service.length === 0) throw new TypeError(`Balancer: service must be a non-empty string with a registry, got ${JSON.stringify(o.service)}`);
      if (o.instances !== undefined) throw new TypeError('Balancer: give either registry + service or instances, not both');
    }
    this.service = o.service;
    this.outlier = o.outlier === false ? undefined : new OutlierDetector({ ...(o.outlier ?? {}), clock: this.clock });
    const activeOpts = o.activeHealth ?? false;
    this.active = activeOpts === false ? undefined : new ActiveHealthChecker({ random: o.random, ...activeOpts });
    this.outlier?.onChange((e) => {
      this.events.emit(e.ejected ? { type: 'ejected', id: e.id, untilMs: e.untilMs! } : { type: 'returned', id: e.id });
    });
    this.active?.onChange((e) => {
      this.events.emit({ type: e.healthy ? 'up' : 'down', id: e.id });
      this.recompute();
    });
    if (o.registry === undefined) {
      this.update(o.instances ?? EMPTY);
    } else {
      const service = o.service!;
      const hooks = { onList: (l: readonly ServiceInstance[]) => this.onList(l, service), onEvent: (e: RegistryEvent) => this.onEvent(e, service) };
      this.follower = new RegistryFollower(o.registry, service, hooks, this.clock, this.random);
    }
  }

  /**
   * ready resolves once the first listing of the service has arrived (a service with no instances
   * counts), or at once without a registry; it rejects with the error of the first listing if that
   * failed (the balancer keeps retrying in the background).
   */
  ready(): Promise<void> {
    if (this.follower === undefined) return this.closed ? Promise.reject(new ClosedError('balancer is closed')) : Promise.resolve();
    return this.follower.ready();
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
    if (this.nextExpiry !== Infinity && this.clock.now() >= this.nextExpiry) this.recompute();
    const list = this.available;
    if (list.length === 0) throw new NoInstanceError(`no instance of ${this.service ?? 'the service'} to pick`);
    let inst = this.picker.pick(list, key, exclude);
    if (exclude !== undefined && exclude.has(inst.id)) inst = this.avoid(list, key, exclude, inst);
    this.picker.start?.(inst);
    return inst;
  }

  /** report ends the call to `instance` that `pick` started: feeds passive health and the strategy. */
  report(instance: ServiceInstance, outcome: CallOutcome): void {
    if (instance === null || typeof instance !== 'object' || typeof instance.id !== 'string') throw new TypeError('Balancer.report: instance must be a ServiceInstance');
    if (outcome === null || typeof outcome !== 'object' || typeof outcome.ok !== 'boolean') throw new TypeError('Balancer.report: outcome must be { ok: boolean, latencyMs: number }');
    if (this.closed) return;
    this.picker.report?.(instance, outcome);
    if (this.outlier?.record(instance.id, outcome.ok)) this.recompute();
  }

  /**
   * release ends a pick whose call was never made (its breaker refused it, the caller gave up before
   * sending): the in-flight count drops, and neither latency nor health learns anything. Use it
   * instead of `report` for such picks.
   */
  release(instance: ServiceInstance): void {
    if (instance === null || typeof instance !== 'object' || typeof instance.id !== 'string') throw new TypeError('Balancer.release: instance must be a ServiceInstance');
    if (this.closed) return;
    this.picker.report?.(instance);
  }

  /** update replaces the instance list (for balancers without a registry). Duplicate ids: the last wins. */
  update(instances: readonly ServiceInstance[]): void {
    if (!Array.isArray(instances)) throw new TypeError('Balancer.update: instances must be an array');
    const byId = new Map<string, ServiceInstance>();
    for (const inst of instances) {
      if (inst === null || typeof inst !== 'object' || typeof inst.id !== 'string' || inst.id.length === 0) throw new TypeError('Balancer.update: every instance needs a non-empty string id');
      byId.set(inst.id, inst);
    }
    this.byId = byId;
    this.rebuild();
  }

  /** instances returns every known instance, healthy or not. */
  instances(): readonly ServiceInstance[] {
    return this.all;
  }

  /** healthy returns the instances picks are made from now (all of them in panic mode). */
  healthy(): readonly ServiceInstance[] {
    if (this.nextExpiry !== Infinity && this.clock.now() >= this.nextExpiry) this.recompute();
    return this.available;
  }

  /** panic is true while too few instances are healthy and picks go to all of them. */
  get panic(): boolean {
    return this.inPanic;
  }

  /** health returns a snapshot of every instance's health. */
  health(): InstanceHealth[] {
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

  /** close stops the watch and the probes; later picks throw ClosedError. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.active?.close();
    await this.follower?.close();
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

  private rebuild(): void {
    this.all = Object.freeze([...this.byId.values()]);
    this.outlier?.retain(this.byId.keys());
    this.active?.update(this.all);
    this.events.emit({ type: 'instances', count: this.all.length });
    this.recompute();
  }

  /** recompute derives the list the strategy sees from the instances and their health. */
  private recompute(): void {
    const all = this.all;
    const now = this.clock.now();
    this.outlier?.expire(now);
    let healthy: ServiceInstance[] | undefined;
    for (let i = 0; i < all.length; i++) {
      const inst = all[i]!;
      const ok = !(this.outlier?.isEjected(inst.id, now) ?? false) && (this.active?.isHealthy(inst.id) ?? true);
      if (!ok && healthy === undefined) healthy = all.slice(0, i);
      else if (ok && healthy !== undefined) healthy.push(inst);
    }
    let next: readonly ServiceInstance[] = all;
    let panic = false;
    if (healthy !== undefined) {
      if (healthy.length < this.panicThreshold * all.length) panic = true;
      else next = healthy;
    }
    if (!sameList(next, this.available)) this.available = next === all ? all : Object.freeze(next as ServiceInstance[]);
    this.nextExpiry = this.outlier?.nextExpiry() ?? Infinity;
    if (panic !== this.inPanic) {
      this.inPanic = panic;
      this.events.emit({ type: 'panic', panic });
    }
  }

  /** onList replaces the instance list with a registry listing, unless it changes nothing. */
  private onList(instances: readonly ServiceInstance[], service: string): void {
    if (this.closed) return;
    const byId = new Map<string, ServiceInstance>();
    for (const inst of instances) if (inst?.name === service && typeof inst.id === 'string' && inst.id.length > 0) byId.set(inst.id, inst);
    // A listing that changes nothing (a re-list after a broken watch) keeps the list and its identity,
    // so strategies keep their state and the ring is not rebuilt.
    if (sameMembers(this.byId, byId)) return;
    this.byId = byId;
    this.rebuild();
  }

  /** onEvent applies one watch event; events that change nothing are ignored. */
  private onEvent(event: RegistryEvent, service: string): void {
    const inst = event?.instance;
    if (this.closed || inst === undefined || inst === null || inst.name !== service || typeof inst.id !== 'string' || inst.id.length === 0) return;
    if (event.type === 'delete') {
      if (!this.byId.delete(inst.id)) return;
    } else {
      const known = this.byId.get(inst.id);
      if (known !== undefined && (known === inst || sameInstance(known, inst))) return;
      this.byId.set(inst.id, inst);
    }
    this.rebuild();
  }
}

function sameMembers(a: Map<string, ServiceInstance>, b: Map<string, ServiceInstance>): boolean {
  if (a.size !== b.size) return false;
  for (const [id, x] of b) {
    const y = a.get(id);
    if (y === undefined || (y !== x && !sameInstance(x, y))) return false;
  }
  return true;
}

function sameList(a: readonly ServiceInstance[], b: readonly ServiceInstance[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
