/**
 * Family: one metric family registered in a prom-client Registry as a custom metric object. Its values
 * are produced at scrape time (pull): `get()` asks the owning BulwarkMetrics to run every tracked
 * component's collector once for this scrape, then adds the series counted from events (counters and
 * histograms). prom-client's own Counter has no `set`, and a counter read from `stats()` is a total,
 * so the family formats its samples itself. @internal
 */
import { ByteText, TextBuffer, escapeHelp, valueText } from './text.js';
import type { Labels, MetricFamilySpec, MetricType } from './types.js';
import type { TextSection } from '../core/metrics-description.js';

/** Default histogram buckets, in seconds: 5 ms … 10 s. */
export const DEFAULT_BUCKETS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Sample is one value of a family as prom-client formats it. */
export interface Sample {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

/** EventSeries is a counter or histogram series counted from events between scrapes. */
export interface EventSeries {
  labels: Record<string, string | number>;
  /** Counter only (0 for a histogram): its value. */
  value: number;
  /**
   * Histogram only (undefined for a counter): `[count, sum, per-bucket counts (not cumulative), one per
   * bound]` (see COUNT, SUM, BUCKETS). A view of the buffer of a SeriesPairObserver when the series was
   * made as one of a pair.
   */
  hist: Float64Array | undefined;
}

/** Where a histogram series keeps its count, its sum, and its first bucket's count (EventSeries.hist). */
export const COUNT = 0;
export const SUM = 1;
export const BUCKETS = 2;

/**
 * SeriesObserver is a histogram series bound for a hot event path (MetricsSink.observer): one
 * monomorphic method, the bucket search inline, nothing allocated. @internal
 */
export class SeriesObserver {
  constructor(
    private readonly owner: { readonly live: boolean },
    private readonly bounds: Float64Array,
    private readonly hist: Float64Array,
  ) {}

  observe(value: number): void {
    if (!this.owner.live || !Number.isFinite(value)) return;
    observeInto(this.bounds, this.hist, value);
  }
}

/**
 * SeriesPairObserver is two histogram series of one owner with the same bounds, bound as one for events
 * with two durations (MetricsSink.pairObserver; a client's answered attempt and its call). It counts
 * what two SeriesObservers would, with less work: one liveness check, one bucket search when both
 * values land in the same bucket (in a single-attempt call the two durations are the same or nearly),
 * the bounds and both series in one buffer, `[bounds | a's hist | b's hist]`, whose two views (`histA`,
 * `histB`) the family reads at the scrape, and `observeMs` for a batch: a client hands over its
 * answered calls by the hundred (~2.6 ns a call folded, against ~7.4 for two observers). @internal
 */
export class SeriesPairObserver {
  /** The bounds (n), then series a's hist (n + 2), then series b's (n + 2). */
  private readonly buf: Float64Array;
  private readonly n: number;
  readonly histA: Float64Array;
  readonly histB: Float64Array;

  constructor(
    private readonly owner: { readonly live: boolean },
    bounds: Float64Array,
  ) {
    const n = bounds.length;
    this.n = n;
    this.buf = new Float64Array(3 * n + 4);
    this.buf.set(bounds);
    this.histA = this.buf.subarray(n, 2 * n + 2);
    this.histB = this.buf.subarray(2 * n + 2);
  }

  observe(a: number, b: number): void {
    if (!this.owner.live) return;
    if (Number.isFinite(a) && Number.isFinite(b)) {
      const f = this.buf;
      const ha = this.n;
      const hb = 2 * ha + 2;
      f[ha + SUM]! += a;
      f[hb + SUM]! += b;
      this.count(a, b);
    } else this.apart(a, b);
  }

  /**
   * observeMs is `observe(ms[i] / 1000, ms[i + 1] / 1000)` for each pair of the first `n` numbers. The
   * sums are added in registers, in the same order (so to the same bits), and the counts of a run of
   * pairs that land in the same buckets are added once: a client hands over its answered calls this way,
   * by the hundred.
   */
  observeMs(ms: Float64Array, n: number): void {
    if (!this.owner.live) return;
    const f = this.buf;
    const bn = this.n;
    const ha = bn;
    const hb = 2 * bn + 2;
    let sa = f[ha + SUM]!;
    let sb = f[hb + SUM]!;
    // The run: `run` pairs counted in a's bucket `ri` and b's `rj`, with bounds lo < value <= hi (the
    // same for both): a pair within them is in the run without a search.
    let run = 0;
    let ri = 0;
    let rj = 0;
    let lo = Infinity;
    let hi = -Infinity;
    for (let k = 0; k + 1 < n; k += 2) {
      const a = ms[k]! / 1000;
      const b = ms[k + 1]! / 1000;
      if (a > lo && a <= hi && b > lo && b <= hi) {
        sa += a;
        sb += b;
        run++;
        continue;
      }
      this.countRun(run, ri, rj);
      run = 0;
      if (Number.isFinite(a) && Number.isFinite(b)) {
        sa += a;
        sb += b;
        let i = 0;
        while (i < bn && a > f[i]!) i++;
        let j = 0;
        while (j < bn && b > f[j]!) j++;
        run = 1;
        ri = i;
        rj = j;
        // A run goes on while both land where this pair did, when that is one bucket (+Inf: above the last bound).
        lo = i === j ? (i === 0 ? -Infinity : f[i - 1]!) : Infinity;
        hi = i === j ? (i === bn ? Number.MAX_VALUE : f[i]!) : -Infinity;
      } else {
        f[ha + SUM] = sa;
        f[hb + SUM] = sb;
        this.apart(a, b);
        sa = f[ha + SUM]!;
        sb = f[hb + SUM]!;
        lo = Infinity;
        hi = -Infinity;
      }
    }
    this.countRun(run, ri, rj);
    f[ha + SUM] = sa;
    f[hb + SUM] = sb;
  }

  /** countRun counts `run` pairs in a's bucket `i` and b's bucket `j` (the bound count: +Inf only). */
  private countRun(run: number, i: number, j: number): void {
    if (run === 0) return;
    const f = this.buf;
    const n = this.n;
    const ha = n;
    const hb = 2 * n + 2;
    f[ha + COUNT]! += run;
    if (i < n) f[ha + BUCKETS + i]! += run;
    f[hb + COUNT]! += run;
    if (j < n) f[hb + BUCKETS + j]! += run;
  }

  /** count counts finite `a` and `b` in their series' count and bucket (their sums are the caller's). */
  private count(a: number, b: number): void {
    const f = this.buf;
    const n = this.n;
    let i = 0;
    while (i < n && a > f[i]!) i++;
    // a's bucket is i (n: above every bound, counted in +Inf only); b's is too when it lies between i's bounds.
    let j = i;
    if (i === n ? n > 0 && b <= f[n - 1]! : b > f[i]! || (i > 0 && b <= f[i - 1]!)) {
      j = 0;
      while (j < n && b > f[j]!) j++;
    }
    const ha = n;
    const hb = 2 * n + 2;
    f[ha + COUNT]!++;
    if (i < n) f[ha + BUCKETS + i]!++;
    f[hb + COUNT]!++;
    if (j < n) f[hb + BUCKETS + j]!++;
  }

  /** apart observes a pair of which one value at least is not finite (that one is not counted). */
  private apart(a: number, b: number): void {
    const bounds = this.buf.subarray(0, this.n);
    if (Number.isFinite(a)) observeInto(bounds, this.histA, a);
    if (Number.isFinite(b)) observeInto(bounds, this.histB, b);
  }
}

/** The OpenMetrics content type, in which prom-client appends `_total` to counter names itself. */
const OPENMETRICS = 'application/openmetrics-text; version=1.0.0; charset=utf-8';

export class Family implements TextSection {
  readonly type: MetricType;
  readonly help: string;
  readonly labelNames: readonly string[];
  readonly buckets: readonly number[];
  readonly aggregator = 'sum';
  /** Samples collected for the scrape under way (prom-client's path). */
  buffer: Sample[] = [];
  /** The family's text for the scrape under way (the text path of `BulwarkMetrics.metrics()`). */
  private out: TextBuffer | undefined;
  /** Bytes of the last scrape's text: the next one starts with a buffer that size. */
  private sizeHint = 0;
  /** The last scrape's buffer: the next one copies its unchanged lines from it. */
  private last: TextBuffer | undefined;
  /** The buffer before it, written again by the next scrape unless an answer still holds it (see begin). */
  private spare: TextBuffer | undefined;
  /** Event series by owner (a tracked component's entry), then by label key. */
  readonly events = new Map<object, Map<string, EventSeries>>();
  private readonly fullName: string;
  /** The bucket bounds as doubles, for observe. */
  readonly bounds: Float64Array;

  constructor(
    prefix: string,
    readonly spec: MetricFamilySpec,
    private readonly collect: () => void,
    private readonly contentType: () => string,
  ) {
    this.fullName = prefix + spec.name;
    this.type = spec.type;
    this.help = spec.help;
    this.labelNames = ['name', ...spec.labelNames];
    this.buckets = spec.type === 'histogram' ? [...(spec.buckets ?? DEFAULT_BUCKETS)].sort((a, b) => a - b) : [];
    this.bounds = Float64Array.from(this.buckets);
  }

  /** name is the full (prefixed) name; prom-client's OpenMetrics mode rewrites it, which is ignored. */
  get name(): string {
    return this.fullName;
  }
  set name(_ignored: string) {}

  /** get answers the family's samples for this scrape (prom-client's metric interface). */
  async get(): Promise<{ name: string; help: string; type: MetricType; values: Sample[]; aggregator: string }> {
    this.collect();
    // Hand the samples over: nothing of a scrape stays referenced between scrapes.
    const values = this.buffer;
    this.buffer = [];
    for (const series of this.events.values()) {
      for (const s of series.values()) {
        if (this.type === 'histogram') this.histogramSamples(s, values);
        else values.push({ labels: s.labels, value: s.value });
      }
    }
    let name = this.fullName;
    // prom-client appends `_total` to counters in OpenMetrics mode: strip ours so it is not doubled.
    if (this.type === 'counter' && this.contentType() === OPENMETRICS && name.endsWith('_total')) name = name.slice(0, -6);
    return { name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /**
   * begin starts the family's text for a scrape (HELP and TYPE lines); `write` then adds sample lines,
   * copying those unchanged since the last scrape from its buffer. It is written into the buffer of the
   * scrape before the last, unless an answer still holds that one's bytes (a response still sending
   * them: see `end`): then into a new buffer, and the held one is left to its answer.
   */
  begin(bytes: ByteText): void {
    const spare = this.spare !== undefined && this.spare.held === 0 ? this.spare : undefined;
    const out = (this.out = spare ?? new TextBuffer(this.sizeHint));
    out.clear(this.last);
    out.write(`# HELP ${this.fullName} ${bytes.bytes(escapeHelp(this.help))}\n# TYPE ${this.fullName} ${this.type}\n`);
  }

  /** write appends sample lines (byte strings, each ending in a newline) to the text under way. */
  write(lines: string): void {
    this.out?.write(lines);
  }

  /** line appends one sample line from its parts (see TextSection.line). */
  line(head: Uint8Array, key: string, tail: Uint8Array, value: number): void {
    this.out?.line(head, key, tail, value);
  }

  /**
   * sample writes one sample line from a label object (the generic path of `emit`), after `first`: label
   * text already made (e.g. `name="x"`), or ''.
   */
  sample(bytes: ByteText, metricName: string, first: string, labels: Labels, value: number): void {
    let l = first;
    for (const k in labels) l += `${l === '' ? '' : ','}${k}="${bytes.label(labels[k]!)}"`;
    this.out?.write(l === '' ? `${metricName} ${valueText(value)}\n` : `${metricName}{${l}} ${valueText(value)}\n`);
  }

  /**
   * end adds the series counted from events and answers the family in the text exposition format
   * (prom-client's layout, no final newline), as UTF-8 bytes: a view of the buffer, which is kept for
   * the next scrapes. It is held (added to `held`, its count raised) until the scrape's answer is
   * released (BulwarkMetrics.render): until then no scrape writes into it.
   */
  end(bytes: ByteText, held: TextBuffer[]): Buffer {
    if (this.out === undefined) this.begin(bytes);
    for (const series of this.events.values()) {
      for (const e of series.values()) {
        if (this.type !== 'histogram') {
          this.sample(bytes, this.fullName, '', e.labels, e.value);
          continue;
        }
        const out: Sample[] = [];
        this.histogramSamples(e, out);
        for (const x of out) this.sample(bytes, x.metricName!, '', x.labels, x.value);
      }
    }
    const out = this.out!;
    this.out = undefined;
    this.sizeHint = out.length + (out.length >> 4);
    const bytesOut = out.bytes();
    this.spare = this.last;
    this.last = out;
    out.held++;
    held.push(out);
    return bytesOut;
  }

  /**
   * series answers (making it) the event series of `owner` with these labels; a histogram series made
   * now keeps its counts in `hist` when given (a view of a SeriesPairObserver's buffer: see `has`).
   */
  series(owner: object, labels: Record<string, string | number>, hist?: Float64Array): EventSeries {
    let byKey = this.events.get(owner);
    if (byKey === undefined) this.events.set(owner, (byKey = new Map()));
    const key = labelKey(labels);
    let s = byKey.get(key);
    if (s === undefined) {
      // One shape for every series (`hist` undefined for counters).
      s = { labels, value: 0, hist: this.type === 'histogram' ? (hist ?? new Float64Array(BUCKETS + this.buckets.length)) : undefined };
      byKey.set(key, s);
    }
    return s;
  }

  /** has tells whether `owner` has a series with these labels. */
  has(owner: object, labels: Record<string, string | number>): boolean {
    return this.events.get(owner)?.has(labelKey(labels)) === true;
  }

  /** observe adds one observation to a histogram series. */
  observe(s: EventSeries, value: number): void {
    observeInto(this.bounds, s.hist!, value);
  }

  private histogramSamples(s: EventSeries, out: Sample[]): void {
    const base = this.fullName;
    const h = s.hist!;
    let cumulative = 0;
    for (let i = 0; i < this.buckets.length; i++) {
      cumulative += h[BUCKETS + i]!;
      out.push({ metricName: `${base}_bucket`, labels: { ...s.labels, le: this.buckets[i]! }, value: cumulative });
    }
    out.push({ metricName: `${base}_bucket`, labels: { ...s.labels, le: '+Inf' }, value: h[COUNT]! });
    out.push({ metricName: `${base}_sum`, labels: s.labels, value: h[SUM]! });
    out.push({ metricName: `${base}_count`, labels: s.labels, value: h[COUNT]! });
  }
}

/** observeInto counts `value` in the first bucket whose bound holds it, and in the series' count and sum (`hist`: EventSeries.hist). */
function observeInto(bounds: Float64Array, hist: Float64Array, value: number): void {
  for (let i = 0; i < bounds.length; i++) {
    if (value <= bounds[i]!) {
      hist[BUCKETS + i]!++;
      break;
    }
  }
  hist[COUNT]!++;
  hist[SUM]! += value;
}

/** labelKey is a stable key of a label set. */
export function labelKey(labels: Labels): string {
  let k = '';
  for (const name of Object.keys(labels).sort()) k += `${name}\u0000${String(labels[name])}\u0001`;
  return k;
}
