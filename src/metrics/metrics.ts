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
import { BUCKETS, COUNT, Family, SUM, SeriesObserver, SeriesPairObserver, labelKey } from './family.js';
import { ByteText, NOT_ASCII, type TextBuffer } from './text.js';
import { observerPair, type TextOut } from '../core/metrics-description.js';
import type {
  BulwarkMetricsOptions,
  Emit,
  ComponentSnapshot,
  HistogramObserver,
  HistogramTotals,
  Labels,
  MetricFamilySpec,
  MetricsContext,
  MetricsDescription,
  MetricsPart,
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

/** sameBounds tells whether two histograms have the same bucket bounds. */
const sameBounds = (a: Float64Array, b: Float64Array): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * EXPOSITION_PARTS keys the method the handlers take a scrape from (`[EXPOSITION_PARTS]()`: its
 * ExpositionParts). @internal
 */
export const EXPOSITION_PARTS: unique symbol = Symbol('bulwark.metrics.exposition-parts');

/**
 * ExpositionParts is one scrape's exposition as the buffers it was rendered in, in order (their bytes
 * are what `metricsBuffer()` answers): what the handlers write to a response one by one, so that no
 * copy of the whole (~5.5 MB for 10 000 breakers, fresh memory each scrape) is made. Most parts are
 * views of the families' kept buffers, which later scrapes write again: they are held until `release()`
 * (the handlers call it once the response has finished or closed), and a scrape that starts meanwhile
 * writes those families into new buffers instead. @internal
 */
export interface ExpositionParts {
  readonly parts: readonly Buffer[];
  /** length is the sum of the parts' lengths. */
  readonly length: number;
  /** release hands the parts' buffers back to the families. Idempotent. */
  release(): void;
}

/** Rendered is a scrape rendered by bulwark (see BulwarkMetrics.render). */
interface Rendered {
  readonly parts: Buffer[];
  readonly length: number;
  /** Whether the parts hold non-ASCII bytes. */
  readonly utf8: boolean;
  /** The families' buffers the parts are views of, held until released (see releaseOf). */
  readonly held: TextBuffer[];
}

/** Entry is one tracked component, or one part of a tracked composite (see MetricsDescription.parts). */
interface Entry {
  readonly component: object;
  readonly name: string;
  /** The labels every series of the component starts with: its name, and a part's group. */
  readonly base: Labels;
  readonly kind: string;
  readonly desc: MetricsDescription;
  readonly families: Family[];
  dispose: (() => void) | undefined;
  /** live is true until the component is untracked (its sink then counts nothing). */
  live: boolean;
  /** A composite's parts described so far, by component (undefined when it has none). */
  parts: Map<object, Entry> | undefined;
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
  /** Parts that could not be described (see describePart). */
  private readonly undescribable = new WeakSet<object>();
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
    const entry: Entry = { component, name, base: { name }, kind, desc: d, families, dispose: undefined, live: true, parts: undefined };
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
    // Its parts now, so that their families are registered before the first scrape.
    if (d.parts !== undefined) this.partsOf(entry, new Set());
    return name;
  }

  /** untrack stops exporting `component` and removes its series. Answers whether it was tracked. */
  untrack(component: object): boolean {
    const e = this.entries.get(component);
    if (e === undefined) return false;
    this.entries.delete(component);
    this.drop(e);
    return true;
  }

  /** drop ends an entry: its events are no longer counted, its event series and its parts' go. */
  private drop(e: Entry): void {
    e.live = false;
    e.dispose?.();
    e.dispose = undefined;
    for (const f of e.families) f.events.delete(e);
    if (e.parts !== undefined) for (const p of e.parts.values()) this.drop(p);
    e.parts = undefined;
  }

  /**
   * partsOf answers the parts of `owner` this scrape exports (see MetricsDescription.parts), describing
   * those that are new and dropping those no longer answered: not one tracked on its own, nor one in
   * `seen` (exported through an earlier owner this scrape), which it adds to.
   */
  private partsOf(owner: Entry, seen: Set<object>): Entry[] {
    const had = owner.parts;
    const now = new Map<object, Entry>();
    const out: Entry[] = [];
    try {
      for (const p of owner.desc.parts!()) {
        const c = p.component;
        if (c === null || typeof c !== 'object' || this.entries.has(c) || seen.has(c) || now.has(c)) continue;
        let e = had?.get(c);
        if (e !== undefined && (e.name !== p.name || e.base.group !== p.group)) e = undefined; // renamed: described again
        e ??= this.describePart(p);
        if (e === undefined) continue;
        now.set(c, e);
        seen.add(c);
        if (!this.partClosed(e)) out.push(e);
      }
    } catch {
      // A composite that fails to answer its parts exports its own series only this scrape.
    }
    if (had !== undefined) for (const [c, e] of had) if (now.get(c) !== e) this.drop(e);
    owner.parts = now;
    return out;
  }

  /** describePart answers a new part's entry, or undefined for one that cannot be described (remembered). */
  private describePart(p: MetricsPart): Entry | undefined {
    const c = p.component;
    if (this.undescribable.has(c) || typeof (c as Partial<Trackable>).describeMetrics !== 'function') return undefined;
    const name = p.name;
    const base: Labels = p.group === undefined ? { name } : { name, group: p.group };
    try {
      const d = (c as Trackable).describeMetrics({ instanceLabel: this.instanceLabel, name: () => name });
      const families = d.families.map((spec) => this.family(spec));
      const e: Entry = {
        component: c,
        name,
        base,
        kind: d.kind ?? c.constructor?.name ?? 'component',
        desc: d,
        families,
        dispose: undefined,
        live: true,
        parts: undefined,
      };
      if (d.subscribe !== undefined) e.dispose = d.subscribe(this.sink(e));
      return e;
    } catch {
      // Its families clash with registered ones, or it failed to describe itself: left out, not asked again.
      this.undescribable.add(c);
      return undefined;
    }
  }

  /** partClosed tells whether a part was closed (it is then left out of the scrape). */
  private partClosed(e: Entry): boolean {
    try {
      return e.desc.closed?.() === true;
    } catch {
      return true;
    }
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
    const flush = (e: Entry): void => {
      this.flushOf(e);
      if (e.parts !== undefined) for (const p of e.parts.values()) flush(p);
    };
    for (const e of this.entries.values()) flush(e);
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
          const h = s.hist!;
          for (let i = 0; i < counts.length; i++) counts[i]! += h[BUCKETS + i]!;
          count += h[COUNT]!;
          sum += h[SUM]!;
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
    if (typeof r === 'string') return r;
    try {
      return Buffer.concat(r.parts, r.length).toString(r.utf8 ? 'utf8' : 'latin1');
    } finally {
      releaseOf(r.held)();
    }
  }

  /**
   * metricsBuffer answers what `metrics()` does as UTF-8 bytes, with no string made. (The handlers send
   * the same bytes without joining them into one buffer.)
   */
  async metricsBuffer(): Promise<Buffer> {
    const r = await this.render();
    if (typeof r === 'string') return Buffer.from(r, 'utf8');
    try {
      return Buffer.concat(r.parts, r.length);
    } finally {
      releaseOf(r.held)();
    }
  }

  /** @internal see EXPOSITION_PARTS */
  async [EXPOSITION_PARTS](): Promise<ExpositionParts> {
    const r = await this.render();
    if (typeof r === 'string') {
      const b = Buffer.from(r, 'utf8');
      return { parts: [b], length: b.length, release: () => {} };
    }
    return { parts: r.parts, length: r.length, release: releaseOf(r.held) };
  }

  /**
   * render answers the exposition as the bytes of its parts, whose families' buffers are held until
   * released (see ExpositionParts), or prom-client's string.
   */
  private async render(): Promise<string | Rendered> {
    const reg = this.registry as Registry<RegistryContentType> & { _defaultLabels?: object };
    if (reg.contentType !== promClient.Registry.PROMETHEUS_CONTENT_TYPE || Object.keys(reg._defaultLabels ?? {}).length > 0) return reg.metrics();
    // Ours are rendered at once, before awaiting anything: a concurrent scrape cannot interleave. The
    // families' buffers of the last two scrapes are kept: one is written again (a scrape of a large group
    // would otherwise allocate its size each time), the other is where unchanged lines are copied from.
    // A buffer an answer still holds is not written again: the family takes a new one.
    const held: TextBuffer[] = [];
    try {
      const bytes = new ByteText();
      const ours = this.collectText(bytes, held);
      let utf8 = false;
      let length = NEWLINE.length;
      const parts: Buffer[] = [];
      for (const metric of reg.getMetricsAsArray()) {
        if (parts.length > 0) {
          parts.push(BLANK_LINE);
          length += BLANK_LINE.length;
        }
        let b = ours.get(metric);
        if (b === undefined) {
          const other = await reg.getSingleMetricAsString((metric as { name: string }).name);
          utf8 ||= NOT_ASCII.test(other);
          b = Buffer.from(other, 'utf8');
        }
        parts.push(b);
        length += b.length;
      }
      parts.push(NEWLINE);
      return { parts, length, utf8: utf8 || bytes.utf8, held };
    } catch (err) {
      releaseOf(held)();
      throw err;
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
    for (const e of this.collecting()) {
      this.flushOf(e);
      if (e.desc.collect === undefined) continue;
      const base = e.base;
      const emit = (family: string, labels: Labels, value: number): void => {
        const f = this.families.get(family);
        if (f === undefined || !Number.isFinite(value)) return;
        f.buffer.push({ labels: { ...base, ...labels }, value });
      };
      try {
        e.desc.collect(emit);
      } catch {
        // A component that fails to report is left out of this scrape; the scrape itself never fails.
      }
    }
  }

  /**
   * collecting answers the entries a scrape collects, in order: each tracked component not found
   * closed, each followed by its parts (and theirs).
   */
  private collecting(): Entry[] {
    const out: Entry[] = [];
    let seen: Set<object> | undefined;
    for (const e of [...this.entries.values()]) {
      if (this.isClosed(e)) continue;
      out.push(e);
      if (e.desc.parts !== undefined) this.withParts(e, (seen ??= new Set()), out);
    }
    return out;
  }

  private withParts(owner: Entry, seen: Set<object>, out: Entry[]): void {
    for (const p of this.partsOf(owner, seen)) {
      out.push(p);
      if (p.desc.parts !== undefined) this.withParts(p, seen, out);
    }
  }

  /**
   * collectText runs every collector for the text path and answers each family's text; the buffers
   * it was written in are added to `held`.
   */
  private collectText(bytes: ByteText, held: TextBuffer[]): Map<object, Buffer> {
    const families = this.families;
    const entries = this.collecting(); // first: a part seen for the first time registers its families
    for (const f of families.values()) f.begin(bytes);
    const text: TextOut = { label: (v) => bytes.label(v), section: (family) => families.get(family) };
    // One emit for the scrape (collectors run one at a time), for the entry `at`; its labels' text
    // (`own`) is made when a sample needs it: a breaker writes its lines itself and needs none.
    let at = entries[0]!;
    let own: string | undefined;
    const emit: Emit = (family: string, labels: Labels, value: number): void => {
      const f = families.get(family);
      if (f === undefined || !Number.isFinite(value)) return;
      if (labels.name !== undefined) f.sample(bytes, f.name, '', labels, value);
      else f.sample(bytes, f.name, (own ??= ownText(at, bytes)), labels, value);
    };
    emit.text = text;
    for (const e of entries) {
      this.flushOf(e);
      if (e.desc.collect === undefined) continue;
      at = e;
      own = undefined;
      try {
        e.desc.collect(emit);
      } catch {
        // As in collectAll: left out of this scrape.
      }
    }
    const out = new Map<object, Buffer>();
    for (const f of families.values()) out.set(f, f.end(bytes, held));
    return out;
  }

  /** flushOf has a live entry hand over the events it holds back (MetricsDescription.flush) before its series are read. */
  private flushOf(e: Entry): void {
    if (!e.live || e.desc.flush === undefined) return;
    try {
      e.desc.flush();
    } catch {
      // As a collector that fails: what it held back is not counted in this reading.
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
      if (f === undefined || !e.live) return undefined;
      return { f, s: f.series(e, { ...e.base, ...labels }) };
    };
    const observer = (family: string, labels: Labels): HistogramObserver => {
      const x = seriesOf(family, labels);
      if (x === undefined || x.f.type !== 'histogram') return NO_OBSERVER;
      return new SeriesObserver(e, x.f.bounds, x.s.hist!);
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
      observer,
      pairObserver: (a, b) => {
        const fa = this.families.get(a.family);
        const fb = this.families.get(b.family);
        const la = { ...e.base, ...a.labels };
        const lb = { ...e.base, ...b.labels };
        // One buffer for both series, made with them: for two histograms of the same bounds, two series
        // not made yet (one made before keeps its own counts), and not twice the same series.
        const paired =
          e.live &&
          fa?.type === 'histogram' &&
          fb?.type === 'histogram' &&
          sameBounds(fa.bounds, fb.bounds) &&
          !fa.has(e, la) &&
          !fb.has(e, lb) &&
          !(fa === fb && labelKey(la) === labelKey(lb));
        if (paired) {
          const p = new SeriesPairObserver(e, fa.bounds);
          fa.series(e, la, p.histA);
          fb.series(e, lb, p.histB);
          return p;
        }
        return observerPair(observer(a.family, a.labels), observer(b.family, b.labels));
      },
    };
  }

  /** family answers the registered family for `spec`, registering it on first use. */
  private family(spec: MetricFamilySpec): Family {
    const have = this.families.get(spec.name);
    if (have !== undefined) {
      const s = have.spec;
      if (
        s.type !== spec.type ||
        labelKey(Object.fromEntries(s.labelNames.map((l) => [l, 1]))) !== labelKey(Object.fromEntries(spec.labelNames.map((l) => [l, 1])))
      ) {
        throw new TypeError(`BulwarkMetrics: family ${spec.name} is already a ${s.type} with labels [${s.labelNames.join(', ')}]`);
      }
      return have;
    }
    if (!NAME_RE.test(this.prefix + spec.name)) throw new TypeError(`BulwarkMetrics: bad family name ${JSON.stringify(spec.name)}`);
    if (!['counter', 'gauge', 'histogram'].includes(spec.type)) throw new TypeError(`BulwarkMetrics: family ${spec.name}: bad type ${String(spec.type)}`);
    for (const l of spec.labelNames) {
      if (!LABEL_RE.test(l) || l === 'name' || l === 'le') throw new TypeError(`BulwarkMetrics: family ${spec.name}: bad label name ${JSON.stringify(l)}`);
    }
    const f = new Family(
      this.prefix,
      spec,
      () => this.collectAll(),
      () => this.registry.contentType,
    );
    this.registry.registerMetric(f as never);
    this.families.set(spec.name, f);
    return f;
  }

  private nameFor(component: object, kind: string, given: string | undefined): string {
    if (given !== undefined) {
      if (typeof given !== 'string' || given.length === 0)
        throw new TypeError(`BulwarkMetrics.track: name must be a non-empty string, got ${JSON.stringify(given)}`);
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

/** releaseOf answers the (idempotent) release of a scrape's held buffers. */
function releaseOf(held: TextBuffer[]): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    for (const t of held) t.held--;
  };
}

/** ownText answers the text of the labels an entry's samples start with: `name="…"` (and a part's `group="…"`). */
function ownText(e: Entry, bytes: ByteText): string {
  const group = e.base.group;
  return group === undefined ? `name="${bytes.label(e.name)}"` : `name="${bytes.label(e.name)}",group="${bytes.label(group)}"`;
}

function statsOf(c: object): unknown {
  const s = (c as { stats?: () => unknown }).stats;
  return typeof s === 'function' ? s.call(c) : {};
}
