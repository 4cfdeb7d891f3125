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
import { Metadata, ServerInterceptingCall, status } from '@grpc/grpc-js';
import type { ServerInterceptor, StatusObject } from '@grpc/grpc-js';
import type { InterceptingServerListener, ServerInterceptingCallInterface } from '@grpc/grpc-js/build/src/server-interceptors.js';
import type { PartialStatusObject } from '@grpc/grpc-js/build/src/call-interface.js';
import type { AdmissionToken } from '../core/admission.js';
import { systemClock, type Clock } from '../core/clock.js';
import { BreakerOpenError, OverloadedError, RateLimitedError } from '../core/errors.js';
import { clockOption, options as checkOptions, type OptionKeys } from '../core/validate.js';
import type { CallStats } from './stats.js';
import { GuardBase } from './guard-base.js';
import { failureSet, refusal } from './status.js';
import type { GrpcBreakerSource, GrpcLimiter, GrpcShedder } from './types.js';
import { ensureGrpcJs } from './version.js';

/** The keys of GrpcServerGuardOptions, all of them: any other is refused (see `options`). */
const GRPC_SERVER_GUARD_KEYS = {
  shedder: true,
  limiter: true,
  limitBy: true,
  breakers: true,
  failureCodes: true,
  clock: true,
} as const satisfies OptionKeys<GrpcServerGuardOptions>;

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

/** What every guarded call of one GrpcServerGuard shares. */
interface Shared {
  readonly stats: CallStats;
  readonly clock: Clock;
  readonly isFailure: (code: number) => boolean;
  readonly shedder: GrpcShedder | undefined;
  readonly limiter: GrpcLimiter | undefined;
  readonly keyOf: (metadata: Metadata, peer: string) => string | undefined;
  readonly breakers: GrpcBreakerSource | undefined;
}

/**
 * GuardedServerCall is one call through the guard: it forwards everything to the next call in the
 * chain and is its listener too, deciding on the metadata (before the handler sees anything) and
 * settling the tokens and statistics on the status. It is a ServerInterceptingCall (what the
 * ServerInterceptor type returns) whose methods all forward directly: one layer per call, where a
 * ServerInterceptingCall with a responder adds a listener wrapper and a closure per hook and message.
 */
class GuardedServerCall extends ServerInterceptingCall implements InterceptingServerListener {
  private listener: InterceptingServerListener | undefined;
  private shed: AdmissionToken | undefined;
  private breaker: AdmissionToken | undefined;
  private startedAt = 0;
  private done = false;
  /** Refused before the handler: nothing more reaches the handler's listener. */
  private refused = false;

  constructor(
    private readonly next: ServerInterceptingCallInterface,
    private readonly shared: Shared,
    private readonly method: string,
  ) {
    super(next); // no responder: every method below forwards directly
  }

  override start(listener: InterceptingServerListener): void {
    this.listener = listener;
    this.next.start(this);
  }

  onReceiveMetadata(metadata: Metadata): void {
    const g = this.shared;
    this.startedAt = g.clock.now();
    const deadline = deadlineMs(this.next.getDeadline());
    if (deadline !== Infinity && deadline <= Date.now()) {
      return this.refuse({ code: status.DEADLINE_EXCEEDED, details: "the caller's deadline passed before the handler ran", metadata: new Metadata() });
    }
    if (g.shedder !== undefined) {
      try {
        this.shed = g.shedder.admit();
      } catch (err) {
        if (err instanceof OverloadedError)
          return this.refuse(refusal(status.RESOURCE_EXHAUSTED, OverloadedError.code, 'the server is overloaded (load shedding)'));
        throw err;
      }
    }
    if (g.limiter !== undefined) {
      const key = g.keyOf(metadata, this.next.getPeer());
      if (key !== undefined) {
        const d = g.limiter.decide(key);
        if (!d.allowed) return this.refuse(refusal(status.RESOURCE_EXHAUSTED, RateLimitedError.code, `rate limit of ${d.limit} reached`, d.retryAfterMs));
      }
    }
    if (g.breakers !== undefined) {
      const b = g.breakers.get(this.method);
      if (b !== undefined) {
        try {
          this.breaker = b.admit();
        } catch (err) {
          if (err instanceof BreakerOpenError) return this.refuse(refusal(status.UNAVAILABLE, BreakerOpenError.code, `breaker of ${this.method} is open`));
          throw err;
        }
      }
    }
    this.listener!.onReceiveMetadata(metadata);
  }

  onReceiveMessage(message: unknown): void {
    if (!this.refused) this.listener!.onReceiveMessage(message);
  }
  onReceiveHalfClose(): void {
    if (!this.refused) this.listener!.onReceiveHalfClose();
  }
  onCancel(): void {
    const deadline = deadlineMs(this.next.getDeadline());
    this.settle(deadline !== Infinity && deadline <= Date.now() ? status.DEADLINE_EXCEEDED : status.CANCELLED, false);
    if (!this.refused) this.listener!.onCancel();
  }

  private refuse(st: StatusObject): void {
    this.refused = true;
    this.settle(st.code, true);
    this.next.sendStatus(st);
  }

  private settle(code: number, refused: boolean): void {
    if (this.done) return;
    this.done = true;
    const shed = this.shed;
    if (shed !== undefined) {
      if (code === status.CANCELLED) shed.release();
      else if (code === status.RESOURCE_EXHAUSTED || code === status.UNAVAILABLE) shed.failure();
      else shed.success();
    }
    const breaker = this.breaker;
    if (breaker !== undefined) {
      if (code === status.CANCELLED) breaker.release();
      else if (this.shared.isFailure(code)) breaker.failure();
      else breaker.success();
    }
    this.shared.stats.record(this.method, code, this.shared.clock.now() - this.startedAt, refused);
  }

  override sendMetadata(metadata: Metadata): void {
    this.next.sendMetadata(metadata);
  }
  override sendMessage(message: unknown, callback: () => void): void {
    this.next.sendMessage(message, callback);
  }
  override sendStatus(st: PartialStatusObject): void {
    this.settle(st.code ?? status.UNKNOWN, false);
    this.next.sendStatus(st);
  }
  override startRead(): void {
    this.next.startRead();
  }
  override getPeer(): string {
    return this.next.getPeer();
  }
  override getDeadline(): ReturnType<ServerInterceptingCallInterface['getDeadline']> {
    return this.next.getDeadline();
  }
  override getHost(): string {
    return this.next.getHost();
  }
  override getAuthContext(): ReturnType<ServerInterceptingCallInterface['getAuthContext']> {
    return this.next.getAuthContext();
  }
  override getConnectionInfo(): ReturnType<ServerInterceptingCallInterface['getConnectionInfo']> {
    return this.next.getConnectionInfo();
  }
  override getMetricsRecorder(): ReturnType<ServerInterceptingCallInterface['getMetricsRecorder']> {
    return this.next.getMetricsRecorder();
  }
}

/** GrpcServerGuard holds the server guards; pass `guard.interceptor` in the server's `interceptors` option. */
export class GrpcServerGuard extends GuardBase {
  /** interceptor is the grpc-js server interceptor. */
  readonly interceptor: ServerInterceptor;

  constructor(options?: GrpcServerGuardOptions) {
    super('server');
    ensureGrpcJs();
    const o = checkOptions('GrpcServerGuard', options, GRPC_SERVER_GUARD_KEYS);
    const clock = clockOption('GrpcServerGuard', o.clock, systemClock);
    const isFailure = failureSet('GrpcServerGuard', o.failureCodes);
    const shedder = o.shedder === undefined || o.shedder === false ? undefined : o.shedder;
    if (shedder !== undefined && typeof shedder.admit !== 'function') throw new TypeError('GrpcServerGuard: shedder must have admit() (an AdaptiveShedder)');
    const limiter = o.limiter === undefined || o.limiter === false ? undefined : o.limiter;
    if (limiter !== undefined && typeof limiter.decide !== 'function') throw new TypeError('GrpcServerGuard: limiter must have decide(key) (a KeyedLimiter)');
    const keyOf = limitKey(o.limitBy ?? grpcServerGuardDefaults.limitBy);
    const breakers = this.breakerSource('GrpcServerGuard', o.breakers);
    const shared: Shared = { stats: this.calls, clock, isFailure, shedder, limiter, keyOf, breakers };
    this.interceptor = (descriptor, call) => new GuardedServerCall(call, shared, descriptor.path);
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
