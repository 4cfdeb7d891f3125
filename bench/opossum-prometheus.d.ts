/** The part of opossum-prometheus 0.3 (which ships no types) that bench/metrics.bench.ts uses. */
declare module 'opossum-prometheus' {
  export default class PrometheusMetrics {
    constructor(options?: { circuits?: unknown[]; registry?: unknown });
    readonly metrics: Promise<string>;
    add(circuits: unknown[]): void;
    clear(): void;
  }
}
