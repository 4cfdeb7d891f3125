/**
 * Rules: the binder between a RuleStore and the components of one process. It lists the store, then
 * watches it from that listing's revision, and for every change (all keys of one revision together)
 * recomputes what each bound component concerned runs:
 *
 * - options (`set`): built ⊕ the service's rule ⊕ the instance's rule, given whole to `reconfigure`, so
 *   deleting a rule falls back (the instance rule to the service's, both to the built options, read
 *   with `options()` when the component was bound);
 * - `isolate`: `isolate(reason)` while a rule (the instance's, else the service's) holds it, `reset()`
 *   when the last one is removed;
 * - `reset`: `reset()` once per revision a reset rule is written at (then isolated again if a rule says so);
 * - `weights`: `setWeights(service, service's ⊕ instance's overrides | undefined)`;
 * - `fault`: `setFault(target, service's ⊕ instance's options | undefined)`; a fault rule must live on a
 *   lease (the store ends it), or it is refused.
 *
 * A rule that does not parse, or that the component's `reconfigure` (or `setWeights`, `setFault`)
 * refuses, is reported (stats, snapshot, `bulwark:rules:refused`) and the component keeps its last good
 * settings for that rule's key. When several keys change at one revision and their combination is
 * refused, they are applied one at a time, service scope first, so each one is accepted or refused on
 * its own. After a restart a component runs its built options plus every valid rule.
 *
 * A large change (the first listing of a big store, a resync) is applied a slice at a time: at most
 * `applySliceMs` per event-loop turn (and at least 32 components), then the binder yields. Each component
 * gets all the keys of a revision in one call, and changes are applied in revision order: one arriving
 * meanwhile waits for the slices before it. A document is parsed when a component of its scope first
 * needs it (the rules of other instances are listed, not parsed), once per revision.
 *
 * Components are held weakly: the binder never keeps one alive, a collected one's binding is dropped,
 * and one that answers ClosedError is unbound. Nothing runs on a component's hot path: it is called only
 * when its rules change. Components are recognised by the protocols they implement (`reconfigure` /
 * `options`, `isolate` / `reset`, `setWeights`, `setFault`), never by class.
 */
import { Backoff } from '../core/backoff.js';
import { systemClock, type Clock, type TimerHandle } from '../core/clock.js';
import { rulesAppliedChannel, rulesRefusedChannel } from '../core/diagnostics.js';
import { ClosedError, isBulwarkError, RuleInvalidError, RuleRefusedError } from '../core/errors.js';
import type { Disposer } from '../core/events.js';
import type { MetricsContext, MetricsDescription } from '../core/metrics-description.js';
import type { Isolatable, Reconfigurable } from '../core/reconfigurable.js';
import { clockOption, finite, options as optionsObject, showValue, type OptionKeys } from '../core/validate.js';
import { fieldOf } from './check-rule.js';
import { parseRule } from './parse-rule.js';
import { ruleKinds, scopeOf } from './rule-key.js';
import type { OptionsRuleKind, Rule, RuleBindingStatus, RuleChange, RuleKind, RuleRecord, RuleRefusal, RuleStore, RuleWatch } from './types.js';

/** A ResilientClient as the binder sees it: one service's live options, and its weights and faults. */
interface ServiceOptionsTarget {
  serviceOptions(service: string): object;
  reconfigureService(service: string, partial: object): void;
  setWeights?(service: string, overrides: Record<string, number> | undefined): void;
  setFault?(service: string, fault: Record<string, unknown> | undefined): void;
}

/** The per-service targets made of each client, kept as long as the client is (the binder holds its targets weakly). */
const serviceTargets = new WeakMap<object, Map<string, RuleTarget>>();

/**
 * serviceTarget answers what a `client` binding of `service` drives: a ResilientClient's
 * `serviceOptions(service)` / `reconfigureService(service, …)` as `options()` / `reconfigure(…)`, beside its
 * weights and faults; a component that is reconfigurable itself is bound as it is.
 */
function serviceTarget(component: RuleTarget, service: string): RuleTarget {
  const c = component as Partial<ServiceOptionsTarget> & RuleTarget;
  if (typeof c.reconfigure === 'function' || typeof c.reconfigureService !== 'function' || typeof c.serviceOptions !== 'function') return component;
  let byService = serviceTargets.get(c);
  if (byService === undefined) serviceTargets.set(c, (byService = new Map()));
  let target = byService.get(service);
  if (target === undefined) {
    const client = c as ServiceOptionsTarget;
    target = {
      options: () => client.serviceOptions(service),
      reconfigure: (partial: object) => client.reconfigureService(service, partial),
      ...(typeof client.setWeights === 'function' ? { setWeights: (s: string, w: Record<string, number> | undefined) => client.setWeights!(s, w) } : {}),
      ...(typeof client.setFault === 'function' ? { setFault: (s: unknown, f?: Record<string, unknown>) => client.setFault!(s as string, f) } : {}),
    };
    byService.set(service, target);
  }
  return target;
}

/** BindKind is what a component is bound as: an options kind, or `http-guard` (fault rules only). */
export type BindKind = OptionsRuleKind | 'http-guard';

/** RuleTarget is what the binder may call on a component; each part is used when present. */
export interface RuleTarget extends Partial<Reconfigurable<object>>, Partial<Isolatable> {
  /** Weight overrides of a called service's instances (0 drains); undefined drops them. */
  setWeights?(service: string, overrides: Record<string, number> | undefined): void;
  /**
   * Fault injection: a client's for a called service, `setFault(service, fault)`; an HttpGuard bound as
   * `http-guard` under its route's name takes the fault rules of that name, `setFault(fault)`. undefined ends it.
   */
  setFault?(target: string | Record<string, unknown> | undefined, fault?: Record<string, unknown> | undefined): void;
}

/** RulesOptions configures a Rules binder. */
export interface RulesOptions {
  /** Where the rules are. Required. */
  store: RuleStore;
  /** This process's service (its rules are `<service>/…`). Defaults to none until `identify()`: no rule applies. */
  service?: string;
  /** This process's instance id (its own rules are `<service>@<instance>/…`). Defaults to none: service rules only. */
  instance?: string;
  /** The clock of the retries while the store cannot be listed, and of `applySliceMs`. Defaults to `systemClock`. */
  clock?: Clock;
  /**
   * The longest the binder applies a change in one event-loop turn before it yields (the rest follows in the
   * next turns, in order; at least 32 components are applied per turn). Defaults to 1.
   */
  applySliceMs?: number;
}

/** Defaults for RulesOptions. */
export const rulesDefaults = Object.freeze({ applySliceMs: 1 });

/** The fewest components applied in one turn before the binder yields: a small change applies at once. */
const MIN_PER_TURN = 32;

const RULES_KEYS = { store: true, service: true, instance: true, clock: true, applySliceMs: true } as const satisfies OptionKeys<RulesOptions>;

/** RulesStats are the binder's counters. */
export interface RulesStats {
  /** The newest store revision applied (0 before the first listing). */
  revision: number;
  /** Rules the store holds for this process's scopes. */
  rules: number;
  /** Components bound now. */
  bindings: number;
  /** Changes applied to a component. */
  applied: number;
  /** Refusals reported (each rule revision refused for a component counts once). */
  refusedTotal: number;
  /** Refusals standing now (over every bound component). */
  refused: number;
  /** Listings that replaced the binder's view (the first one, and one per compaction resync). */
  resyncs: number;
  /** Listings the store did not answer (retried). */
  storeErrors: number;
}

/** What one slot of a binding has accepted: the rules it runs, by key. */
type Accepted = Map<string, { rule: Rule; revision: number }>;

/** SlotKind is the part of a component a rule kind sets. */
type SlotKind = 'options' | 'isolate' | 'reset' | 'weights' | 'fault';

/** Binding is one bound component. */
class Binding {
  readonly ref: WeakRef<RuleTarget>;
  /** Accepted rules per slot (`<slot kind>/<name or target>`). */
  readonly slots = new Map<string, Accepted>();
  readonly refused = new Map<string, RuleRefusal>();
  /** Reset rules acted on: key → revision. */
  readonly resets = new Map<string, number>();
  revision = 0;
  isolated: string | undefined;
  released = false;

  constructor(
    readonly kind: BindKind,
    readonly name: string,
    component: RuleTarget,
    readonly built: Record<string, unknown> | undefined,
  ) {
    this.ref = new WeakRef(component);
  }
}

/** Held is a record of the store; its document is parsed when first needed (`parsed`). */
interface Held {
  record: RuleRecord;
  read: boolean;
  rule: Rule | undefined;
  error: RuleInvalidError | undefined;
}

/** Work is one change being applied, binding by binding, a slice per turn. */
interface Work {
  revision: number;
  items: Array<[Binding, string[]]>;
  next: number;
  then: (() => void) | undefined;
}

/** Rules binds components to a RuleStore; see the module comment. */
export class Rules {
  private readonly store: RuleStore;
  private readonly clock: Clock;
  private service: string | undefined;
  private instance: string | undefined;
  /** Every record of the store, as last seen. */
  private readonly held = new Map<string, Held>();
  /** The keys of `held` by the name they are for (`weights` and `fault` keys under ROUTED). */
  private readonly heldByName = new Map<string, Set<string>>();
  /** Bindings by bound name (options, isolate, reset), and those that take weights or faults. */
  private readonly byName = new Map<string, Set<Binding>>();
  private readonly routers = new Set<Binding>();
  private readonly finalizer = new FinalizationRegistry<Binding>((b) => this.release(b));
  private watch: RuleWatch | undefined;
  private started: Promise<void> | undefined;
  private readonly backoff = new Backoff({ initialMs: 100, maxMs: 5_000, jitter: 'full' });
  private retryTimer: TimerHandle | undefined;
  private closed = false;
  private readyResolve!: () => void;
  private readonly readyPromise = new Promise<void>((r) => (this.readyResolve = r));
  private readonly counters = { revision: 0, applied: 0, refusedTotal: 0, resyncs: 0, storeErrors: 0 };
  private readonly applySliceMs: number;
  /** Changes not applied yet, in the order the store gave them; `work` is the one being applied. */
  private readonly queue: Array<{ change: RuleChange; then: (() => void) | undefined }> = [];
  private work: Work | undefined;
  /** The newest revision queued (a change at or below it is already reflected). */
  private queuedRevision = 0;
  private draining = false;
  private drainScheduled = false;

  constructor(options: RulesOptions) {
    const o = optionsObject('Rules', options, RULES_KEYS);
    const s = o.store as Partial<RuleStore> | undefined;
    if (s === null || typeof s !== 'object' || typeof s.list !== 'function' || typeof s.watch !== 'function') {
      throw new TypeError(`Rules: store must be a RuleStore (list, watch, …), got ${showValue(s)}`);
    }
    this.store = s as RuleStore;
    if (o.service !== undefined) this.service = checkPart('service', o.service);
    if (o.instance !== undefined) {
      if (o.service === undefined) throw new TypeError('Rules: instance needs service');
      this.instance = checkPart('instance', o.instance);
    }
    this.clock = clockOption('Rules', o.clock, systemClock);
    this.applySliceMs = finite('Rules', 'applySliceMs', o.applySliceMs ?? rulesDefaults.applySliceMs, 0);
  }

  /**
   * start lists the store and watches it; answers once the first listing is applied. A store that does
   * not answer is asked again (100 ms doubling to 5 s) while components run their built options.
   */
  start(): Promise<void> {
    if (this.closed) return Promise.reject(new ClosedError('Rules is closed'));
    this.started ??= (this.attempt(), this.readyPromise);
    return this.started;
  }

  /** ready answers once the first listing is applied. */
  ready(): Promise<void> {
    return this.readyPromise;
  }

  /**
   * identify sets this process's service and instance (what `announce()` registered: pass its instance,
   * `{ name, id }`); every binding is recomputed for the new scopes.
   */
  identify(instance: { name: string; id?: string | undefined }): void {
    const service = checkPart('service', instance?.name);
    const id = instance.id === undefined ? undefined : checkPart('instance', instance.id);
    if (service === this.service && id === this.instance) return;
    const before = this.scopes();
    this.service = service;
    this.instance = id;
    const keys = [...this.held.keys()].filter((k) => before.includes(scopeOfKey(k)) || this.scopes().includes(scopeOfKey(k)));
    this.recomputeAll(keys, this.counters.revision, true);
  }

  /**
   * bind connects a component to the rules of `kind` and `name`, and applies the ones there are now.
   * Answers the Disposer that unbinds it (the component keeps what it runs).
   */
  bind(kind: BindKind, name: string, component: RuleTarget): Disposer {
    if (this.closed) throw new ClosedError('Rules is closed');
    if (kind === 'client') component = serviceTarget(component, name);
    if (kind !== 'http-guard' && !OPTIONS_KINDS.has(kind))
      throw new TypeError(`Rules.bind: kind must be one of ${[...OPTIONS_KINDS, 'http-guard'].join(', ')}, got ${showValue(kind)}`);
    if (typeof name !== 'string' || name === '') throw new TypeError(`Rules.bind: name must be a non-empty string, got ${showValue(name)}`);
    if (component === null || typeof component !== 'object') throw new TypeError(`Rules.bind: component must be an object, got ${showValue(component)}`);
    const reconfigurable = typeof component.reconfigure === 'function' && typeof component.options === 'function';
    const acts = typeof component.isolate === 'function' || typeof component.setWeights === 'function' || typeof component.setFault === 'function';
    if (!reconfigurable && !acts)
      throw new TypeError(
        `Rules.bind: component must have reconfigure() and options(), isolate() and reset(), setWeights() or setFault(), got ${showValue(component)}`,
      );
    const b = new Binding(kind, name, component, reconfigurable ? { ...component.options!() } : undefined);
    let set = this.byName.get(name);
    if (set === undefined) this.byName.set(name, (set = new Set()));
    set.add(b);
    if (typeof component.setWeights === 'function' || typeof component.setFault === 'function') this.routers.add(b);
    this.finalizer.register(component, b, b);
    // Reset rules written before the component existed are not acted on: it starts closed.
    const scopes = this.scopes();
    const keys: string[] = [];
    for (const index of [this.heldByName.get(name), this.routers.has(b) ? this.heldByName.get(ROUTED) : undefined]) {
      for (const key of index ?? []) {
        if (!scopes.includes(scopeOfKey(key))) continue;
        keys.push(key);
        const h = this.held.get(key)!;
        if (kindOfKey(key) === 'reset') b.resets.set(key, h.record.revision);
      }
    }
    this.recompute(b, keys, this.counters.revision, true);
    return () => this.release(b);
  }

  /**
   * breakerFactory wraps a breaker factory (BreakerGroup's `factory` option, which a ResilientClient's
   * group uses for its `<service>` and `<service>/<instance>` breakers) so that each breaker it makes
   * is bound under its name, getting its rules when it is created.
   */
  breakerFactory<B extends RuleTarget>(kind: 'circuit-breaker' | 'sre-breaker', make: (name: string) => B): (name: string) => B {
    if (typeof make !== 'function') throw new TypeError(`Rules.breakerFactory: make must be a function, got ${showValue(make)}`);
    return (name) => {
      const breaker = make(name);
      if (!this.closed) this.bind(kind, name, breaker);
      return breaker;
    };
  }

  /** status answers what each bound component runs: its rule revision, its rules, its isolation and what it refused. */
  status(): RuleBindingStatus[] {
    const out: RuleBindingStatus[] = [];
    for (const set of this.byName.values()) {
      for (const b of set) {
        const rules: string[] = [];
        for (const accepted of b.slots.values()) rules.push(...accepted.keys());
        out.push({
          kind: b.kind as RuleKind,
          name: b.name,
          revision: b.revision,
          rules: rules.sort(byScope),
          isolated: b.isolated,
          refused: [...b.refused.values()].map((r) => ({ ...r })),
        });
      }
    }
    return out;
  }

  /** stats answers the binder's counters. */
  stats(): RulesStats {
    let bindings = 0;
    let refused = 0;
    for (const set of this.byName.values()) {
      bindings += set.size;
      for (const b of set) refused += b.refused.size;
    }
    const scopes = this.scopes();
    let rules = 0;
    for (const key of this.held.keys()) if (scopes.includes(scopeOfKey(key))) rules++;
    return { ...this.counters, rules, bindings, refused };
  }

  /** describeMetrics: the binder's families, read from stats() at scrape time; its snapshot is `status()`. */
  describeMetrics(_ctx: MetricsContext): MetricsDescription {
    return {
      kind: 'Rules',
      families: [
        { name: 'rules_revision', type: 'gauge', help: 'The newest rule store revision applied.', labelNames: [] },
        { name: 'rules_bindings', type: 'gauge', help: 'Components bound to rules.', labelNames: [] },
        { name: 'rules_refused', type: 'gauge', help: 'Rules refused and standing now, over every bound component.', labelNames: [] },
        { name: 'rules_applied_total', type: 'counter', help: 'Rule changes applied to a component.', labelNames: [] },
        { name: 'rules_refused_total', type: 'counter', help: 'Rule revisions refused for a component.', labelNames: [] },
        {
          name: 'rules_resyncs_total',
          type: 'counter',
          help: 'Listings that replaced the view of the rules (the first, and one per compaction).',
          labelNames: [],
        },
        { name: 'rules_store_errors_total', type: 'counter', help: 'Listings the rule store did not answer.', labelNames: [] },
      ],
      collect: (emit) => {
        const s = this.stats();
        emit('rules_revision', {}, s.revision);
        emit('rules_bindings', {}, s.bindings);
        emit('rules_refused', {}, s.refused);
        emit('rules_applied_total', {}, s.applied);
        emit('rules_refused_total', {}, s.refusedTotal);
        emit('rules_resyncs_total', {}, s.resyncs);
        emit('rules_store_errors_total', {}, s.storeErrors);
      },
      snapshot: () => ({ ...this.stats(), components: this.status() }),
      closed: () => this.closed,
    };
  }

  /** close stops watching (components keep what they run) and drops every binding. Does not close the store. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.clock.clearTimeout(this.retryTimer);
    for (const set of [...this.byName.values()]) for (const b of [...set]) this.release(b);
    const w = this.watch;
    this.watch = undefined;
    await w?.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** attempt lists the store and starts the watch; retried with backoff while the store does not answer. */
  private attempt(): void {
    this.retryTimer = undefined;
    if (this.closed) return;
    this.store.list().then(
      (listing) => {
        if (this.closed) return;
        this.backoff.reset();
        this.onChange({ type: 'resync', revision: listing.revision, records: listing.records }, this.readyResolve);
        this.watch = this.store.watch(listing.revision, (change) => this.onChange(change));
      },
      () => {
        this.counters.storeErrors++;
        if (this.closed) return;
        this.retryTimer = this.clock.setTimeout(() => this.attempt(), this.backoff.next());
        (this.retryTimer as { unref?: () => void }).unref?.();
      },
    );
  }

  /** onChange queues one change of the store (`then` runs once it is applied) and applies what is queued. */
  private onChange(change: RuleChange, then?: () => void): void {
    if (this.closed) return;
    if (change.type === 'changes' && change.revision <= this.queuedRevision) return; // already reflected
    this.queuedRevision = Math.max(this.queuedRevision, change.revision);
    this.queue.push({ change, then });
    this.drain();
  }

  /**
   * drain applies queued changes in order, binding by binding, until the turn's slice is spent (and at
   * least MIN_PER_TURN bindings were applied); then it yields and goes on in the next turn. A change that
   * arrives while one is applied (even from inside a component's `reconfigure`) waits its turn.
   */
  private drain(): void {
    if (this.draining || this.drainScheduled || this.closed) return;
    this.draining = true;
    try {
      const until = this.clock.now() + this.applySliceMs;
      let done = 0;
      for (;;) {
        if (this.closed) return;
        if (this.work === undefined) {
          const next = this.queue.shift();
          if (next === undefined) return;
          this.work = this.take(next.change, next.then);
          // A large change whose view update spent the slice is applied from the next turn.
          if (this.work.items.length > MIN_PER_TURN && this.clock.now() >= until) done = MIN_PER_TURN;
        }
        const w = this.work;
        while (w.next < w.items.length) {
          if (done >= MIN_PER_TURN && this.clock.now() >= until) {
            this.drainScheduled = true;
            setImmediate(() => {
              this.drainScheduled = false;
              this.drain();
            });
            return;
          }
          const [b, keys] = w.items[w.next++]!;
          this.recompute(b, keys, w.revision, false);
          done++;
        }
        this.work = undefined;
        w.then?.();
      }
    } finally {
      this.draining = false;
    }
  }

  /** take updates the view with one change and answers the bindings it concerns, to apply. */
  private take(change: RuleChange, then: (() => void) | undefined): Work {
    const changed: string[] = [];
    if (change.type === 'resync') {
      this.counters.resyncs++;
      if (this.held.size > 0) {
        const listed = new Set<string>();
        for (const r of change.records) listed.add(r.key);
        for (const key of [...this.held.keys()]) {
          if (!listed.has(key)) {
            this.forget(key);
            changed.push(key);
          }
        }
      }
      for (const r of change.records) {
        const old = this.held.get(r.key);
        if (old !== undefined && old.record.revision === r.revision) continue;
        this.keep(r, old);
        changed.push(r.key);
      }
    } else {
      for (const c of change.changes) {
        if (c.value === undefined) {
          if (this.forget(c.key)) changed.push(c.key);
        } else {
          this.keep({ ...c, value: c.value }, this.held.get(c.key));
          changed.push(c.key);
        }
      }
    }
    this.counters.revision = Math.max(this.counters.revision, change.revision);
    return { revision: change.revision, items: [...this.concerned(changed.filter((k) => this.inScope(k)))], next: 0, then };
  }

  /** recomputeAll recomputes at once every binding a changed key concerns. */
  private recomputeAll(keys: string[], revision: number, all: boolean): void {
    for (const [b, its] of this.concerned(keys)) this.recompute(b, its, revision, all);
  }

  /** concerned answers the bindings the keys concern, each with its keys. */
  private concerned(keys: string[]): Map<Binding, string[]> {
    const concerned = new Map<Binding, string[]>();
    const add = (b: Binding, key: string) => {
      const list = concerned.get(b);
      if (list === undefined) concerned.set(b, [key]);
      else list.push(key);
    };
    for (const key of keys) {
      if (indexName(key) === ROUTED) for (const b of this.routers) add(b, key);
      else for (const b of this.byName.get(nameOfKey(key)) ?? []) add(b, key);
    }
    return concerned;
  }

  /**
   * recompute applies the changed keys that concern binding `b`, slot by slot. `fresh` is true when the
   * whole view is applied (a new binding, a new identity): reset rules are then not acted on.
   */
  private recompute(b: Binding, keys: string[], revision: number, fresh: boolean): void {
    const component = b.ref.deref();
    if (component === undefined || b.released) {
      this.release(b);
      return;
    }
    const bySlot = new Map<string, { slot: SlotKind; target: string; keys: string[] }>();
    for (const key of keys) {
      const slot = this.slotOf(b, component, key);
      if (slot === undefined) continue;
      const id = `${slot.slot}/${slot.target}`;
      const entry = bySlot.get(id);
      if (entry === undefined) bySlot.set(id, { ...slot, keys: [key] });
      else entry.keys.push(key);
    }
    for (const [id, { slot, target, keys: slotKeys }] of bySlot) {
      if (b.released) return;
      slotKeys.sort(byScope);
      this.applySlot(b, component, id, slot, target, slotKeys, revision, fresh);
    }
  }

  /** slotOf answers the slot of `b` a key concerns, if any. */
  private slotOf(b: Binding, component: RuleTarget, key: string): { slot: SlotKind; target: string } | undefined {
    const kind = kindOfKey(key);
    const name = nameOfKey(key);
    if (kind === 'weights') return typeof component.setWeights === 'function' ? { slot: 'weights', target: name } : undefined;
    if (kind === 'fault') {
      if (typeof component.setFault !== 'function' || (b.kind === 'http-guard' && name !== b.name)) return undefined;
      return { slot: 'fault', target: name };
    }
    if (name !== b.name) return undefined;
    if (kind === 'isolate' || kind === 'reset')
      return typeof component.isolate === 'function' && typeof component.reset === 'function' ? { slot: kind, target: name } : undefined;
    return kind === b.kind ? { slot: 'options', target: name } : undefined;
  }

  /** applySlot lays the changed keys over what the slot accepted and applies the result; see the module comment. */
  private applySlot(b: Binding, component: RuleTarget, id: string, slot: SlotKind, target: string, keys: string[], revision: number, fresh: boolean): void {
    const accepted: Accepted = b.slots.get(id) ?? new Map();
    const candidate: Accepted = new Map(accepted);
    const applied: string[] = [];
    for (const key of keys) {
      // A key out of this process's scopes now (identify() changed them) is as good as deleted.
      const h = this.inScope(key) ? this.held.get(key) : undefined;
      if (h === undefined) {
        b.refused.delete(key);
        if (candidate.delete(key)) applied.push(key);
        continue;
      }
      parsed(h);
      const error =
        h.error ??
        (slot === 'fault' && h.record.leased !== true
          ? new RuleInvalidError('a fault rule must be written with a life (ttlMs; a lease in etcd), so it ends by itself', { key, field: 'ttlMs' })
          : undefined);
      if (error !== undefined) {
        this.refuse(b, key, h.record.revision, error.field, error.message, RuleInvalidError.code);
        continue;
      }
      candidate.set(key, { rule: h.rule!, revision: h.record.revision });
      applied.push(key);
    }
    if (applied.length === 0) return;
    const run = (c: Accepted) => this.applyTo(b, component, slot, target, c, accepted, fresh);
    try {
      run(candidate);
    } catch (err) {
      if (this.closedBy(b, err)) return;
      if (applied.length === 1) {
        this.refuseFor(b, applied[0]!, candidate, err);
        return;
      }
      // Refused together: one at a time, in scope order, each accepted or refused on its own.
      let step: Accepted = new Map(accepted);
      const ok: string[] = [];
      for (const key of applied) {
        const next = new Map(step);
        const c = candidate.get(key);
        if (c === undefined) next.delete(key);
        else next.set(key, c);
        try {
          this.applyTo(b, component, slot, target, next, step, fresh);
          step = next;
          ok.push(key);
          b.refused.delete(key);
        } catch (e) {
          if (this.closedBy(b, e)) return;
          this.refuseFor(b, key, next, e);
        }
      }
      this.accepted(b, id, step, ok, revision);
      return;
    }
    for (const key of applied) b.refused.delete(key);
    this.accepted(b, id, candidate, applied, revision);
  }

  /** accepted records what a slot now runs. */
  private accepted(b: Binding, id: string, now: Accepted, keys: string[], revision: number): void {
    if (now.size === 0) b.slots.delete(id);
    else b.slots.set(id, now);
    if (keys.length === 0) return;
    b.revision = Math.max(b.revision, revision);
    this.counters.applied++;
    if (rulesAppliedChannel.hasSubscribers) rulesAppliedChannel.publish({ kind: b.kind, name: b.name, revision, keys });
  }

  /** applyTo makes the component run the rules `now` of one slot (it ran `before`); throws what the component throws. */
  private applyTo(b: Binding, component: RuleTarget, slot: SlotKind, target: string, now: Accepted, before: Accepted, fresh: boolean): void {
    const rules = [...now.entries()].sort((x, y) => byScope(x[0], y[0]));
    switch (slot) {
      case 'options': {
        const effective: Record<string, unknown> = { ...b.built };
        for (const [, { rule }] of rules) if ('set' in rule) Object.assign(effective, rule.set);
        if (typeof component.reconfigure !== 'function')
          throw new NotReconfigurable(`Rules: ${b.kind} ${b.name} has no reconfigure(): its options cannot change while it runs`);
        component.reconfigure(effective);
        return;
      }
      case 'isolate': {
        const last = rules.at(-1);
        if (last !== undefined) {
          const reason = last[1].rule.kind === 'isolate' ? (last[1].rule.reason ?? `isolated by rule ${last[0]}`) : `isolated by rule ${last[0]}`;
          component.isolate!(reason);
          b.isolated = reason;
        } else if (before.size > 0) {
          component.reset!();
          b.isolated = undefined;
        }
        return;
      }
      case 'reset': {
        let due = false;
        for (const [key, { revision }] of rules) {
          if ((b.resets.get(key) ?? 0) < revision) {
            b.resets.set(key, revision);
            if (!fresh) due = true;
          }
        }
        for (const key of [...b.resets.keys()]) if (!now.has(key)) b.resets.delete(key);
        if (!due) return;
        component.reset!();
        if (b.isolated !== undefined) component.isolate!(b.isolated); // an operator's isolate outlasts a reset
        return;
      }
      case 'weights': {
        let merged: Record<string, number> | undefined;
        for (const [, { rule }] of rules) if (rule.kind === 'weights') merged = { ...merged, ...rule.weights };
        component.setWeights!(target, merged);
        return;
      }
      case 'fault': {
        let merged: Record<string, unknown> | undefined;
        for (const [, { rule }] of rules) if (rule.kind === 'fault') merged = { ...merged, ...rule.fault };
        if (b.kind === 'http-guard') component.setFault!(merged);
        else component.setFault!(target, merged);
        return;
      }
    }
  }

  /** closedBy unbinds a component that answered ClosedError; tells whether it did. */
  private closedBy(b: Binding, err: unknown): boolean {
    if (!isBulwarkError(err, ClosedError.code)) return false;
    this.release(b);
    return true;
  }

  /** refuseFor reports a rule the component threw on. */
  private refuseFor(b: Binding, key: string, candidate: Accepted, err: unknown): void {
    const message = err instanceof Error ? err.message : String(err);
    const revision = candidate.get(key)?.revision ?? this.held.get(key)?.record.revision ?? this.counters.revision;
    this.refuse(b, key, revision, err instanceof NotReconfigurable ? undefined : fieldOf(message), message, RuleRefusedError.code);
  }

  private refuse(b: Binding, key: string, revision: number, field: string | undefined, message: string, code: string): void {
    const old = b.refused.get(key);
    if (old !== undefined && old.revision === revision && old.message === message) return;
    b.refused.set(key, { key, revision, field, message, code });
    this.counters.refusedTotal++;
    if (rulesRefusedChannel.hasSubscribers) rulesRefusedChannel.publish({ kind: b.kind, name: b.name, key, revision, field, message, code });
  }

  /**
   * keep holds a record (and indexes its key by name), unparsed; a record whose document is the one
   * already held at its key keeps its parse.
   */
  private keep(record: RuleRecord, old: Held | undefined): void {
    const key = record.key;
    const h: Held =
      old !== undefined && old.read && old.record.value === record.value
        ? { record, read: true, rule: old.rule, error: old.error }
        : { record, read: false, rule: undefined, error: undefined };
    if (!this.held.has(key)) {
      const name = indexName(key);
      let set = this.heldByName.get(name);
      if (set === undefined) this.heldByName.set(name, (set = new Set()));
      set.add(key);
    }
    this.held.set(key, h);
  }

  /** forget drops a held record; tells whether there was one. */
  private forget(key: string): boolean {
    if (!this.held.delete(key)) return false;
    const name = indexName(key);
    const set = this.heldByName.get(name);
    set?.delete(key);
    if (set?.size === 0) this.heldByName.delete(name);
    return true;
  }

  /** release drops a binding (its component was unbound, closed or collected). */
  private release(b: Binding): void {
    if (b.released) return;
    b.released = true;
    this.finalizer.unregister(b);
    const set = this.byName.get(b.name);
    if (set !== undefined) {
      set.delete(b);
      if (set.size === 0) this.byName.delete(b.name);
    }
    this.routers.delete(b);
  }

  /** inScope tells whether a key is of this process's scopes (its service's or its instance's). */
  private inScope(key: string): boolean {
    const service = this.service;
    if (service === undefined) return false;
    const n = service.length;
    if (!key.startsWith(service)) return false;
    const c = key.charCodeAt(n);
    if (c === 47 /* / */) return true;
    if (c !== 64 /* @ */ || this.instance === undefined) return false;
    return key.startsWith(this.instance, n + 1) && key.charCodeAt(n + 1 + this.instance.length) === 47;
  }

  /** scopes answers this process's scopes: its service's, then its instance's. */
  private scopes(): string[] {
    if (this.service === undefined) return [];
    return this.instance === undefined ? [this.service] : [this.service, scopeOf(this.service, this.instance)];
  }
}

/** The options kinds: every kind of rule but the actions, weights and faults. */
const OPTIONS_KINDS: ReadonlySet<string> = new Set(ruleKinds.filter((k) => k !== 'isolate' && k !== 'reset' && k !== 'weights' && k !== 'fault'));

/** NotReconfigurable: an options rule for a component without `reconfigure` (refused, naming no field). */
class NotReconfigurable extends TypeError {}

/** parsed parses a held record's document the first time it is needed, keeping the error of a bad one. */
function parsed(h: Held): void {
  if (h.read) return;
  h.read = true;
  try {
    h.rule = parseRule(h.record.value, h.record.key);
  } catch (err) {
    if (!(err instanceof RuleInvalidError)) throw err;
    h.error = err;
  }
}

/** The index entry of every `weights` and `fault` key (their names are called services and routes, not bound names). */
const ROUTED = '\u0000routed';

/** indexName answers the name a key is indexed under: its name, or ROUTED. */
function indexName(key: string): string {
  const kind = kindOfKey(key);
  return kind === 'weights' || kind === 'fault' ? ROUTED : nameOfKey(key);
}

function scopeOfKey(key: string): string {
  const i = key.indexOf('/');
  return i < 0 ? key : key.slice(0, i);
}

function kindOfKey(key: string): string {
  const first = key.indexOf('/');
  const second = first < 0 ? -1 : key.indexOf('/', first + 1);
  return second < 0 ? '' : key.slice(first + 1, second);
}

function nameOfKey(key: string): string {
  const first = key.indexOf('/');
  const second = first < 0 ? -1 : key.indexOf('/', first + 1);
  return second < 0 ? '' : key.slice(second + 1);
}

/** byScope orders a service's rule before an instance's (the instance's is laid over it). */
function byScope(a: string, b: string): number {
  const sa = scopeOfKey(a).includes('@') ? 1 : 0;
  const sb = scopeOfKey(b).includes('@') ? 1 : 0;
  return sa - sb || (a < b ? -1 : a > b ? 1 : 0);
}

function checkPart(what: 'service' | 'instance', value: unknown): string {
  if (typeof value !== 'string' || !/^[^/@\s\x00-\x1f\x7f]{1,253}$/.test(value)) {
    throw new TypeError(`Rules: ${what} must be a non-empty string without '/', '@' or whitespace, got ${showValue(value)}`);
  }
  return value;
}
