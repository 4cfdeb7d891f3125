/**
 * BulwarkMetrics exports the state of bulwark's components to Prometheus through prom-client, and
 * answers one JSON status snapshot of them.
 *
 * Pull, not push: `track(component)` registers the component's metric families (once per family, in the
 * given Registry) and, for the few numbers that only exist as events (breaker transitions, client attempt
 * durations, retries, fallbacks), subscribes to the component's own events. Everything else is read from
 * `stats()` inside the families' collect at scrape time, once per component per scrape. No timer is set;
 * a component that is not tracked costs nothing, and a tracked one costs nothing between scrapes but
 * its event listeners. A component found closed at a scrape is untracked then and reported no more.
 */
import promClient, { type Registry, type RegistryContentType } from 'prom-client';
import { describeComponent } from './adapters.js';
import { Family, labelKey, labelValue, valueText } from './family.js';
import type {
  BulwarkMetricsOptions,
  Emit,
  ComponentSnapshot,
  Labels,
  MetricFamilySpec,
  MetricsDescription,
  MetricsSink,
  MetricsSnapshot,
  TrackOptions,
} from './types.js';

const NAME_RE = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_RE = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** Entry is one tracked component. */
interface Entry {
  readonly component: object;
  readonly name: string;
  readonly kind: string;
  readonly desc: MetricsDescription;
  readonly families: Family[];
  dispose: (() => void) | undefined;
}

/** BulwarkMetrics: see the module comment. */
export class BulwarkMetrics {
  /** registry is the prom-client Registry the families are registered in. */
  readonly registry: Registry<RegistryContentType>;
  /** prefix starts every family name. */
  readonly prefix: string;
  /** instanceLabel names the label of per-instance series, or is undefined when they are off. */
  readonly instanceLabel: string | undefined;
  private readonly entries = new Map<object, Entry>();
  private readonly families = new Map<string, Family>();
  private readonly names = new Map<string, number>();
  private collected = false;
  private closed = false;

  constructor(options?: BulwarkMetricsOptions) {
    if (options !== undefined && (options === null || typeof options !== 'object')) {
      throw new TypeError(`BulwarkMetrics: options must be an object, got ${String(options)}`);
    }
    const o = options ?? {};
    const reg = o.registry ?? promClient.register;
    if (reg === null || typeof reg !== 'object' || typeof (reg as Registry<RegistryContentType>).registerMetric !== 'function') {
      throw new TypeError('BulwarkMetrics: registry must be a prom-client Registry');
    }
    this.registry = reg;
    const prefix = o.prefix ?? 'bulwark_';
    if (typeof prefix !== 'string' || (prefix !== '' && !NAME_RE.test(prefix))) {
      throw new TypeError(`BulwarkMetrics: prefix must be a valid metric name prefix, got ${JSON.stringify(prefix)}`);
    }
    this.prefix = prefix;
    if (o.instanceLabel !== undefined && (typeof o.instanceLabel !== 'string' || !LABEL_RE.test(o.instanceLabel) || o.instanceLabel === 'name')) {
      throw new TypeError(`BulwarkMetrics: instanceLabel must be a label name other than "name", got ${JSON.stringify(o.instanceLabel)}`);
    }
    this.instanceLabel = o.instanceLabel;
  }

  /**
   * track starts exporting `component`: any bulwark component (breakers, BreakerGroup, limiters,
   * AdaptiveShedder, RegistryCache, EtcdRegistry, Balancer, ResilientClient, Retry, RetryBudget,
   * Bulkhead, Timeout, Fallback, HttpGuard, cache Group and HttpPool) or any object with
   * `describeMetrics()`. Tracking the same component again is a no-op. Answers the `name` label used.
   * Throws TypeError for anything else, and for a family that clashes with one already registered.
   */
  track(component: object, options?: TrackOptions): string {
    if (this.closed) throw new TypeError('BulwarkMetrics.track: the metrics were closed');
    const known = this.entries.get(component);
    if (known !== undefined) return known.name;
    let trackName = '';
    const d = describeComponent(component, this.instanceLabel, () => trackName);
    if (d === undefined) {
      const what = component === null || typeof component !== 'object' ? String(component) : (component.constructor?.name ?? 'object');
      throw new TypeError(`BulwarkMetrics.track: cannot track ${what}: not a bulwark component and no describeMetrics()`);
    }
    const kind = d.kind ?? component.constructor?.name ?? 'component';
    const name = this.nameFor(component, kind, options?.name);
    trackName = name;
    const families = d.families.map((spec) => this.family(spec));
    const entry: Entry = { component, name, kind, desc: d, families, dispose: undefined };
    this.entries.set(component, entry);
    if (d.subscribe !== undefined) {
      try {
        entry.dispose = d.subscribe(this.sink(entry));
      } catch (err) {
        this.entries.delete(component);
        throw err;
      }
    }
    return name;
  }

  /** untrack stops exporting `component` and removes its series. Answers whether it was tracked. */
  untrack(component: object): boolean {
    const e = this.entries.get(component);
    if (e === undefined) return false;
    this.entries.delete(component);
    e.dispose?.();
    e.dispose = undefined;
    for (const f of e.families) f.events.delete(e);
    return true;
  }

  /** tracked lists the names of the tracked components. */
  tracked(): string[] {
    return [...this.entries.values()].map((e) => e.name);
  }

  /**
   * snapshot answers a JSON-ready status of every tracked component: breaker states and rates, limiter
   * modes, registry cache entries and staleness, balancer instances with health and EWMA, cache hit
   * ratios and ring members. Closed components are left out (and untracked).
   */
  snapshot(): MetricsSnapshot {
    const components: ComponentSnapshot[] = [];
    for (const e of [...this.entries.values()]) {
      if (this.isClosed(e)) continue;
      let status: unknown;
      try {
        status = e.desc.snapshot !== undefined ? e.desc.snapshot() : statsOf(e.component);
      } catch (err) {
        status = { error: err instanceof Error ? err.message : String(err) };
      }
      components.push({ name: e.name, kind: e.kind, status });
    }
    return { at: new Date().toISOString(), components };
  }

  /**
   * metrics answers the registry's text exposition (what a `/metrics` handler serves): bulwark's
   * families formatted directly (prom-client's generic formatter costs several µs a line, too slow for
   * 10 000 breakers), the registry's other metrics by prom-client, in registration order. A registry in
   * OpenMetrics mode or with default labels is formatted by prom-client entirely.
   */
  async metrics(): Promise<string> {
    const reg = this.registry as Registry<RegistryContentType> & { _defaultLabels?: object };
    if (reg.contentType !== promClient.Registry.PROMETHEUS_CONTENT_TYPE || Object.keys(reg._defaultLabels ?? {}).length > 0) return reg.metrics();
    const ours = new Set<object>(this.families.values());
    this.collectText();
    const parts: string[] = [];
    for (const metric of reg.getMetricsAsArray()) {
      if (ours.has(metric)) parts.push((metric as unknown as Family).text());
      else parts.push(await reg.getSingleMetricAsString((metric as { name: string }).name));
    }
    return `${parts.join('\n\n')}\n`;
  }

  /** contentType is the registry's content type. */
  get contentType(): string {
    return this.registry.contentType;
  }

  /** close untracks everything and removes the families from the registry. Idempotent. */
  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      for (const c of [...this.entries.keys()]) this.untrack(c);
      for (const f of this.families.values()) this.registry.removeSingleMetric(f.name);
      this.families.clear();
    }
    return Promise.resolve();
  }

  /** Symbol.asyncDispose closes the metrics (`await using m = new BulwarkMetrics()`). */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** collectAll runs every collector once per scrape (the families' get() calls share one pass). */
  private collectAll(): void {
    if (this.collected) return;
    this.collected = true;
    queueMicrotask(() => {
      this.collected = false;
    });
    for (const f of this.families.values()) f.buffer = [];
    for (const e of [...this.entries.values()]) {
      if (e.desc.collect === undefined || this.isClosed(e)) continue;
      const emit = (family: string, labels: Labels, value: number): void => {
        const f = this.families.get(family);
        if (f === undefined || !Number.isFinite(value)) return;
        f.buffer.push({ labels: { name: e.name, ...labels }, value });
      };
      try {
        e.desc.collect(emit);
      } catch {
        // A component that fails to report is left out of this scrape; the scrape itself never fails.
      }
    }
  }

  /** collectText runs every collector for the text path: each sample becomes a line at once. */
  private collectText(): void {
    for (const e of [...this.entries.values()]) {
      if (e.desc.collect === undefined || this.isClosed(e)) continue;
      const own = `name="${labelValue(e.name)}"`;
      const emit: Emit = (family: string, labels: Labels, value: number): void => {
        const f = this.families.get(family);
        if (f === undefined || !Number.isFinite(value)) return;
        let l = labels.name === undefined ? own : '';
        for (const k in labels) l += `${l === '' ? '' : ','}${k}="${labelValue(labels[k]!)}"`;
        f.lines.push(`${f.name}{${l}} ${valueText(value)}`);
      };
      emit.line = (family: string, labelText: string, value: number): void => {
        const f = this.families.get(family);
        if (f !== undefined && Number.isFinite(value)) f.lines.push(`${f.name}{${labelText}} ${valueText(value)}`);
      };
      try {
        e.desc.collect(emit);
      } catch {
        // As in collectAll: left out of this scrape.
      }
    }
  }

  private isClosed(e: Entry): boolean {
    let closed: boolean;
    try {
      closed = e.desc.closed?.() === true;
    } catch {
      closed = true;
    }
    if (closed) this.untrack(e.component);
    return closed;
  }

  private sink(e: Entry): MetricsSink {
    const seriesOf = (family: string, labels: Labels) => {
      const f = this.families.get(family);
      if (f === undefined || this.entries.get(e.component) !== e) return undefined;
      return { f, s: f.series(e, { name: e.name, ...labels }) };
    };
    return {
      inc: (family, labels, by = 1) => {
        const x = seriesOf(family, labels);
        if (x !== undefined && x.f.type === 'counter' && by >= 0) x.s.value += by;
      },
      observe: (family, labels, value) => {
        const x = seriesOf(family, labels);
        if (x !== undefined && x.f.type === 'histogram' && Number.isFinite(value)) x.f.observe(x.s, value);
      },
      observer: (family, labels) => {
        const x = seriesOf(family, labels);
        if (x === undefined || x.f.type !== 'histogram') return () => {};
        const { f, s } = x;
        return (value) => {
          if (this.entries.get(e.component) === e && Number.isFinite(value)) f.observe(s, value);
        };
      },
    };
  }

  /** family answers the registered family for `spec`, registering it on first use. */
  private family(spec: MetricFamilySpec): Family {
    const have = this.families.get(spec.name);
    if (have !== undefined) {
      const s = have.spec;
      if (s.type !== spec.type || labelKey(Object.fromEntries(s.labelNames.map((l) => [l, 1]))) !== labelKey(Object.fromEntries(spec.labelNames.map((l) => [l, 1])))) {
        throw new TypeError(`BulwarkMetrics: family ${spec.name} is already a ${s.type} with labels [${s.labelNames.join(', ')}]`);
      }
      return have;
    }
    if (!NAME_RE.test(this.prefix + spec.name)) throw new TypeError(`BulwarkMetrics: bad family name ${JSON.stringify(spec.name)}`);
    if (!['counter', 'gauge', 'histogram'].includes(spec.type)) throw new TypeError(`BulwarkMetrics: family ${spec.name}: bad type ${String(spec.type)}`);
    for (const l of spec.labelNames) {
      if (!LABEL_RE.test(l) || l === 'name' || l === 'le') throw new TypeError(`BulwarkMetrics: family ${spec.name}: bad label name ${JSON.stringify(l)}`);
    }
    const f = new Family(this.prefix, spec, () => this.collectAll(), () => this.registry.contentType);
    this.registry.registerMetric(f as never);
    this.families.set(spec.name, f);
    return f;
  }

  private nameFor(component: object, kind: string, given: string | undefined): string {
    if (given !== undefined) {
      if (typeof given !== 'string' || given.length === 0) throw new TypeError(`BulwarkMetrics.track: name must be a non-empty string, got ${JSON.stringify(given)}`);
      return given;
    }
    const own = (component as { name?: unknown }).name;
    if (typeof own === 'string' && own.length > 0) return own;
    const service = (component as { service?: unknown }).service;
    if (typeof service === 'string' && service.length > 0) return service;
    const n = (this.names.get(kind) ?? 0) + 1;
    this.names.set(kind, n);
    return `${kind}-${n}`;
  }
}

function statsOf(c: object): unknown {
  const s = (c as { stats?: () => unknown }).stats;
  return typeof s === 'function' ? s.call(c) : {};
}
