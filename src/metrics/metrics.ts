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
 *
 * Each component describes itself (`describeMetrics(ctx)`, core's protocol): this module renders what
 * it is handed and imports no other bulwark module but core's types.
 */
import promClient, { type Registry, type RegistryContentType } from 'prom-client';
import { Family, SeriesObserver, labelKey } from './family.js';
import { ByteText, NOT_ASCII } from './text.js';
import type { TextOut } from '../core/metrics-description.js';
import type {
  BulwarkMetricsOptions,
  Emit,
  ComponentSnapshot,
  HistogramTotals,
  Labels,
  MetricFamilySpec,
  MetricsContext,
  MetricsDescription,
  MetricsSink,
  MetricsSnapshot,
  TrackOptions,
  Trackable,
} from './types.js';

const NAME_RE = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_RE = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const BLANK_LINE = Buffer.from('\n\n');
const NEWLINE = Buffer.from('\n');
const NO_OBSERVER = { observe: (_value: number): void => {} };

/** Entry is one tracked component. */
interface Entry {
  readonly component: object;
  readonly name: string;
  readonly kind: string;
  readonly desc: MetricsDescription;
  readonly families: Family[];
  dispose: (() => void) | undefined;
  /** live is true until the component is untracked (its sink then counts nothing). */
  live: boolean;
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
  /** A scrape of the text path is under way (it owns the families' kept buffers). */
  private rendering = false;
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
   * track starts exporting `component`: any object with `describeMetrics(ctx)` — every bulwark
   * component (breakers, BreakerGroup, limiters, AdaptiveShedder, RegistryCache, EtcdRegistry, Balancer,
   * ResilientClient, Retry, RetryBudget, Bulkhead, Timeout, Fallback, HttpGuard, cache Group and
   * HttpPool, the gRPC guards), its subclasses, or an application's own part. Tracking the same
   * component again is a no-op. Answers the `name` label used. Throws TypeError for anything else, and
   * for a family that clashes with one already registered.
   */
  track(component: object, options?: TrackOptions): string {
    if (this.closed) throw new TypeError('BulwarkMetrics.track: the metrics were closed');
    const known = this.entries.get(component);
    if (known !== undefined) return known.name;
    if (component === null || typeof component !== 'object' || typeof (component as Partial<Trackable>).describeMetrics !== 'function') {
      const what = component === null || typeof component !== 'object' ? String(component) : (component.constructor?.name ?? 'object');
      throw new TypeError(`BulwarkMetrics.track: cannot track ${what}: not a bulwark component and no describeMetrics()`);
    }
    let trackName = '';
    const ctx: MetricsContext = { instanceLabel: this.instanceLabel, name: () => trackName };
    const d = (component as Trackable).describeMetrics(ctx);
    const kind = d.kind ?? component.constructor?.name ?? 'component';
    const name = this.nameFor(component, kind, options?.name);
    trackName = name;
    const families = d.families.map((spec) => this.family(spec));
    const entry: Entry = { component, name, kind, desc: d, families, dispose: undefined, live: true };
    this.entries.set(component, entry);
    if (d.subscribe !== undefined) {
      try {
        entry.dispose = d.subscribe(this.sink(entry));
      } catch (err) {
        this.entries.delete(component);
        entry.live = false;
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
    e.live = false;
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
   * histograms answers, per tracked component and histogram family, the observations counted so far
   * summed over the family's other labels: the bucket bounds (seconds), the per-bucket counts (not
   * cumulative; observations above the last bound are only in `count`), the count and the sum. It is
   * what a dashboard takes percentiles from (bulwark/dashboard takes the difference of two readings).
   */
  histograms(): HistogramTotals[] {
    const out: HistogramTotals[] = [];
    for (const f of this.families.values()) {
      if (f.type !== 'histogram') continue;
      for (const [owner, series] of f.events) {
        const e = owner as Entry;
        if (!e.live) continue;
        const counts = new Array<number>(f.buckets.length).fill(0);
        let count = 0;
        let sum = 0;
        for (const s of series.values()) {
          for (let i = 0; i < counts.length; i++) counts[i]! += s.counts![i]!;
          count += s.value;
          sum += s.sum!;
        }
        out.push({ name: e.name, family: f.spec.name, bounds: f.buckets, counts, count, sum });
      }
    }
    return out;
  }

  /**
   * metrics answers the registry's text exposition (what a `/metrics` handler serves): bulwark's
   * families rendered by bulwark (prom-client's generic formatter takes ~3 µs a series, too slow for
   * 10 000 breakers), the registry's other metrics by prom-client, in registration order and in
   * prom-client's layout. A registry in OpenMetrics mode or with default labels is formatted by
   * prom-client entirely. (`registry.metrics()` answers the same series, only slower.)
   */
  async metrics(): Promise<string> {
    const r = await this.render();
    return typeof r === 'string' ? r : r.text.toString(r.utf8 ? 'utf8' : 'latin1');
  }

  /** metricsBuffer answers what `metrics()` does as UTF-8 bytes, with no string made: the handlers send it. */
  async metricsBuffer(): Promise<Buffer> {
    const r = await this.render();
    return typeof r === 'string' ? Buffer.from(r, 'utf8') : r.text;
  }

  /** render answers the exposition as bytes (and whether they hold non-ASCII), or prom-client's string. */
  private async render(): Promise<string | { text: Buffer; utf8: boolean }> {
    const reg = this.registry as Registry<RegistryContentType> & { _defaultLabels?: object };
    if (reg.contentType !== promClient.Registry.PROMETHEUS_CONTENT_TYPE || Object.keys(reg._defaultLabels ?? {}).length > 0) return reg.metrics();
    // Ours are rendered at once, before awaiting anything: a concurrent scrape cannot interleave. The
    // families' buffers are kept from scrape to scrape (a scrape of a large group would otherwise
    // allocate its size again each time; they hold about one exposition's bytes); a scrape that starts
    // while another is under way writes into buffers of its own.
    const reuse = !this.rendering;
    this.rendering = true;
    try {
      const bytes = new ByteText();
      const ours = this.collectText(bytes, reuse);
      let utf8 = false;
      const parts: Buffer[] = [];
      for (const metric of reg.getMetricsAsArray()) {
        if (parts.length > 0) parts.push(BLANK_LINE);
        let b = ours.get(metric);
        if (b === undefined) {
          const other = await reg.getSingleMetricAsString((metric as { name: string }).name);
          utf8 ||= NOT_ASCII.test(other);
          b = Buffer.from(other, 'utf8');
        }
        parts.push(b);
      }
      parts.push(NEWLINE);
      return { text: Buffer.concat(parts), utf8: utf8 || bytes.utf8 };
    } finally {
      if (reuse) this.rendering = false;
    }
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

  /** collectText runs every collector for the text path and answers each family's text. */
  private collectText(bytes: ByteText, reuse: boolean): Map<object, Buffer> {
    const families = this.families;
    for (const f of families.values()) f.begin(bytes, reuse);
    const text: TextOut = { label: (v) => bytes.label(v), section: (family) => families.get(family) };
    for (const e of [...this.entries.values()]) {
      if (e.desc.collect === undefined || this.isClosed(e)) continue;
      const own = `name="${bytes.label(e.name)}"`;
      const emit: Emit = (family: string, labels: Labels, value: number): void => {
        const f = families.get(family);
        if (f === undefined || !Number.isFinite(value)) return;
        f.sample(bytes, f.name, labels.name === undefined ? own : '', labels, value);
      };
      emit.text = text;
      try {
        e.desc.collect(emit);
      } catch {
        // As in collectAll: left out of this scrape.
      }
    }
    const out = new Map<object, Buffer>();
    for (const f of families.values()) out.set(f, f.end(bytes, reuse));
    return out;
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
      if (f === undefined || !e.live) return undefined;
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
        if (x === undefined || x.f.type !== 'histogram') return NO_OBSERVER;
        return new SeriesObserver(e, x.f.bounds, x.s);
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
