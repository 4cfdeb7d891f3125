/**
 * The one file that touches `@grpc/grpc-js`'s `experimental` namespace (resolver registration, load
 * balancer registration, the leaf balancer, pickers). That namespace changes shape between minors —
 * 1.14 hands resolvers and policies `StatusOr<Endpoint[]>` lists — so everything the rest of
 * bulwark/grpc needs from it is named here, and the version check (version.ts) runs before any use.
 */
import { experimental, connectivityState, status } from '@grpc/grpc-js';
import type { ChannelOptions, Metadata } from '@grpc/grpc-js';
import type { ServiceConfig } from '@grpc/grpc-js/build/src/service-config.js';
import { ensureGrpcJs } from './version.js';

export type Endpoint = experimental.Endpoint;
export type GrpcUri = experimental.GrpcUri;
export type ResolverListener = experimental.ResolverListener;
export type GrpcResolver = experimental.Resolver;
export type LoadBalancer = experimental.LoadBalancer;
export type ChannelControlHelper = experimental.ChannelControlHelper;
export type TypedLoadBalancingConfig = experimental.TypedLoadBalancingConfig;
export type GrpcPicker = experimental.Picker;
export type PickArgs = experimental.PickArgs;
export type PickResult = experimental.PickResult;
export type StatusOr<T> = experimental.StatusOr<T>;
export type LeafBalancer = experimental.LeafLoadBalancer;
export type { ServiceConfig, ChannelOptions, Metadata };

export const ConnectivityState = connectivityState;
export const Status = status;
export const PickResultType = experimental.PickResultType;

/** leaf makes grpc-js's per-endpoint balancer (pick-first over the endpoint's addresses). */
export function leaf(endpoint: Endpoint, helper: ChannelControlHelper, options: ChannelOptions, note: string): LeafBalancer {
  return new experimental.LeafLoadBalancer(endpoint, helper, options, note);
}

/** childHelper wraps a channel helper, replacing `updateState`. */
export function childHelper(parent: ChannelControlHelper, updateState: ChannelControlHelper['updateState']): ChannelControlHelper {
  return experimental.createChildChannelControlHelper(parent, { updateState });
}

/** queuePicker holds picks until the balancer has a READY endpoint. */
export function queuePicker(balancer: LoadBalancer): GrpcPicker {
  return new experimental.QueuePicker(balancer);
}

/** unavailablePicker fails picks with UNAVAILABLE and `details`. */
export function unavailablePicker(details: string): GrpcPicker {
  return new experimental.UnavailablePicker({ code: status.UNAVAILABLE, details });
}

/** okList / errorList build the StatusOr a resolver listener takes. */
export function okList<T>(value: T): StatusOr<T> {
  return experimental.statusOrFromValue(value);
}

/** errorList builds a failed resolution (UNAVAILABLE with `details`). */
export function errorList<T>(details: string): StatusOr<T> {
  return experimental.statusOrFromError({ code: status.UNAVAILABLE, details });
}

/** endpointKey is the `host:port` of an endpoint's first address (IPv6 hosts in brackets). */
export function endpointKey(endpoint: Endpoint): string {
  const a = endpoint.addresses[0];
  if (a === undefined) return '';
  return 'port' in a ? (a.host.includes(':') ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`) : a.path;
}

/** toEndpoint parses `host:port` (or `[v6]:port`) into an endpoint. */
export function toEndpoint(address: string): Endpoint | undefined {
  const hp = experimental.splitHostPort(address);
  if (hp === null || hp.port === undefined) return undefined;
  return { addresses: [{ host: hp.host, port: hp.port }] };
}

/** ResolverClass is what grpc-js constructs per channel for a scheme. */
export interface ResolverClass {
  new (target: GrpcUri, listener: ResolverListener, options: ChannelOptions): GrpcResolver;
  getDefaultAuthority(target: GrpcUri): string;
}

let resolverRegistered = false;
const policies = new Set<string>();

/** registerResolver registers the resolver class for `scheme` once per process. */
export function registerResolver(scheme: string, resolver: ResolverClass): void {
  ensureGrpcJs();
  if (resolverRegistered) return;
  experimental.registerResolver(scheme, resolver);
  resolverRegistered = true;
}

/** registerPolicy registers a load-balancing policy once per process. */
export function registerPolicy(
  name: string,
  balancer: new (helper: ChannelControlHelper) => LoadBalancer,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- grpc-js's constructor type
  config: { new (...args: any): TypedLoadBalancingConfig; createFromJson(obj: unknown): TypedLoadBalancingConfig },
): void {
  ensureGrpcJs();
  if (policies.has(name)) return;
  experimental.registerLoadBalancerType(name, balancer, config);
  policies.add(name);
}
