/**
 * GrpcServerGuard: server interceptors (grpc-js ≥ 1.10) that refuse a call before its handler runs, as
 * go-zero's zrpc server interceptors do (serverinterceptors/sheddinginterceptor.go,
 * breakerinterceptor.go), in this order:
 *
 * 1. **Deadline.** A call whose caller's deadline has already passed is answered DEADLINE_EXCEEDED
 *    without running the handler (grpc-js enforces the deadline while it runs, and a handler that
 *    passes its call as `parent` to outgoing calls propagates it).
 * 2. **Shedder** (`AdaptiveShedder`): refusal → RESOURCE_EXHAUSTED, `ERR_OVERLOADED` (go-zero maps a
 *    shed request to ResourceExhausted... and its HTTP twin to 503).
 * 3. **Limiter** (global, or keyed by a metadata value or the peer): refusal → RESOURCE_EXHAUSTED,
 *    `ERR_RATE_LIMITED`, with the retry delay as `google.rpc.RetryInfo` in `grpc-status-details-bin`
 *    and as `retry-after-ms`.
 * 4. **Breaker per method**: refusal → UNAVAILABLE, `ERR_BREAKER_OPEN`. A call that ends with one of
 *    `failureCodes` (go-zero's, DEADLINE_EXCEEDED among them: a server too slow for its callers is
 *    failing them) counts as a failure; a call the caller cancelled counts as neither.
 *
 * Shedder tokens complete with success for any finished call but RESOURCE_EXHAUSTED / UNAVAILABLE
 * (only work actually done feeds the shedder), and are released when the caller cancels.
 */
import { ServerInterceptingCall, status } from '@grpc/grpc-js';
import type { Metadata, ServerInterceptor, StatusObject } from '@grpc/grpc-js';
import type { AdmissionToken } from '../core/admission.js';
import { BreakerGroup } from '../breaker/breaker-group.js';
import { systemClock, type Clock } from '../core/clock.js';
import { BreakerOpenError, OverloadedError, RateLimitedError } from '../core/errors.js';
import { clockOption, options as checkOptions } from '../core/validate.js';
import { CallStats, type GrpcCallStats } from './stats.js';
import { failureSet, refusal } from './status.js';
import type { GrpcBreakerSource, GrpcLimiter, GrpcShedder, MetricsDescription } from './types.js';
import { ensureGrpcJs } from './version.js';

/** LimitBy says what a server limiter keys on. */
export type LimitBy = 'global' | 'peer' | { readonly metadata: string } | ((metadata: Metadata, peer: string) => string | undefined);

/** GrpcServerGuardOptions configures a GrpcServerGuard. */
export interface GrpcServerGuardOptions {
  /** Protects the process (`admit()` → token, or throws OverloadedError). Defaults to none. */
  shedder?: GrpcShedder | false;
  /** A keyed synchronous limiter (`decide(key)`, e.g. a KeyedLimiter). Defaults to none. */
  limiter?: GrpcLimiter | false;
  /** The limiter's key: `'global'` (one key for every call), `'peer'`, a metadata header, or a function (undefined: not limited). Defaults to 'global'. */
  limitBy?: LimitBy;
  /** Where the per-method breakers come from, or false for none. Defaults to a new BreakerGroup of SreBreakers. */
  breakers?: GrpcBreakerSource | false;
  /** The status codes that count as a failure for the breaker. Defaults to go-zero's (DEADLINE_EXCEEDED, INTERNAL, UNAVAILABLE, DATA_LOSS, UNIMPLEMENTED, RESOURCE_EXHAUSTED). */
  failureCodes?: readonly number[];
  /** Times calls for the statistics. Defaults to `systemClock`. */
  clock?: Clock;
}

/** Defaults for GrpcServerGuardOptions. */
export const grpcServerGuardDefaults = Object.freeze({ limitBy: 'global' as LimitBy });

function deadlineMs(d: Date | number): number {
  return d instanceof Date ? d.getTime() : d;
}

/** GrpcServerGuard holds the server guards; pass `guard.interceptor` in the server's `interceptors` option. */
export class GrpcServerGuard {
  /** interceptor is the grpc-js server interceptor. */
  readonly interceptor: ServerInterceptor;
  private readonly calls = new CallStats('server');
  private readonly ownGroup: BreakerGroup | undefined;

  constructor(options?: GrpcServerGuardOptions) {
    ensureGrpcJs();
    const o = checkOptions('GrpcServerGuard', options);
    const clock = clockOption('GrpcServerGuard', o.clock, systemClock);
    const isFailure = failureSet('GrpcServerGuard', o.failureCodes);
    const shedder = o.shedder === undefined || o.shedder === false ? undefined : o.shedder;
    if (shedder !== undefined && typeof shedder.admit !== 'function') throw new TypeError('GrpcServerGuard: shedder must have admit() (an AdaptiveShedder)');
    const limiter = o.limiter === undefined || o.limiter === false ? undefined : o.limiter;
    if (limiter !== undefined && typeof limiter.decide !== 'function') throw new TypeError('GrpcServerGuard: limiter must have decide(key) (a KeyedLimiter)');
    const keyOf = limitKey(o.limitBy ?? grpcServerGuardDefaults.limitBy);
    let breakers: GrpcBreakerSource | undefined;
    if (o.breakers === undefined) breakers = this.ownGroup = new BreakerGroup();
    else if (o.breakers === false) breakers = undefined;
    else if (o.breakers !== null && typeof o.breakers === 'object' && typeof o.breakers.get === 'function') breakers = o.breakers;
    else throw new TypeError('GrpcServerGuard: breakers must have get(name) (a BreakerGroup) or be false');
    const stats = this.calls;

    this.interceptor = (descriptor, call) => {
      const method = descriptor.path;
      let shed: AdmissionToken | undefined;
      let breaker: AdmissionToken | undefined;
      let start = 0;
      let done = false;
      const settle = (code: number, refused: boolean): void => {
        if (done) return;
        done = true;
        if (shed !== undefined) {
          if (code === status.CANCELLED) shed.release();
          else if (code === status.RESOURCE_EXHAUSTED || code === status.UNAVAILABLE) shed.failure();
          else shed.success();
        }
        if (breaker !== undefined) {
          if (code === status.CANCELLED) breaker.release();
          else if (isFailure(code)) breaker.failure();
          else breaker.success();
        }
        stats.record(method, code, clock.now() - start, refused);
      };
      const refuse = (st: StatusObject): void => {
        settle(st.code, true);
        ic.sendStatus(st);
      };
      const ic: ServerInterceptingCall = new ServerInterceptingCall(call, {
        start: (next) => {
          next({
            onReceiveMetadata: (metadata, nextMetadata) => {
              start = clock.now();
              const deadline = deadlineMs(call.getDeadline());
              if (deadline !== Infinity && deadline <= Date.now()) {
                settle(status.DEADLINE_EXCEEDED, true);
                ic.sendStatus({ code: status.DEADLINE_EXCEEDED, details: 'the caller\'s deadline passed before the handler ran', metadata: metadata.clone() });
                return;
              }
              if (shedder !== undefined) {
                try {
                  shed = shedder.admit();
                } catch (err) {
                  if (err instanceof OverloadedError) return refuse(refusal(status.RESOURCE_EXHAUSTED, OverloadedError.code, 'the server is overloaded (load shedding)'));
                  throw err;
                }
              }
              if (limiter !== undefined) {
                const key = keyOf(metadata, call.getPeer());
                if (key !== undefined) {
                  const d = limiter.decide(key);
                  if (!d.allowed) return refuse(refusal(status.RESOURCE_EXHAUSTED, RateLimitedError.code, `rate limit of ${d.limit} reached`, d.retryAfterMs));
                }
              }
              if (breakers !== undefined) {
                const b = breakers.get(method);
                if (b !== undefined) {
                  try {
                    breaker = b.admit();
                  } catch (err) {
                    if (err instanceof BreakerOpenError) return refuse(refusal(status.UNAVAILABLE, BreakerOpenError.code, `breaker of ${method} is open`));
                    throw err;
                  }
                }
              }
              nextMetadata(metadata);
            },
            onCancel: () => {
              const deadline = deadlineMs(call.getDeadline());
              settle(deadline !== Infinity && deadline <= Date.now() ? status.DEADLINE_EXCEEDED : status.CANCELLED, false);
            },
          });
        },
        sendStatus: (st, next) => {
          settle(st.code ?? status.UNKNOWN, false);
          next(st);
        },
      });
      return ic;
    };
  }

  /** stats answers the calls by method and code, and the refusals. */
  stats(): GrpcCallStats {
    return this.calls.stats();
  }

  /** describeMetrics offers `grpc_server_calls_total` and `grpc_server_call_duration_seconds` to a metrics registry. */
  describeMetrics(): MetricsDescription {
    return this.calls.describeMetrics();
  }

  /** close closes the breaker group the guard made itself (a group passed in stays open). */
  async close(): Promise<void> {
    await this.ownGroup?.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

function limitKey(by: LimitBy): (metadata: Metadata, peer: string) => string | undefined {
  if (by === 'global') return () => 'global';
  if (by === 'peer') return (_m, peer) => peerHost(peer);
  if (typeof by === 'function') return by;
  if (by !== null && typeof by === 'object' && typeof by.metadata === 'string' && by.metadata.length > 0) {
    const header = by.metadata.toLowerCase();
    return (m) => {
      const v = m.get(header)[0];
      return v === undefined ? undefined : String(v);
    };
  }
  throw new TypeError(`GrpcServerGuard: limitBy must be 'global', 'peer', { metadata: header } or a function, got ${JSON.stringify(by)}`);
}

/** peerHost strips the port from a grpc-js peer (`ipv4:127.0.0.1:5000`, `ipv6:[::1]:5000`, `127.0.0.1:5000`). */
function peerHost(peer: string): string {
  const p = peer.replace(/^ipv[46]:/, '');
  const i = p.lastIndexOf(':');
  return i > 0 && !p.endsWith(']') ? p.slice(0, i) : p;
}
