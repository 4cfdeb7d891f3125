/**
 * client: what `ResilientClient.call` adds over a bare call to an in-process function, on the success
 * path (discovery from memory, P2C pick over 3 instances, bulkhead, SreBreaker for the service,
 * CircuitBreaker for the instance, per-attempt timeout, retry with budget, balancer report), against
 * cockatiel 3's wrap of the same guards (without discovery or balancing). Targets (checked after the
 * table): the overhead of each ResilientClient subject (its ns/op − the bare call's) ≤ 2 µs, and the
 * client with defaults faster than cockatiel's wrap(retry, bulkhead, breaker, timeout).
 *
 * Run it compiled (`npm run bench -- client`): under tsx, esbuild's `keepNames` wraps every named
 * closure in `__name()` (an `Object.defineProperty` per closure made), which costs more than the
 * client itself.
 */
import * as cockatiel from 'cockatiel';
import { bench, fasterBy, type Target } from './harness.js';

import { MemoryRegistry } from '../src/registry/index.js';
import { ResilientClient } from '../src/client/index.js';

type Instance = { id: string; name: string; address: string };
/** The guarded work: an in-process function that answers at once and takes the attempt's signal. */
function task(_instance: Instance, _signal: AbortSignal): Promise<number> {
  return Promise.resolve(1);
}
const anInstance: Instance = { id: 'a', name: 'svc', address: '127.0.0.1:1' };
const neverAborted = new AbortController().signal;

async function client(options: Record<string, unknown>) {
  const registry = new MemoryRegistry();
  for (const id of ['a', 'b', 'c']) await registry.register({ id, name: 'svc', address: `127.0.0.1:${9000 + id.charCodeAt(0)}` });
  const c = new ResilientClient({ registry, ...options });
  await c.call('svc', task); // opens the service: first listing, watch
  return {
    op: () => c.call('svc', task),
    async: true as const,
    teardown: async () => {
      await c.close();
      await registry.close();
    },
  };
}

/** overheadAtMost: `subject`'s ns/op minus the bare call's is at most `maxNs`. */
function overheadAtMost(subject: string, maxNs: number): Target {
  return {
    label: `${subject}: overhead ≤ ${maxNs / 1000} µs`,
    check: (m) => {
      const value = m.ns(subject) - m.ns('bare call');
      return { value, ok: value <= maxNs, unit: ' ns' };
    },
  };
}

const DEFAULTS = 'ResilientClient.call (defaults: 10 s timeout, 3 attempts)';

await bench('client: ResilientClient.call over a bare in-process call (success path, 3 instances)', {
  baseline: 'bare call',
  targets: [
    overheadAtMost(DEFAULTS, 2_000),
    overheadAtMost('ResilientClient.call (no timeout)', 2_000),
    overheadAtMost('ResilientClient.call (no timeout, no retry)', 2_000),
    fasterBy(
      'ResilientClient.call (defaults) ≥ 1× cockatiel wrap(retry, bulkhead, breaker, timeout)',
      DEFAULTS,
      'cockatiel wrap(retry, bulkhead, breaker, timeout)',
      1,
    ),
  ],
  subjects: {
    'bare call': () => ({ op: () => task(anInstance, neverAborted), async: true }),
    [DEFAULTS]: () => client({}),
    'ResilientClient.call (no timeout)': () => client({ timeoutMs: 0 }),
    'ResilientClient.call (no timeout, no retry)': () => client({ timeoutMs: 0, maxAttempts: 1 }),
    'cockatiel wrap(retry, bulkhead, breaker, timeout)': () => {
      const p = cockatiel.wrap(
        cockatiel.retry(cockatiel.handleAll, { maxAttempts: 2, backoff: new cockatiel.ExponentialBackoff() }),
        cockatiel.bulkhead(1_000, 0),
        cockatiel.circuitBreaker(cockatiel.handleAll, { halfOpenAfter: 30_000, breaker: new cockatiel.ConsecutiveBreaker(5) }),
        cockatiel.timeout(10_000, cockatiel.TimeoutStrategy.Cooperative),
      );
      return { op: () => p.execute(({ signal }) => task(anInstance, signal)), async: true };
    },
    'cockatiel wrap(retry, bulkhead, breaker)': () => {
      const p = cockatiel.wrap(
        cockatiel.retry(cockatiel.handleAll, { maxAttempts: 2, backoff: new cockatiel.ExponentialBackoff() }),
        cockatiel.bulkhead(1_000, 0),
        cockatiel.circuitBreaker(cockatiel.handleAll, { halfOpenAfter: 30_000, breaker: new cockatiel.ConsecutiveBreaker(5) }),
      );
      return { op: () => p.execute(({ signal }) => task(anInstance, signal)), async: true };
    },
  },
});
