/**
 * The metric families of the call-path components — ResilientClient, the policies (Retry, RetryBudget,
 * Bulkhead, Timeout, Fallback), HttpGuard — and of the cache (Group, HttpPool); see adapters.ts for how
 * components are recognised. @internal
 */
import type { HistogramObserver, MetricsDescription } from './types.js';
import { counter, gauge, histogram, type Any } from './spec.js';

type Observe = HistogramObserver;

/** ServiceObservers are a client's bound histogram observers of one service: attempts ok/error, calls by outcome. */
interface ServiceObservers {
  ok: Observe;
  error: Observe;
  succeeded: Observe;
  fallback: Observe;
  failed: Observe;
}

/** Answered calls a tracked client notes before folding them into its histograms. */
const PENDING = 256;

export function client(c: Any): MetricsDescription {
  let fold: (() => void) | undefined;
  return {
    kind: 'ResilientClient',
    families: [
      counter('client_calls_total', 'Calls a ResilientClient made, by outcome: succeeded, fallback (answered by the fallback) or failed.', ['outcome']),
      counter('client_attempts_total', 'Attempts sent to instances, by outcome: ok or error; rejected ones were refused by a breaker without calling.', ['outcome']),
      counter('client_retries_total', 'Retries sent (attempts after the first).'),
      counter('client_retries_refused_total', 'Retries the retry budget refused.'),
      counter('client_bulkhead_rejections_total', 'Calls the bulkhead refused (too many in flight for the service).'),
      histogram('client_attempt_duration_seconds', 'Duration of attempts, by service and outcome (ok or error).', ['service', 'outcome']),
      histogram(
        'client_call_duration_seconds',
        'Duration of calls, by service and outcome (succeeded, fallback or failed): from the first attempt’s start to the last one’s end, or to the fallback’s answer.',
        ['service', 'outcome'],
      ),
    ],
    collect: (emit) => {
      fold?.(); // the answered calls noted since the last scrape go into their histograms first
      const s = c.stats();
      emit('client_calls_total', { outcome: 'succeeded' }, s.succeeded);
      emit('client_calls_total', { outcome: 'fallback' }, s.fallbacks);
      emit('client_calls_total', { outcome: 'failed' }, s.failed);
      emit('client_attempts_total', { outcome: 'ok' }, s.attempts - s.failedAttempts);
      emit('client_attempts_total', { outcome: 'error' }, s.failedAttempts);
      emit('client_attempts_total', { outcome: 'rejected' }, s.breakerRejections);
      emit('client_retries_total', {}, s.retries);
      emit('client_retries_refused_total', {}, s.retriesRefused);
      emit('client_bulkhead_rejections_total', {}, s.bulkheadRejections);
    },
    subscribe: (sink) => {
      // Durations come through the client's measure hook as plain arguments (no event object per
      // attempt), into bound observers per (service, outcome): no label hashing, and one Map lookup per
      // call at most (none while calls go to the same service as the last one).
      const bind = (family: string, service: string, outcome: string): Observe => {
        const labels = { service, outcome };
        return sink.observer?.(family, labels) ?? { observe: (v: number) => sink.observe(family, labels, v) };
      };
      const byService = new Map<string, ServiceObservers>();
      let lastService = '';
      let last: ServiceObservers | undefined;
      const observers = (service: string): ServiceObservers => {
        if (service === lastService && last !== undefined) return last;
        let o = byService.get(service);
        if (o === undefined) {
          const a = 'client_attempt_duration_seconds';
          const k = 'client_call_duration_seconds';
          o = { ok: bind(a, service, 'ok'), error: bind(a, service, 'error'), succeeded: bind(k, service, 'succeeded'), fallback: bind(k, service, 'fallback'), failed: bind(k, service, 'failed') };
          byService.set(service, o);
        }
        lastService = service;
        return (last = o);
      };
      // An answered call (the hot path) is only noted: its service and two durations in arrays, folded
      // into the histograms when they are full and at each scrape, in a loop that costs less per call.
      const services = new Array<string>(PENDING).fill('');
      const times = new Float64Array(2 * PENDING);
      let n = 0;
      fold = () => {
        for (let i = 0; i < n; i++) {
          const o = observers(services[i]!);
          o.ok.observe(times[2 * i]! / 1000);
          o.succeeded.observe(times[2 * i + 1]! / 1000);
        }
        n = 0;
      };
      return c.measure({
        answered: (service: string, latencyMs: number, callMs: number): void => {
          const i = n;
          services[i] = service;
          times[2 * i] = latencyMs;
          times[2 * i + 1] = callMs;
          if ((n = i + 1) === PENDING) fold!();
        },
        attempt: (service: string, failed: boolean, latencyMs: number): void => {
          const o = observers(service);
          (failed ? o.error : o.ok).observe(latencyMs / 1000);
        },
        call: (service: string, outcome: string, durationMs: number): void => {
          const o = observers(service);
          (outcome === 'fallback' ? o.fallback : o.failed).observe(durationMs / 1000);
        },
      });
    },
    snapshot: () => ({ ...c.stats(), openServices: typeof c.openServices === 'function' ? c.openServices().map((s: Any) => s.name) : [] }),
    closed: () => c.closing !== undefined,
  };
}

export function retry(c: Any): MetricsDescription {
  return {
    kind: 'Retry',
    families: [counter('retry_retries_total', 'Retries a Retry policy scheduled after a failed attempt.')],
    subscribe: (sink) => c.onRetry(() => sink.inc('retry_retries_total', {})),
    snapshot: () => ({ maxAttempts: c.maxAttempts }),
  };
}

export function retryBudget(c: Any): MetricsDescription {
  return {
    kind: 'RetryBudget',
    families: [
      gauge('retry_budget_balance', 'Retries a RetryBudget would allow right now.'),
      gauge('retry_budget_window_calls', 'Calls counted in the budget window.'),
      gauge('retry_budget_window_retries', 'Retries allowed in the budget window.'),
      counter('retry_budget_refused_total', 'Retries a RetryBudget refused.'),
    ],
    collect: (emit) => {
      const s = c.stats();
      emit('retry_budget_balance', {}, s.balance);
      emit('retry_budget_window_calls', {}, s.calls);
      emit('retry_budget_window_retries', {}, s.retries);
      emit('retry_budget_refused_total', {}, s.refused);
    },
  };
}

export function bulkhead(c: Any): MetricsDescription {
  return {
    kind: 'Bulkhead',
    families: [
      gauge('bulkhead_active', 'Calls a Bulkhead runs now.'),
      gauge('bulkhead_queued', 'Calls waiting for a Bulkhead slot now.'),
      counter('bulkhead_rejected_total', 'Calls a Bulkhead rejected (every slot and queue place taken).'),
    ],
    collect: (emit) => {
      const s = c.stats();
      emit('bulkhead_active', {}, s.active);
      emit('bulkhead_queued', {}, s.queued);
      emit('bulkhead_rejected_total', {}, s.rejected);
    },
  };
}

export function timeout(c: Any): MetricsDescription {
  return {
    kind: 'Timeout',
    families: [
      gauge('timeout_seconds', 'The deadline a Timeout policy gives each call.'),
      counter('timeout_calls_total', 'Calls a Timeout policy ran.'),
      counter('timeout_timeouts_total', 'Calls a Timeout policy ran that ended in TimeoutError.'),
    ],
    collect: (emit) => {
      emit('timeout_seconds', {}, c.timeoutMs / 1000);
      if (typeof c.stats !== 'function') return;
      const s = c.stats();
      emit('timeout_calls_total', {}, s.calls);
      emit('timeout_timeouts_total', {}, s.timeouts);
    },
    snapshot: () => ({ timeoutMs: c.timeoutMs, ...(typeof c.stats === 'function' ? c.stats() : {}) }),
  };
}

export function fallback(c: Any): MetricsDescription {
  return {
    kind: 'Fallback',
    families: [counter('fallback_calls_total', 'Failed calls a Fallback handled, by what answered: last_good, chain, value or none (rethrown).', ['source'])],
    subscribe: (sink) => c.onFallback((e: Any) => sink.inc('fallback_calls_total', { source: String(e.source).replace('-', '_') })),
    snapshot: () => ({}),
  };
}

export function httpGuard(c: Any): MetricsDescription {
  const results: [string, string][] = [
    ['passed', 'passed'],
    ['skipped', 'skipped'],
    ['limited', 'limited'],
    ['shed', 'shed'],
    ['broken', 'broken'],
    ['failed_open', 'failedOpen'],
    ['aborted', 'aborted'],
  ];
  return {
    kind: 'HttpGuard',
    families: [
      counter(
        'http_guard_requests_total',
        'Requests an HttpGuard handled, by result: passed, skipped, limited (429), shed (503), broken (503), failed_open or aborted.',
        ['result'],
      ),
    ],
    collect: (emit) => {
      const s = c.stats();
      for (const [label, field] of results) emit('http_guard_requests_total', { result: label }, s[field]);
    },
  };
}

const GROUP_TOTALS: [string, string, string][] = [
  ['cache_gets_total', 'gets', 'Calls to a cache Group’s get.'],
  ['cache_hits_total', 'cacheHits', 'Gets answered from the main or hot cache.'],
  ['cache_peer_loads_total', 'peerLoads', 'Values (or not-founds) a peer answered.'],
  ['cache_peer_errors_total', 'peerErrors', 'Peer requests that failed.'],
  ['cache_loads_total', 'loads', 'Gets that missed the caches (before deduplication).'],
  ['cache_loads_deduped_total', 'loadsDeduped', 'Loads after singleflight deduplication.'],
  ['cache_local_loads_total', 'localLoads', 'Getter calls on this node.'],
  ['cache_local_load_errors_total', 'localLoadErrs', 'Getter calls that failed (not counting not-found).'],
  ['cache_server_requests_total', 'serverRequests', 'Requests from peers this node served.'],
  ['cache_evictions_total', 'evictions', 'Entries evicted from the main and hot caches (or expired).'],
];

export function cacheGroup(c: Any): MetricsDescription {
  return {
    kind: 'Group',
    families: [
      ...GROUP_TOTALS.map(([n, , h]) => counter(n, h)),
      gauge('cache_bytes', 'Bytes held by a cache Group, by cache: main or hot.', ['cache']),
      gauge('cache_items', 'Entries held by a cache Group, by cache: main or hot.', ['cache']),
    ],
    collect: (emit) => {
      const s = c.stats();
      for (const [n, field] of GROUP_TOTALS) emit(n, {}, s[field]);
      const cs = c.cacheStats();
      emit('cache_bytes', { cache: 'main' }, cs.main.bytes);
      emit('cache_bytes', { cache: 'hot' }, cs.hot.bytes);
      emit('cache_items', { cache: 'main' }, cs.main.length);
      emit('cache_items', { cache: 'hot' }, cs.hot.length);
    },
    snapshot: () => {
      const s = c.stats();
      return { ...s, hitRatio: s.gets > 0 ? s.cacheHits / s.gets : 0, caches: c.cacheStats() };
    },
  };
}

export function httpPool(c: Any): MetricsDescription {
  return {
    kind: 'HttpPool',
    families: [gauge('cache_ring_members', 'Nodes on a cache HttpPool’s hash ring, this one included.')],
    collect: (emit) => emit('cache_ring_members', {}, c.members().length),
    snapshot: () => ({ self: c.self, members: [...c.members()] }),
  };
}

