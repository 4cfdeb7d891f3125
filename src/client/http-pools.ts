/**
 * The options of `ResilientClient.fetch`'s connections: one undici keep-alive pool per instance origin
 * (`http://host:port`), kept in the shared per-origin pool map (src/internal/origin-pools.ts) that the
 * cache's HttpPool uses too. The map is bounded (`maxPools`, least recently used closed first), and the
 * pools of instances that left the registry are closed, letting requests in flight finish.
 */
import type { Clock } from '../core/clock.js';
import { integer, options as checkOptions, positive, type OptionKeys } from '../core/validate.js';
import type { OriginPoolsOptions } from '../internal/origin-pools.js';
import type { HttpPoolsOptions } from './types.js';

/** The keys of HttpPoolsOptions, all of them: any other is refused (see `options`). */
const HTTP_KEYS = {
  connectionsPerInstance: true,
  keepAliveTimeoutMs: true,
  maxPools: true,
  connectTimeoutMs: true,
} as const satisfies OptionKeys<HttpPoolsOptions>;

export type { HttpPoolsOptions } from './types.js';

/** Defaults for HttpPoolsOptions. */
export const httpPoolsDefaults = Object.freeze({
  connectionsPerInstance: 64,
  keepAliveTimeoutMs: 4_000,
  maxPools: 1_024,
  connectTimeoutMs: 10_000,
});

/** httpPoolsOptions checks `options` and answers the options of the client's pool map. */
export function httpPoolsOptions(options: HttpPoolsOptions | undefined, clock: Clock): OriginPoolsOptions {
  const o = checkOptions('ResilientClient: http', options, HTTP_KEYS);
  const owner = 'ResilientClient';
  const connections = integer(owner, 'http.connectionsPerInstance', o.connectionsPerInstance ?? httpPoolsDefaults.connectionsPerInstance, 1, 65_536);
  const keepAliveTimeout = positive(owner, 'http.keepAliveTimeoutMs', o.keepAliveTimeoutMs ?? httpPoolsDefaults.keepAliveTimeoutMs);
  const connectTimeout = positive(owner, 'http.connectTimeoutMs', o.connectTimeoutMs ?? httpPoolsDefaults.connectTimeoutMs);
  const maxPools = integer(owner, 'http.maxPools', o.maxPools ?? httpPoolsDefaults.maxPools, 1, 1 << 20);
  return { owner: 'ResilientClient', pool: { connections, keepAliveTimeout, connectTimeout }, maxPools, clock };
}
