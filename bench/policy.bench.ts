/**
 * policy: the success path of each policy's execute, and of a wrap of several, against a bare
 * `await fn()` and cockatiel 3's equivalents. Every subject runs in its own process (see harness.ts).
 *
 * Targets (checked after the table): each of Retry, Bulkhead and Fallback is at least as fast as
 * cockatiel's equivalent; Timeout (shared deadlines) and wrap(fallback, retry, bulkhead, timeout) are
 * at least 10× faster than cockatiel's (which makes an AbortController and a timer per call); Retry's
 * success path costs at most 3× a bare await.
 *
 *   npm run bench -- policy
 */
import * as cockatiel from 'cockatiel';
import { atMost, bench, fasterBy } from './harness.js';
import { Bulkhead, Fallback, Retry, RetryBudget, Timeout, wrap } from '../src/policy/index.js';

/** The guarded work: an async function that answers at once. */
async function task(): Promise<number> {
  return 1;
}

/** The same work, declared with the signal parameter (every task gets the shared deadline signal now; this shows the declaration costs nothing). */
async function taskWithSignal(_signal: AbortSignal): Promise<number> {
  return 1;
}

const subjects: Record<string, () => { op: () => unknown; async: true }> = {
  'bare await fn()': () => ({ op: () => task(), async: true }),

  'Retry.execute': () => {
    const p = new Retry({ maxAttempts: 3 });
    return { op: () => p.execute(task), async: true };
  },
  'Retry.execute + RetryBudget': () => {
    const p = new Retry({ maxAttempts: 3, budget: new RetryBudget() });
    return { op: () => p.execute(task), async: true };
  },
  'cockatiel retry': () => {
    const p = cockatiel.retry(cockatiel.handleAll, { maxAttempts: 2, backoff: new cockatiel.ExponentialBackoff() });
    return { op: () => p.execute(task), async: true };
  },

  'Timeout.execute': () => {
    const p = new Timeout({ timeoutMs: 1_000 });
    return { op: () => p.execute(task), async: true };
  },
  'Timeout.execute (task takes the signal)': () => {
    const p = new Timeout({ timeoutMs: 1_000 });
    return { op: () => p.execute(taskWithSignal), async: true };
  },
  'cockatiel timeout (cooperative)': () => {
    const p = cockatiel.timeout(1_000, cockatiel.TimeoutStrategy.Cooperative);
    return { op: () => p.execute(task), async: true };
  },
  'cockatiel timeout (aggressive)': () => {
    const p = cockatiel.timeout(1_000, cockatiel.TimeoutStrategy.Aggressive);
    return { op: () => p.execute(task), async: true };
  },

  'Bulkhead.execute': () => {
    const p = new Bulkhead({ maxConcurrent: 10, maxQueued: 10 });
    return { op: () => p.execute(task), async: true };
  },
  'cockatiel bulkhead': () => {
    const p = cockatiel.bulkhead(10, 10);
    return { op: () => p.execute(task), async: true };
  },

  'Fallback.execute': () => {
    const p = new Fallback({ value: 0 });
    return { op: () => p.execute(task), async: true };
  },
  'Fallback.execute (lastGood, maxAgeMs)': () => {
    const p = new Fallback({ value: 0, lastGood: { maxAgeMs: 60_000 } });
    return { op: () => p.execute(task), async: true };
  },
  'cockatiel fallback': () => {
    const p = cockatiel.fallback(cockatiel.handleAll, 0);
    return { op: () => p.execute(task), async: true };
  },

  'wrap(fallback, retry, bulkhead, timeout)': () => {
    const p = wrap(
      new Fallback({ value: 0 }),
      new Retry({ maxAttempts: 3, budget: new RetryBudget() }),
      new Bulkhead({ maxConcurrent: 10, maxQueued: 10 }),
      new Timeout({ timeoutMs: 1_000 }),
    );
    return { op: () => p.execute(task), async: true };
  },
  'cockatiel wrap(fallback, retry, bulkhead, timeout)': () => {
    const p = cockatiel.wrap(
      cockatiel.fallback(cockatiel.handleAll, 0),
      cockatiel.retry(cockatiel.handleAll, { maxAttempts: 2, backoff: new cockatiel.ExponentialBackoff() }),
      cockatiel.bulkhead(10, 10),
      cockatiel.timeout(1_000, cockatiel.TimeoutStrategy.Aggressive),
    );
    return { op: () => p.execute(task), async: true };
  },
};

await bench('policy: success path of execute (async task answering at once)', {
  baseline: 'bare await fn()',
  subjects,
  targets: [
    fasterBy('Retry.execute ≥ 1× cockatiel retry', 'Retry.execute', 'cockatiel retry', 1),
    atMost('Retry.execute ≤ 3× a bare await', 'Retry.execute', 'bare await fn()', 3),
    fasterBy('Timeout.execute ≥ 10× faster than cockatiel timeout (cooperative)', 'Timeout.execute', 'cockatiel timeout (cooperative)', 10),
    fasterBy('Bulkhead.execute ≥ 1× cockatiel bulkhead', 'Bulkhead.execute', 'cockatiel bulkhead', 1),
    fasterBy('Fallback.execute ≥ 1× cockatiel fallback', 'Fallback.execute', 'cockatiel fallback', 1),
    fasterBy(
      "wrap(fallback, retry, bulkhead, timeout) ≥ 10× faster than cockatiel's",
      'wrap(fallback, retry, bulkhead, timeout)',
      'cockatiel wrap(fallback, retry, bulkhead, timeout)',
      10,
    ),
  ],
});
