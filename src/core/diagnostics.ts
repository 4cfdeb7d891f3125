/**
 * diagnostics: bulwark's named `node:diagnostics_channel` channels, the one place where their names
 * and message shapes are defined (docs/diagnostics.md lists them with when each fires).
 *
 * This is Node's own instrumentation convention (undici publishes `undici:request:create`; lru-cache
 * `lru-cache:metrics`, and traces its fetches on a tracing channel): an APM agent, an OpenTelemetry
 * instrumentation or a log hook subscribes by name, with no reference to the component and no
 * dependency on bulwark:
 *
 *   import { subscribe } from 'node:diagnostics_channel';
 *   subscribe('bulwark:breaker:state', (m) => console.log(m));
 *
 * Names are `bulwark:<module>:<event>`. Every publish site checks `hasSubscribers` first and builds
 * the message only then, so a channel nobody listens to costs one property read where its event
 * happens. Messages are fresh plain objects (a component reference, a frozen instance list or an error
 * may sit inside); they carry keys of unbounded cardinality only where the event is about that key (a
 * limiter refusal carries the refused key, a cache load its key).
 *
 * Two operations are traced with a `TracingChannel` (Node ≥ 19.9 / 18.19, experimental in Node 20
 * but stable in shape): a client call (`bulwark:client:call`) and a cache load (`bulwark:cache:load`).
 * Their events are `tracing:<name>:start | end | asyncStart | asyncEnd | error` with one context object
 * per operation, to which Node adds `result` or `error`; a store bound to the `start` channel
 * (`channel.bindStore(als, …)`, what OpenTelemetry does to make a span current) is entered for the
 * operation, so what the operation does — each attempt, the getter's own I/O — runs inside it.
 *
 * A subscriber that throws does not break the component or the other subscribers: diagnostics_channel
 * catches the error and re-throws it on the next tick as an uncaught exception (Node's behaviour, not
 * bulwark's), which ends the process unless something handles `uncaughtException`. Subscribers must
 * not throw.
 */
import { channel, tracingChannel, type Channel, type TracingChannel } from 'node:diagnostics_channel';

/** The names of bulwark's channels (tracing channels by their base name: Node adds `tracing:` and the event). */
export const diagnosticsChannels = Object.freeze({
  /** A CircuitBreaker changed state. */
  breakerState: 'bulwark:breaker:state',
  /** A breaker refused a call (CircuitBreaker open or half-open and full; SreBreaker dropping). */
  breakerReject: 'bulwark:breaker:reject',
  /** A limiter refused a request. */
  limitRefused: 'bulwark:limit:refused',
  /** A Redis limiter switched between Redis and its in-process rescue. */
  limitMode: 'bulwark:limit:mode',
  /** An AdaptiveShedder dropped a call. */
  shedderDrop: 'bulwark:shedder:drop',
  /** A RegistryCache replaced a service's instances. */
  registryChange: 'bulwark:registry:change',
  /** A Balancer's view of an instance's health changed, or it entered or left panic mode. */
  balancerHealth: 'bulwark:balancer:health',
  /** A ResilientClient call (tracing channel). */
  clientCall: 'bulwark:client:call',
  /** One attempt of a ResilientClient call ended, or an instance's breaker refused it. */
  clientAttempt: 'bulwark:client:attempt',
  /** A cache Group loaded a key: from the owning peer or through the getter (tracing channel). */
  cacheLoad: 'bulwark:cache:load',
  /** An HttpGuard refused a request (429 or 503). */
  httpRefused: 'bulwark:http:refused',
  /** A gRPC call guarded by bulwark/grpc ended (client or server side). */
  grpcCall: 'bulwark:grpc:call',
  /** A Rules binder applied rules to a component. */
  rulesApplied: 'bulwark:rules:applied',
  /** A Rules binder refused a rule for a component (invalid, or its `reconfigure` threw): it keeps its last good settings. */
  rulesRefused: 'bulwark:rules:refused',
} as const);

/**
 * DiagnosticsChannel is the publishing side of a channel whose messages are `M`. Subscribe by name
 * (`subscribe(name, fn)` from `node:diagnostics_channel`): no reference to bulwark is needed.
 */
export interface DiagnosticsChannel<M> {
  readonly name: string | symbol;
  /** hasSubscribers is true when someone listens; publish sites check it before building a message. */
  readonly hasSubscribers: boolean;
  publish(message: M): void;
}

/** InstanceRef is what a message says of a service instance (a registry `ServiceInstance` is one). */
export interface InstanceRef {
  readonly id: string;
  readonly name: string;
  readonly address: string;
}

/**
 * BreakerStateMessage (`bulwark:breaker:state`): a CircuitBreaker moved `from` → `to`; an SreBreaker
 * publishes one when an operator isolates it (closed → open) and resets it (open → closed).
 */
export interface BreakerStateMessage {
  /** The breaker's name (its `name` option). */
  readonly breaker: string;
  readonly from: 'closed' | 'open' | 'half-open';
  readonly to: 'closed' | 'open' | 'half-open';
  /** Why, in words (`failure rate 60% ≥ 50% over 10 calls`, `isolated by an operator: <its reason>`, `reset`). */
  readonly reason: string;
  /** The breaker's clock reading at the change. */
  readonly at: number;
}

/** BreakerRejectMessage (`bulwark:breaker:reject`): a breaker refused a call. */
export interface BreakerRejectMessage {
  /** The breaker's name. */
  readonly breaker: string;
  /** `CircuitBreaker` or `SreBreaker`. */
  readonly kind: 'CircuitBreaker' | 'SreBreaker';
  /** The CircuitBreaker's state (`open`, or `half-open` with every probe taken); `dropping` for an SreBreaker. */
  readonly state: 'open' | 'half-open' | 'dropping';
  /** The operator's reason while the breaker is isolated (`isolate(reason)`); absent otherwise. */
  readonly isolatedReason?: string;
}

/** LimiterKind names the limiter classes that publish refusals. */
export type LimiterKind = 'TokenLimiter' | 'KeyedLimiter' | 'PeriodLimiter' | 'RedisTokenLimiter' | 'RedisPeriodLimiter';

/**
 * LimitRefusedMessage (`bulwark:limit:refused`): a limiter answered "no". It carries the refused key:
 * unbounded in number, so aggregate by `limiter` (or by a key class of your own), never by key.
 */
export interface LimitRefusedMessage {
  /** The limiter's class. */
  readonly limiter: LimiterKind;
  /** The limiter object itself (limiters have no name: tell yours apart by identity, e.g. a WeakMap). */
  readonly source: object;
  /** The refused key; undefined for a TokenLimiter (one bucket, no key). */
  readonly key: string | undefined;
  /** Tokens (or calls) asked for. */
  readonly n: number;
  /** For a Redis limiter, where the decision was made; undefined for in-process limiters. */
  readonly mode: 'redis' | 'rescue' | undefined;
}

/** LimitModeMessage (`bulwark:limit:mode`): a Redis limiter moved its decisions to `mode`. */
export interface LimitModeMessage {
  /** The limiter's class and key prefix, e.g. `RedisTokenLimiter(rl:)`. */
  readonly limiter: string;
  readonly mode: 'redis' | 'rescue';
  /** What sent decisions to rescue (an ioredis error, TimeoutError…); undefined when back on Redis. */
  readonly cause: unknown;
}

/** ShedderDropMessage (`bulwark:shedder:drop`): an AdaptiveShedder shed a call. */
export interface ShedderDropMessage {
  /** The shedder object (shedders have no name). */
  readonly source: object;
  /** Calls in flight when it dropped this one. */
  readonly inFlight: number;
  /** The moving average of calls in flight. */
  readonly avgInFlight: number;
}

/** GrpcCallMessage (`bulwark:grpc:call`): a gRPC call through a GrpcClientGuard or GrpcServerGuard ended. */
export interface GrpcCallMessage {
  /** Which guard saw it. */
  readonly side: 'client' | 'server';
  /** The full method path, e.g. `/greeter.Greeter/SayHello`. */
  readonly method: string;
  /** The status code's name, e.g. `OK`, `UNAVAILABLE`. */
  readonly code: string;
  /** How long the call took, in milliseconds. */
  readonly durationMs: number;
}

/** RegistryChangeMessage (`bulwark:registry:change`): a RegistryCache replaced a service's instances. */
export interface RegistryChangeMessage {
  readonly service: string;
  /** The new instances (frozen, shared with the cache's callers: do not keep them past the message if memory matters). */
  readonly instances: readonly InstanceRef[];
  /** `lookup` (a registry answer) or `watch` (a watch event). */
  readonly cause: 'lookup' | 'watch';
  /** The RegistryCache. */
  readonly source: object;
}

/** BalancerHealthMessage (`bulwark:balancer:health`): what changed in a Balancer's view of its instances' health. */
export interface BalancerHealthMessage {
  /** The service the balancer follows (undefined for a balancer over a fixed list). */
  readonly service: string | undefined;
  /** `ejected` / `returned` (outlier detection), `down` / `up` (active checks), `panic` (entered or left). */
  readonly type: 'ejected' | 'returned' | 'down' | 'up' | 'panic';
  /** The instance id (not for `panic`). */
  readonly id?: string;
  /** For `ejected`: how long the ejection lasts, in ms. */
  readonly untilMs?: number;
  /** For `panic`: whether the balancer is in panic mode now (too few healthy: picks go to all). */
  readonly panic?: boolean;
}

/**
 * ClientCallContext is the context of one traced `bulwark:client:call` (`call` and `fetch`), the same
 * object in its start, end, asyncStart, asyncEnd and error events; Node sets `result` or `error`.
 */
export interface ClientCallContext {
  readonly service: string;
  /** The call's routing key (ring hash affinity), if it has one. */
  readonly key: string | undefined;
  /** The value the call answered (set by Node before asyncStart). */
  result?: unknown;
  /** The error the call rejected with (set by Node before the error event). */
  error?: unknown;
}

/** ClientAttemptMessage (`bulwark:client:attempt`): one attempt of a call ended, or its instance's breaker refused it. */
export interface ClientAttemptMessage {
  readonly service: string;
  /** The instance tried. */
  readonly instance: InstanceRef;
  /** `ok`, `error` (it failed), or `rejected` (the instance's breaker refused: it was not called). */
  readonly outcome: 'ok' | 'error' | 'rejected';
  /** How long the attempt took in ms (0 when rejected). */
  readonly latencyMs: number;
  /** The failure, when `outcome` is not `ok`. */
  readonly error?: unknown;
}

/** CacheLoadContext is the context of one traced `bulwark:cache:load`: a key a Group did not hold, loaded once. */
export interface CacheLoadContext {
  /** The group's name. */
  readonly group: string;
  /** The key loaded (what the event is about: unbounded, never a metric label). */
  readonly key: string;
  /** `peer`: asked the owning peer; `local`: the getter ran on this node. */
  readonly source: 'peer' | 'local';
  /** The peer's URL, for `peer`. */
  readonly peer?: string;
  /** What the load answered (set by Node before asyncStart). */
  result?: unknown;
  /** The error the load failed with (set by Node before the error event). */
  error?: unknown;
}

/** HttpRefusedMessage (`bulwark:http:refused`): an HttpGuard answered 429 or 503 instead of the handler. */
export interface HttpRefusedMessage {
  /** 429 (limited) or 503 (overloaded, breaker open). */
  readonly status: number;
  /** `ERR_RATE_LIMITED`, `ERR_OVERLOADED` or `ERR_BREAKER_OPEN`. */
  readonly code: string;
  /** What `Retry-After` was made of, or undefined when no header was sent. */
  readonly retryAfterMs: number | undefined;
  /** The limiter key, for a 429 (unbounded: never a metric label). */
  readonly key: string | undefined;
}

/** RulesAppliedMessage (`bulwark:rules:applied`): a component now runs the rules at `keys`, as of store revision `revision`. */
export interface RulesAppliedMessage {
  /** The kind it was bound as (`token-limiter`, `circuit-breaker`, `client` …). */
  readonly kind: string;
  /** The name it was bound under. */
  readonly name: string;
  /** The store revision of the change. */
  readonly revision: number;
  /** The keys of the rules that changed for it at that revision. */
  readonly keys: readonly string[];
}

/** RulesRefusedMessage (`bulwark:rules:refused`): a rule was refused for a component, which keeps its last good settings. */
export interface RulesRefusedMessage {
  /** The kind the component was bound as. */
  readonly kind: string;
  /** The name it was bound under. */
  readonly name: string;
  /** The refused rule's key and revision. */
  readonly key: string;
  readonly revision: number;
  /** The field at fault, when one is. */
  readonly field: string | undefined;
  /** The validation message (the component's own). */
  readonly message: string;
  /** `ERR_RULE_INVALID` or `ERR_RULE_REFUSED`. */
  readonly code: string;
}

/** typed answers a named channel as the channel of the messages bulwark publishes on it. */
function typed<M>(name: string): DiagnosticsChannel<M> {
  const c: Channel = channel(name);
  return c;
}

/** The channel objects, held here so that the publish sites read `hasSubscribers` off a live reference. */
export const breakerStateChannel = typed<BreakerStateMessage>(diagnosticsChannels.breakerState);
export const breakerRejectChannel = typed<BreakerRejectMessage>(diagnosticsChannels.breakerReject);
export const limitRefusedChannel = typed<LimitRefusedMessage>(diagnosticsChannels.limitRefused);
export const limitModeChannel = typed<LimitModeMessage>(diagnosticsChannels.limitMode);
export const shedderDropChannel = typed<ShedderDropMessage>(diagnosticsChannels.shedderDrop);
export const registryChangeChannel = typed<RegistryChangeMessage>(diagnosticsChannels.registryChange);
export const balancerHealthChannel = typed<BalancerHealthMessage>(diagnosticsChannels.balancerHealth);
export const clientAttemptChannel = typed<ClientAttemptMessage>(diagnosticsChannels.clientAttempt);
export const httpRefusedChannel = typed<HttpRefusedMessage>(diagnosticsChannels.httpRefused);
export const grpcCallChannel = typed<GrpcCallMessage>(diagnosticsChannels.grpcCall);
export const rulesAppliedChannel = typed<RulesAppliedMessage>(diagnosticsChannels.rulesApplied);
export const rulesRefusedChannel = typed<RulesRefusedMessage>(diagnosticsChannels.rulesRefused);
export const clientCallChannel: TracingChannel<unknown, ClientCallContext> = tracingChannel(diagnosticsChannels.clientCall);
export const cacheLoadChannel: TracingChannel<unknown, CacheLoadContext> = tracingChannel(diagnosticsChannels.cacheLoad);

/**
 * quiet marks limiters whose refusals their owner publishes (a Redis limiter's rescue limiter, made
 * rarely), so that one refusal is one message. Read only when someone listens. (A KeyedLimiter's
 * buckets are marked with a field instead: they are made per key.) @internal
 */
const quiet = new WeakSet<object>();

/** quietLimiter marks `limiter` as one whose refusals its owner publishes; answers it. @internal */
export function quietLimiter<L extends object>(limiter: L): L {
  quiet.add(limiter);
  return limiter;
}

/** publishRefusal publishes a limiter's refusal, unless an owner publishes it. Call only when someone listens. @internal */
export function publishRefusal(limiter: LimiterKind, source: object, key: string | undefined, n: number, mode?: 'redis' | 'rescue'): void {
  if (quiet.has(source)) return;
  limitRefusedChannel.publish({ limiter, source, key, n, mode });
}

/** refusedAnswer tells whether a limiter's answer is a refusal: false, `allowed: false`, or `over-quota`. @internal */
export function refusedAnswer(r: unknown): boolean {
  return r === false || r === 'over-quota' || (r !== null && typeof r === 'object' && (r as { allowed?: unknown }).allowed === false);
}
