/**
 * followService: the core Follower over one service of a Registry — the one list → watch → back off →
 * resync loop of the library (the balancer, cache membership and anything else that keeps a live
 * instance list use it). A service without instances (`NotFoundError`) lists as empty, not as an error.
 */
import { NotFoundError, isBulwarkError } from '../core/errors.js';
import { Follower, type FollowerOptions, type FollowerSource } from '../core/follower.js';
import type { Registry, RegistryEvent, ServiceInstance } from './types.js';

const EMPTY: readonly ServiceInstance[] = Object.freeze([]);

/** serviceSource is the Follower source of one service: its watch, and `getService` as the listing. */
export function serviceSource(registry: Pick<Registry, 'getService' | 'watch'>, service: string): FollowerSource<readonly ServiceInstance[], RegistryEvent> {
  return {
    watch: (signal, onReady) => registry.watch({ service, signal, onReady }),
    list: async (signal) => {
      try {
        return await registry.getService(service, { signal });
      } catch (err) {
        if (isBulwarkError(err, NotFoundError.code)) return EMPTY;
        throw err;
      }
    },
  };
}

/** ServiceFollowerOptions are the Follower's options without its source (the service is the source). */
export type ServiceFollowerOptions = Omit<FollowerOptions<readonly ServiceInstance[], RegistryEvent>, 'source'>;

/**
 * followService follows `service` of `registry` (a Registry or a RegistryCache; through a cache, the
 * cache's one watch of the service serves every follower): `onList` gets the whole list on start and
 * after every reconnect, `onEvent` each change in between. Close the answer to stop.
 */
export function followService(
  registry: Pick<Registry, 'getService' | 'watch'>,
  service: string,
  options: ServiceFollowerOptions,
): Follower<readonly ServiceInstance[], RegistryEvent> {
  return new Follower({ name: `follower of ${service}`, ...options, source: serviceSource(registry, service) });
}
