/**
 * bulwark/metrics: Prometheus metrics (prom-client) for every bulwark component, read from their
 * `stats()` at scrape time; one JSON status snapshot; `/metrics` handlers for node:http, Express and
 * Fastify. See docs/metrics.md for every metric, its type, labels and meaning.
 */
export { BulwarkMetrics } from './metrics.js';
export { metricsHandler, statusHandler, expressMetrics, fastifyMetrics } from './handlers.js';
export type { Exposition, ExpressHandler, FastifyMetricsHost, FastifyMetricsReply, FastifyMetricsOptions } from './handlers.js';
export type {
  BulwarkMetricsOptions,
  ComponentSnapshot,
  Emit,
  HistogramObserver,
  HistogramPairObserver,
  HistogramTotals,
  Labels,
  MetricFamilySpec,
  MetricType,
  MetricsContext,
  MetricsDescription,
  MetricsPart,
  MetricsSink,
  MetricsSnapshot,
  TrackOptions,
  Trackable,
} from './types.js';
