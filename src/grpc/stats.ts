/**
 * CallStats: what the gRPC interceptors and the load-balancing policy count — calls by method and
 * status code, and their durations — read as `stats()` (a fresh plain object), offered to a metrics
 * registry through `describeMetrics()` (the shape `BulwarkMetrics.track()` accepts), and published on
 * `diagnostics_channel` (`bulwark:grpc:call`) only while someone subscribes.
 */
import type { MetricsDescription, MetricsSink } from '../core/metrics-description.js';
import { Status } from './adapter.js';

import { grpcCallChannel } from '../core/diagnostics.js';

export { grpcCallChannel };

/** Histogram buckets in seconds (Prometheus' default buckets, from 5 ms to 10 s). */
export const DURATION_BUCKETS: readonly number[] = Object.freeze([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]);

/** codeName answers the name of a gRPC status code (`OK`, `UNAVAILABLE`, …), or its number as text. */
export function codeName(code: number): string {
  return (Status as unknown as Record<number, string>)[code] ?? String(code);
}

/** MethodCodeStats are the calls of one method that ended with one code. */
export interface MethodCodeStats {
  method: string;
  code: string;
  calls: number;
  /** Sum of the calls' durations, in milliseconds. */
  totalMs: number;
  /** The longest call, in milliseconds. */
  maxMs: number;
}

/** GrpcCallStats is what a guard's `stats()` answers. */
export interface GrpcCallStats {
  /** Calls finished (every code). */
  calls: number;
  /** Calls refused by a guard before they reached the wire or the handler. */
  refused: number;
  /** One row per method and code seen. */
  byMethod: MethodCodeStats[];
}

interface Row {
  calls: number;
  totalMs: number;
  maxMs: number;
}

/** The most (method, code) rows kept: methods come from the service definition, so this is a bound against misuse. */
const MAX_ROWS = 10_000;

/** CallStats counts finished calls for one guard (`side` names it in metrics and diagnostics). */
export class CallStats {
  private readonly rows = new Map<string, Map<number, Row>>();
  private size = 0;
  private calls = 0;
  private refusals = 0;
  private readonly sinks = new Set<MetricsSink>();

  constructor(private readonly side: 'client' | 'server') {}

  /** record counts one finished call of `method` with status `code` that took `durationMs`. */
  record(method: string, code: number, durationMs: number, refused = false): void {
    this.calls++;
    if (refused) this.refusals++;
    let byCode = this.rows.get(method);
    if (byCode === undefined) {
      if (this.size >= MAX_ROWS) return;
      byCode = new Map();
      this.rows.set(method, byCode);
    }
    let row = byCode.get(code);
    if (row === undefined) {
      if (this.size >= MAX_ROWS) return;
      row = { calls: 0, totalMs: 0, maxMs: 0 };
      byCode.set(code, row);
      this.size++;
    }
    row.calls++;
    row.totalMs += durationMs;
    if (durationMs > row.maxMs) row.maxMs = durationMs;
    if (this.sinks.size > 0) {
      const labels = { method, code: codeName(code) };
      for (const s of this.sinks) {
        s.inc(`grpc_${this.side}_calls_total`, labels);
        s.observe(`grpc_${this.side}_call_duration_seconds`, labels, durationMs / 1000);
      }
    }
    if (grpcCallChannel.hasSubscribers) grpcCallChannel.publish({ side: this.side, method, code: codeName(code), durationMs });
  }

  /** stats answers a snapshot. */
  stats(): GrpcCallStats {
    const byMethod: MethodCodeStats[] = [];
    for (const [method, byCode] of this.rows) {
      for (const [code, r] of byCode) byMethod.push({ method, code: codeName(code), calls: r.calls, totalMs: r.totalMs, maxMs: r.maxMs });
    }
    return { calls: this.calls, refused: this.refusals, byMethod };
  }

  /** describeMetrics offers the call counter and duration histogram to a metrics registry. */
  describeMetrics(): MetricsDescription {
    const side = this.side;
    return {
      families: [
        {
          name: `grpc_${side}_calls_total`,
          type: 'counter',
          help: `gRPC calls finished on the ${side} side, by method and status code.`,
          labelNames: ['method', 'code'],
        },
        {
          name: `grpc_${side}_call_duration_seconds`,
          type: 'histogram',
          help: `Duration of gRPC calls on the ${side} side, in seconds, by method and status code.`,
          labelNames: ['method', 'code'],
          buckets: DURATION_BUCKETS,
        },
      ],
      subscribe: (sink) => {
        this.sinks.add(sink);
        return () => void this.sinks.delete(sink);
      },
      snapshot: () => this.stats(),
    };
  }
}
