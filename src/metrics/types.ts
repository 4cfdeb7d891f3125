/**
 * The types of bulwark/metrics: the options of BulwarkMetrics and what it answers, and (from core, where
 * they live so that a component describes itself without importing bulwark/metrics) the protocol through
 * which every component describes its metric families: `describeMetrics(ctx)`.
 */
import type { Registry, RegistryContentType } from 'prom-client';

export type {
  Emit,
  HistogramObserver,
  HistogramPairObserver,
  Labels,
  MetricFamilySpec,
  MetricType,
  MetricsContext,
  MetricsDescription,
  MetricsPart,
  MetricsSink,
  Trackable,
} from '../core/metrics-description.js';

/** BulwarkMetricsOptions configures a BulwarkMetrics. */
export interface BulwarkMetricsOptions {
  /** The prom-client registry the families are registered in. Defaults to prom-client's global `register`. */
  registry?: Registry<RegistryContentType>;
  /** Prefix of every family name. Defaults to 'bulwark_'. */
  prefix?: string;
  /**
   * Name of the label carrying a service instance's address on per-instance series (balancer health and
   * EWMA per instance). Defaults to none: no per-instance series (their count grows with the fleet).
   */
  instanceLabel?: string;
}

/** TrackOptions are the options of `track()`. */
export interface TrackOptions {
  /** The `name` label of the component's series. Defaults to the component's own name, else its kind and a number. */
  name?: string;
}

/** ComponentSnapshot is one tracked component in `snapshot()`. */
export interface ComponentSnapshot {
  readonly name: string;
  readonly kind: string;
  readonly status: unknown;
}

/** MetricsSnapshot is what `snapshot()` answers: JSON-ready. */
export interface MetricsSnapshot {
  /** Wall-clock time of the snapshot (ISO 8601). */
  readonly at: string;
  readonly components: readonly ComponentSnapshot[];
}

/** HistogramTotals is one component's histogram family in `histograms()`: what it counted so far. */
export interface HistogramTotals {
  /** The component's track name. */
  readonly name: string;
  /** The family's name without the prefix (e.g. 'client_call_duration_seconds'). */
  readonly family: string;
  /** Bucket upper bounds in seconds, ascending. */
  readonly bounds: readonly number[];
  /** Observations per bucket (not cumulative), one per bound; those above the last bound are only in `count`. */
  readonly counts: readonly number[];
  /** Every observation. */
  readonly count: number;
  /** The sum of the observations, in seconds. */
  readonly sum: number;
}
