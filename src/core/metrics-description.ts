/**
 * The metrics description protocol: how a component tells a metrics registry (bulwark/metrics'
 * BulwarkMetrics, or any other) which metric families it has, their values at scrape time, the events
 * it counts between scrapes, and its JSON status. Every trackable component implements
 * `describeMetrics(ctx)` next to its `stats()`; the registry renders what it is handed and knows no
 * component by name. Types only: importing them loads nothing.
 */

/** MetricType is the Prometheus type of a family. */
export type MetricType = 'counter' | 'gauge' | 'histogram';

/** Labels are a series' label values by label name. */
export type Labels = Readonly<Record<string, string | number>>;

/**
 * MetricFamilySpec describes one metric family. `name` comes without the prefix (the registry adds it);
 * counters end in `_total`, units are seconds and bytes. `labelNames` leaves out `name` (the track name,
 * always added first); never put keys or ids in labels.
 */
export interface MetricFamilySpec {
  readonly name: string;
  readonly type: MetricType;
  readonly help: string;
  readonly labelNames: readonly string[];
  /** Histogram bucket upper bounds in seconds. Defaults to 5 ms … 10 s. */
  readonly buckets?: readonly number[];
}

/**
 * Emit records one sample at scrape time: the family's name (unprefixed), its labels and value. Labels
 * without `name` get the component's track name; a composite that emits for its parts gives `name`
 * (and `group`) itself.
 */
export type Emit = ((family: string, labels: Labels, value: number) => void) & {
  /**
   * text, when present (the text path of a scrape), lets a collector that emits very many series (a
   * BreakerGroup's members) write sample lines itself, with no label objects. @internal
   */
  text?: TextOut;
};

/** TextOut is the text path of a scrape, for collectors that write their sample lines themselves. @internal */
export interface TextOut {
  /** label answers a label value escaped for the text format, as a byte string. */
  label(value: string | number): string;
  /** section answers where the lines of `family` (unprefixed) go, or undefined when it is not registered. */
  section(family: string): TextSection | undefined;
}

/** TextSection is one family's part of the text exposition under way. @internal */
export interface TextSection {
  /** name is the family's full (prefixed) name: each line starts with it. */
  readonly name: string;
  /**
   * write appends sample lines, each ending in a newline: `name{name="x",…} value`, the `name` label
   * first, label values made by `TextOut.label`, values as `String(number)` of finite numbers.
   */
  write(lines: string): void;
  /**
   * line appends one sample line from its parts, with no string made: `head` (the bytes of e.g.
   * `name{name="`), a label value made by `TextOut.label`, `tail` (the bytes of the rest up to the
   * value, e.g. `",state="open"} `), the value, a newline.
   */
  line(head: Uint8Array, key: string, tail: Uint8Array, value: number): void;
}

/** MetricsSink receives a component's events between scrapes (counters and histograms counted as they happen). */
export interface MetricsSink {
  /** inc adds `by` (default 1) to a counter series. */
  inc(family: string, labels: Labels, by?: number): void;
  /** observe adds one observation (seconds) to a histogram series. */
  observe(family: string, labels: Labels, value: number): void;
  /**
   * observer answers the histogram series of `labels` as an object whose `observe(value)` adds one
   * observation, for hot event paths: hold it per label set, and the labels are not hashed again per
   * event. It does nothing once the component is untracked. Optional: sinks made by BulwarkMetrics have it.
   */
  observer?(family: string, labels: Labels): HistogramObserver;
  /**
   * pairObserver answers two histogram series as one object that adds one observation to each at a
   * time, for events that have two durations (a client's answered attempt and its call): one check and,
   * when both land in the same bucket, one bucket search. What it counts is what two `observer`s would
   * count. Optional: sinks made by BulwarkMetrics have it.
   */
  pairObserver?(a: { family: string; labels: Labels }, b: { family: string; labels: Labels }): HistogramPairObserver;
}

/** HistogramObserver adds observations (seconds) to one histogram series. */
export interface HistogramObserver {
  observe(value: number): void;
}

/** HistogramPairObserver adds one observation to each of two histogram series. */
export interface HistogramPairObserver {
  /** observe adds `a` (seconds) to the first series and `b` to the second. */
  observe(a: number, b: number): void;
  /**
   * observeMs adds pairs given in milliseconds, in order: `ms[0] / 1000` to the first series,
   * `ms[1] / 1000` to the second, and so on for the first `n` numbers — what `observe` of each pair
   * counts, sums included to the last bit.
   */
  observeMs(ms: Float64Array, n: number): void;
}

/** observerPair answers a HistogramPairObserver that hands each value of a pair to its own observer: a pair where no paired one is made. */
export function observerPair(a: HistogramObserver, b: HistogramObserver): HistogramPairObserver {
  return {
    observe: (x, y) => {
      a.observe(x);
      b.observe(y);
    },
    observeMs: (ms, n) => {
      for (let i = 0; i + 1 < n; i += 2) {
        a.observe(ms[i]! / 1000);
        b.observe(ms[i + 1]! / 1000);
      }
    },
  };
}

/** MetricsDescription is what a component answers to `describeMetrics()`. */
export interface MetricsDescription {
  /** The kind shown in the registry's snapshot (e.g. 'grpc-server'). Defaults to the constructor's name. */
  readonly kind?: string;
  /** Every family the component may emit. */
  readonly families: readonly MetricFamilySpec[];
  /** collect emits the current values at scrape time (read from stats()): gauges, and counters as monotonic totals. */
  collect?(emit: Emit): void;
  /** subscribe is called once when the component is tracked; it answers the disposer that untracking calls. */
  subscribe?(sink: MetricsSink): () => void;
  /**
   * flush hands the sink the events the component holds back to hand over in batches (a client's
   * answered calls' durations), before its event series are read: each scrape, `histograms()`.
   */
  flush?(): void;
  /** snapshot answers the JSON-ready status of the component (the one status protocol). Defaults to its `stats()`. */
  snapshot?(): unknown;
  /** closed tells whether the component was closed: it is then dropped from scrapes and snapshots. */
  closed?(): boolean;
  /**
   * parts answers, at each scrape, the components whose series this one exports beside its own (a
   * client's breakers, each open service's balancer, its registry cache). The registry describes each
   * part when it first appears — its families registered, its events subscribed — and drops it once it
   * is no longer answered or its owner is untracked. A part is exported once a scrape: not through its
   * owner when it is tracked on its own, and through the first owner only when two share it.
   */
  parts?(): Iterable<MetricsPart>;
}

/** MetricsPart is one part of a composite component (see `MetricsDescription.parts`). */
export interface MetricsPart {
  /** The part: anything with `describeMetrics(ctx)` (anything else is left out). */
  readonly component: object;
  /** Its `name` label, which its description also reads as `ctx.name()`. */
  readonly name: string;
  /** Its `group` label (e.g. the owner's name), added after `name`; none when undefined. */
  readonly group?: string;
}

/** MetricsContext is what a registry tells the component it describes itself to. */
export interface MetricsContext {
  /**
   * The name of the label carrying a service instance's address on per-instance series (a balancer's
   * health and EWMA per instance), or undefined: no per-instance series.
   */
  readonly instanceLabel: string | undefined;
  /**
   * name answers the component's `name` label, read at scrape time (it is settled once the component is
   * tracked): a BreakerGroup gives it to its members as their `group` label, a ResilientClient to its
   * balancers.
   */
  name(): string;
}

/** Trackable is a component that describes its own metrics. */
export interface Trackable {
  describeMetrics(ctx: MetricsContext): MetricsDescription;
}
