/**
 * GrpcClientGuard: the client interceptor for what is per method (go-zero's zrpc client breaker
 * interceptor, clientinterceptors/breakerinterceptor.go): a breaker per `target + method`, a default
 * deadline when the caller set none, and call counts by method and code.
 *
 * A breaker that refuses decides before `nextCall`: no channel call is made, and the caller gets
 * UNAVAILABLE at once with `ERR_BREAKER_OPEN` at the start of the details and in the `bulwark-code`
 * trailer. A finished call counts as a failure for the breaker when its code is one of `failureCodes`
 * (go-zero's by default); CANCELLED (the caller gave up) counts as neither.
 */
import { InterceptingCall, Metadata, status } from '@grpc/grpc-js';
import type { Interceptor, InterceptorOptions, StatusObject } from '@grpc/grpc-js';
import type { InterceptingCallInterface } from '@grpc/grpc-js/build/src/client-interceptors.js';
import type { InterceptingListener, MessageContext } from '@grpc/grpc-js/build/src/call-interface.js';
import type { AdmissionToken } from '../core/admission.js';
import { systemClock, type Clock } from '../core/clock.js';
import { BreakerOpenError } from '../core/errors.js';
import { clockOption, integer, options as checkOptions, type OptionKeys } from '../core/validate.js';
import type { CallStats } from './stats.js';
import { GuardBase } from './guard-base.js';
import { failureSet, refusal } from './status.js';
import type { GrpcBreakerSource } from './types.js';
import { ensureGrpcJs } from './version.js';

/** The keys of GrpcClientGuardOptions, all of them: any other is refused (see `options`). */
const GRPC_CLIENT_GUARD_KEYS = {
  target: true,
  breakers: true,
  failureCodes: true,
  defaultDeadlineMs: true,
  clock: true,
} as const satisfies OptionKeys<GrpcClientGuardOptions>;

/** GrpcClientGuardOptions configures a GrpcClientGuard. */
export interface GrpcClientGuardOptions {
  /** Names the breakers: each is `target + method path` (e.g. `bulwark:///greeter/helloworld.Greeter/SayHello`). Defaults to ''. */
  target?: string;
  /** Where the per-method breakers come from, or false for none. Defaults to a new BreakerGroup of SreBreakers (go-zero's breaker). */
  breakers?: GrpcBreakerSource | false;
  /** The status codes that count as a failure. Defaults to go-zero's: DEADLINE_EXCEEDED, INTERNAL, UNAVAILABLE, DATA_LOSS, UNIMPLEMENTED, RESOURCE_EXHAUSTED. */
  failureCodes?: readonly number[];
  /** The deadline given to calls that set none, in milliseconds, or 0 for none. Defaults to 2 000 (zrpc's default timeout). */
  defaultDeadlineMs?: number;
  /** Times calls for the statistics. Defaults to `systemClock`. */
  clock?: Clock;
}

/** Defaults for GrpcClientGuardOptions. */
export const grpcClientGuardDefaults = Object.freeze({ target: '', defaultDeadlineMs: 2_000 });

/** A call refused before the channel saw it: it answers `status` once started. */
class RefusedCall implements InterceptingCallInterface {
  constructor(private readonly st: StatusObject) {}
  start(_metadata: Metadata, listener?: { onReceiveStatus?: (s: StatusObject) => void }): void {
    process.nextTick(() => listener?.onReceiveStatus?.(this.st));
  }
  cancelWithStatus(): void {}
  getPeer(): string {
    return '';
  }
  sendMessageWithContext(): void {}
  sendMessage(): void {}
  startRead(): void {}
  halfClose(): void {}
  getAuthContext(): null {
    return null;
  }
}

/** What every guarded call of one GrpcClientGuard shares. */
interface Shared {
  readonly stats: CallStats;
  readonly clock: Clock;
  readonly isFailure: (code: number) => boolean;
}

/**
 * GuardedCall is one admitted call: it forwards everything to the next call in the chain and is its
 * listener too, settling the breaker token and the statistics when the status arrives. It is an
 * InterceptingCall (what the Interceptor type returns) whose methods all forward directly: one object
 * per call, where an InterceptingCall with a requester adds a layer costing a requester copy, listener
 * wrappers, three bound functions and a closure per hook on every call.
 */
class GuardedCall extends InterceptingCall implements InterceptingListener {
  private listener: Partial<InterceptingListener> | undefined;

  constructor(
    private readonly next: InterceptingCallInterface,
    private readonly shared: Shared,
    private readonly method: string,
    private token: AdmissionToken | undefined,
    private readonly startedAt: number,
  ) {
    super(next); // no requester: grpc-js's shared default, nothing copied
  }

  override start(metadata: Metadata, listener?: Partial<InterceptingListener>): void {
    this.listener = listener;
    this.next.start(metadata, this);
  }
  onReceiveMetadata(metadata: Metadata): void {
    this.listener?.onReceiveMetadata?.(metadata);
  }
  onReceiveMessage(message: unknown): void {
    this.listener?.onReceiveMessage?.(message);
  }
  onReceiveStatus(st: StatusObject): void {
    const code = st.code;
    const token = this.token;
    const shared = this.shared;
    if (token !== undefined) {
      this.token = undefined;
      if (code === status.CANCELLED) token.release();
      else if (shared.isFailure(code)) token.failure();
      else token.success();
    }
    shared.stats.record(this.method, code, shared.clock.now() - this.startedAt);
    this.listener?.onReceiveStatus?.(st);
  }
  override cancelWithStatus(code: status, details: string): void {
    this.next.cancelWithStatus(code, details);
  }
  override getPeer(): string {
    return this.next.getPeer();
  }
  override sendMessageWithContext(context: MessageContext, message: unknown): void {
    this.next.sendMessageWithContext(context, message);
  }
  override sendMessage(message: unknown): void {
    this.next.sendMessage(message);
  }
  override startRead(): void {
    this.next.startRead();
  }
  override halfClose(): void {
    this.next.halfClose();
  }
  override getAuthContext(): ReturnType<InterceptingCallInterface['getAuthContext']> {
    return this.next.getAuthContext();
  }
}

/** GrpcClientGuard holds the per-method client guards; pass `guard.interceptor` in the client's `interceptors`. */
export class GrpcClientGuard extends GuardBase {
  /** interceptor is the grpc-js client interceptor. */
  readonly interceptor: Interceptor;

  constructor(options?: GrpcClientGuardOptions) {
    super('client');
    ensureGrpcJs();
    const o = checkOptions('GrpcClientGuard', options, GRPC_CLIENT_GUARD_KEYS);
    const target = o.target ?? grpcClientGuardDefaults.target;
    if (typeof target !== 'string') throw new TypeError(`GrpcClientGuard: target must be a string, got ${typeof target}`);
    const deadlineMs = integer('GrpcClientGuard', 'defaultDeadlineMs', o.defaultDeadlineMs ?? grpcClientGuardDefaults.defaultDeadlineMs, 0);
    const clock = clockOption('GrpcClientGuard', o.clock, systemClock);
    const isFailure = failureSet('GrpcClientGuard', o.failureCodes);
    const breakers = this.breakerSource('GrpcClientGuard', o.breakers);
    const stats = this.calls;
    const shared: Shared = { stats, clock, isFailure };
    /** Breaker names by method path, so a call does not build `target + method` again. */
    const names = new Map<string, string>();

    this.interceptor = (options: InterceptorOptions, nextCall) => {
      const method = options.method_definition.path;
      let token: AdmissionToken | undefined;
      if (breakers !== undefined) {
        let name = names.get(method);
        if (name === undefined) names.set(method, (name = target + method));
        const breaker = breakers.get(name);
        if (breaker !== undefined) {
          try {
            token = breaker.admit();
          } catch (err) {
            if (!(err instanceof BreakerOpenError)) throw err;
            stats.record(method, status.UNAVAILABLE, 0, true);
            return new InterceptingCall(new RefusedCall(refusal(status.UNAVAILABLE, BreakerOpenError.code, `breaker ${name} is open`)));
          }
        }
      }
      // grpc-js hands each call's interceptor chain its own options object: set the deadline in place.
      if (deadlineMs > 0 && options.deadline === undefined) options.deadline = Date.now() + deadlineMs;
      return new GuardedCall(nextCall(options), shared, method, token, clock.now());
    };
  }
}
