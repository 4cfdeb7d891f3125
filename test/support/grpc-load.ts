/**
 * A bounded load loop for the gRPC tests: `workers` concurrent callers, each calling in sequence until
 * `stop()` is called, `maxMs` passes or `maxCalls` calls were made in all.
 */
import type { ServiceError } from '@grpc/grpc-js';
import { sayHello, type GreeterClient, type HelloRequest } from './grpc-greeter.js';

/** CallRecord is one finished call. */
export interface CallRecord {
  at: number;
  ms: number;
  server?: string;
  code?: number;
  details?: string;
}

/** Load is a running load loop. */
export interface Load {
  readonly records: CallRecord[];
  stop(): void;
  readonly done: Promise<CallRecord[]>;
}

/** startLoad starts the loop; see the module comment. */
export function startLoad(client: GreeterClient, o: { workers: number; maxMs: number; maxCalls: number; request?: HelloRequest; deadlineMs?: number }): Load {
  const records: CallRecord[] = [];
  const end = performance.now() + o.maxMs;
  let stopped = false;
  let started = 0;
  const worker = async () => {
    while (!stopped && performance.now() < end && started < o.maxCalls) {
      started++;
      const t0 = performance.now();
      try {
        const r = await sayHello(client, o.request ?? { name: 'x' }, { deadline: Date.now() + (o.deadlineMs ?? 2_000) });
        records.push({ at: t0, ms: performance.now() - t0, server: r.server });
      } catch (err) {
        const e = err as ServiceError;
        records.push({ at: t0, ms: performance.now() - t0, code: e.code, details: e.details });
      }
    }
  };
  const done = Promise.all(Array.from({ length: o.workers }, worker)).then(() => records);
  return { records, stop: () => void (stopped = true), done };
}

/** percentile answers the p-th percentile (0–100) of `values`. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}
