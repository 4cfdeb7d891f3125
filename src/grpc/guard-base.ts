/**
 * GuardBase is what the client and the server guard share: their call statistics, and the breakers
 * option read the same way (a BreakerGroup of their own by default, closed with the guard; one passed
 * in stays open; `false` for none).
 */
import { BreakerGroup } from '../breaker/breaker-group.js';
import { CallStats, type GrpcCallStats } from './stats.js';
import type { GrpcBreakerSource } from './types.js';
import type { MetricsDescription } from '../core/metrics-description.js';

export abstract class GuardBase {
  /** @internal */
  protected readonly calls: CallStats;
  private ownGroup: BreakerGroup | undefined;
  private readonly kind: string;

  protected constructor(side: 'client' | 'server') {
    this.calls = new CallStats(side);
    this.kind = side === 'client' ? 'GrpcClientGuard' : 'GrpcServerGuard';
  }

  /** breakerSource reads a breakers option: a new group of the guard's own when undefined, none when false. @internal */
  protected breakerSource(owner: string, option: GrpcBreakerSource | false | undefined): GrpcBreakerSource | undefined {
    if (option === undefined) return (this.ownGroup = new BreakerGroup());
    if (option === false) return undefined;
    if (option !== null && typeof option === 'object' && typeof option.get === 'function') return option;
    throw new TypeError(`${owner}: breakers must have get(name) (a BreakerGroup) or be false`);
  }

  /** stats answers the calls by method and code, and the refusals. */
  stats(): GrpcCallStats {
    return this.calls.stats();
  }

  /**
   * describeMetrics offers `grpc_client_…` or `grpc_server_calls_total` and `…_call_duration_seconds` to
   * a metrics registry, as kind GrpcClientGuard or GrpcServerGuard (a subclass keeps its base's kind).
   */
  describeMetrics(): MetricsDescription {
    return { ...this.calls.describeMetrics(), kind: this.kind };
  }

  /** close closes the breaker group the guard made itself (a group passed in stays open). */
  async close(): Promise<void> {
    await this.ownGroup?.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
