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
  value: number;
  /** Histogram only (undefined / 0 otherwise): per-bucket counts (not cumulative) and the sum of observations. */
  counts?: Float64Array;
  sum?: number;
}

/**
 * SeriesObserver is a histogram series bound for a hot event path (MetricsSink.observer): one
 * monomorphic method, the bucket search inline, nothing allocated. @internal
 */
export class SeriesObserver {
  constructor(
    private readonly owner: { readonly live: boolean },
    private readonly bounds: Float64Array,
    private readonly s: EventSeries,
  ) {}

  observe(value: number): void {
    if (!this.owner.live || !Number.isFinite(value)) return;
    observeInto(this.bounds, this.s, value);
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

  /** series answers (making it) the event series of `owner` with these labels. */
  series(owner: object, labels: Record<string, string | number>): EventSeries {
    let byKey = this.events.get(owner);
    if (byKey === undefined) this.events.set(owner, (byKey = new Map()));
    const key = labelKey(labels);
    let s = byKey.get(key);
    if (s === undefined) {
      // One shape for every series (the histogram fields unused by counters): the hot observe path
      // stays monomorphic.
      s = { labels, value: 0, counts: this.type === 'histogram' ? new Float64Array(this.buckets.length) : undefined, sum: 0 };
      byKey.set(key, s);
    }
    return s;
  }

  /** observe adds one observation to a histogram series. */
  observe(s: EventSeries, value: number): void {
    observeInto(this.bounds, s, value);
  }

  private histogramSamples(s: EventSeries, out: Sample[]): void {
    const base = this.fullName;
    let cumulative = 0;
    for (let i = 0; i < this.buckets.length; i++) {
      cumulative += s.counts![i]!;
      out.push({ metricName: `${base}_bucket`, labels: { ...s.labels, le: this.buckets[i]! }, value: cumulative });
    }
    out.push({ metricName: `${base}_bucket`, labels: { ...s.labels, le: '+Inf' }, value: s.value });
    out.push({ metricName: `${base}_sum`, labels: s.labels, value: s.sum! });
    out.push({ metricName: `${base}_count`, labels: s.labels, value: s.value });
  }
}

/** observeInto counts `value` in the first bucket whose bound holds it, and in the series' count and sum. */
function observeInto(bounds: Float64Array, s: EventSeries, value: number): void {
  for (let i = 0; i < bounds.length; i++) {
    if (value <= bounds[i]!) {
      s.counts![i]!++;
      break;
    }
  }
  s.value++;
  s.sum! += value;
}

/** labelKey is a stable key of a label set. */
export function labelKey(labels: Labels): string {
  let k = '';
  for (const name of Object.keys(labels).sort()) k += `${name}\u0000${String(labels[name])}\u0001`;
  return k;
}
