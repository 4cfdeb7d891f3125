/**
 * The metric families of a ResilientClient — its calls, attempts, retries and their durations — and of
 * its parts: its breakers (the BreakerGroup's families), each open service's balancer, and the registry
 * cache it reads. One `track(client)` exports what explains its calls. @internal
 */
import {
  observerPair,
  type HistogramObserver,
  type HistogramPairObserver,
  type MetricFamilySpec,
  type MetricsContext,
  type MetricsDescription,
  type MetricsPart,
  type Trackable,
} from '../core/metrics-description.js';
import type { Disposer } from '../core/events.js';
import { balancerFamilies } from '../balancer/balancer-metrics.js';
import type { ClientStats } from './stats.js';
import type { ClientMeasure } from './types.js';

type Observe = HistogramObserver;

/**
 * ServiceObservers are a client's bound histogram observers of one service: attempts ok/error, calls by
 * outcome, and `answered`, the attempt ok and the call succeeded series as one pair (the hot path).
 */
interface ServiceObservers {
  answered: HistogramPairObserver;
  ok: Observe;
  error: Observe;
  succeeded: Observe;
  fallback: Observe;
  failed: Observe;
}

const counter = (name: string, help: string, labelNames: string[] = []): MetricFamilySpec => ({ name, type: 'counter', help, labelNames });
const histogram = (name: string, help: string, labelNames: string[]): MetricFamilySpec => ({ name, type: 'histogram', help, labelNames });

const CLIENT_FAMILIES: readonly MetricFamilySpec[] = [
  counter('client_calls_total', 'Calls a ResilientClient made, by outcome: succeeded, fallback (answered by the fallback) or failed.', ['outcome']),
  counter('client_attempts_total', 'Attempts sent to instances, by outcome: ok or error; rejected ones were refused by a breaker without calling.', [
    'outcome',
  ]),
  counter('client_retries_total', 'Retries sent (attempts after the first).'),
  counter('client_retries_refused_total', 'Retries the retry budget refused.'),
  counter('client_bulkhead_rejections_total', 'Calls the bulkhead refused (too many in flight for the service).'),
  histogram('client_attempt_duration_seconds', 'Duration of attempts, by service and outcome (ok or error).', ['service', 'outcome']),
  histogram(
    'client_call_duration_seconds',
    'Duration of calls, by service and outcome (succeeded, fallback or failed): from the first attempt’s start to the last one’s end, or to the fallback’s answer.',
    ['service', 'outcome'],
  ),
];

/** ClientSource is a ResilientClient as its description reads it. */
interface ClientSource {
  readonly breakers: Trackable;
  /** The client's registry cache (undefined when it has none to describe). */
  readonly cache: Trackable | undefined;
  stats(): ClientStats;
  measure(m: ClientMeasure): Disposer;
  /** flush hands the measures the durations the client holds back (AnsweredBatch). */
  flush(): void;
  openServices(): Iterable<{ readonly name: string; readonly balancer: object }>;
  closed(): boolean;
}

/** describes tells whether a part describes itself. */
const describes = (x: object): x is Trackable => typeof (x as Partial<Trackable>).describeMetrics === 'function';

/**
 * describeClient answers a ResilientClient's description. Its parts are exported as parts (the registry
 * describes them, once each: see MetricsDescription.parts): its breakers (members named `<service>` and
 * `<service>/<instance id>`, with `group` = the client's name), each open service's balancer, whatever
 * it is (`name` = the service, `group` = the client's name), and the registry cache (named for the
 * client). Their usual families are listed as the client's own, registered in this order when it is
 * tracked: a balancer of another kind brings its families when it first appears.
 */
export function describeClient(c: ClientSource, ctx: MetricsContext): MetricsDescription {
  const group = c.breakers.describeMetrics(ctx);
  const cache = c.cache?.describeMetrics(ctx);
  const families = [...CLIENT_FAMILIES, ...group.families, ...balancerFamilies(ctx.instanceLabel), ...(cache?.families ?? [])];
  return {
    kind: 'ResilientClient',
    families: [...new Map(families.map((f) => [f.name, f])).values()],
    parts: function* (): Iterable<MetricsPart> {
      const name = ctx.name();
      yield { component: c.breakers, name };
      for (const service of c.openServices()) yield { component: service.balancer, name: service.name, group: name };
      if (c.cache !== undefined) yield { component: c.cache, name };
    },
    collect: (emit) => {
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
      // Durations come through the client's measure hook (answered calls in batches, the rest as plain
      // arguments: no event object per attempt), into bound observers per (service, outcome): no label
      // hashing, and one Map lookup per hand-over at most (none for the same service as the last one).
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
          // The pair first: it makes the two series it counts in (ok and succeeded then observe into them).
          const pair = sink.pairObserver?.({ family: a, labels: { service, outcome: 'ok' } }, { family: k, labels: { service, outcome: 'succeeded' } });
          const ok = bind(a, service, 'ok');
          const succeeded = bind(k, service, 'succeeded');
          o = {
            answered: pair ?? observerPair(ok, succeeded),
            ok,
            error: bind(a, service, 'error'),
            succeeded,
            fallback: bind(k, service, 'fallback'),
            failed: bind(k, service, 'failed'),
          };
          byService.set(service, o);
        }
        lastService = service;
        return (last = o);
      };
      return c.measure({
        // Answered calls (the hot path), handed over in batches by the client: both durations of each
        // into the service's pair of series, in call order.
        answered: (service: string, durations: Float64Array, n: number): void => {
          observers(service).answered.observeMs(durations, n);
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
    flush: () => c.flush(),
    snapshot: () => {
      const open = [...c.openServices()];
      return {
        ...c.stats(),
        openServices: open.map((s) => s.name),
        services: open.map((s) => {
          const b = s.balancer as { stats?(): unknown };
          return { service: s.name, balancer: describes(s.balancer) && typeof b.stats === 'function' ? b.stats() : undefined };
        }),
      };
    },
    closed: () => c.closed(),
  };
}
