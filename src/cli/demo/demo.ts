/**
 * `bulwark demo`: a local fleet on embedded defaults (MemoryRegistry; no etcd, no Redis) that shows the
 * guarded-call flow at work, in the terminal and on a dashboard. Three services of two or three
 * instances on loopback (payments: healthy, flaky — 30 % of requests fail — and slow, 200 ms; orders;
 * stock) and a three-node cache cluster in front of an origin; callers call them at a bounded rate
 * through one ResilientClient. The dashboard's demo buttons kill and restore instances and cache nodes,
 * make an instance slow or failing, take the registry down and break the origin. A run without a
 * terminal (a test, CI) takes the registry down half-way by itself instead. A summary ends it.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import promClient from 'prom-client';
import { systemClock, type Clock } from '../../core/index.js';
import { BreakerGroup, CircuitBreaker, SreBreaker } from '../../breaker/index.js';
import { ResilientClient, type ServiceState } from '../../client/index.js';
import { dashboardHandler, type DashboardHandler } from '../../dashboard/index.js';
import { BulwarkMetrics } from '../../metrics/index.js';
import { RegistryCache } from '../../registry/index.js';
import { MemoryRuleStore, Rules } from '../../rules/index.js';
import { DemoFleet, fleetServices, type FleetInstance } from './fleet.js';
import type { FaultyRegistry } from './faulty-registry.js';
import { LatencyHistogram } from './histogram.js';
import { LiveView, renderFrame, type InstanceRow, type ViewOutput, type ViewSnapshot } from './view.js';

/** DemoOptions configures one run of the demo. */
export interface DemoOptions {
  /** How long callers call, in ms (Infinity: until `signal` aborts). Defaults to 20 000. */
  durationMs?: number;
  /** Callers calling at once. Defaults to 16. */
  concurrency?: number;
  /** Calls a second, all callers together (each caller also reads the cache once per call). Defaults to 100. */
  rate?: number;
  /**
   * Where the dashboard listens on 127.0.0.1 (0: a free port), or false for none. Its URL is the first
   * line printed. Defaults to 0.
   */
  dashboardPort?: number | false;
  /** Take the registry down half-way by itself (a run nobody can click through). Defaults to true without a terminal. */
  scriptedOutage?: boolean;
  /** Where the view and the summary go. Defaults to process.stdout. */
  output?: ViewOutput;
  /** Redraw in place (true) or print plain lines (false). Defaults to whether the output is a terminal. */
  interactive?: boolean;
  /** Stops the callers early (Ctrl-C); the summary is still printed. Defaults to none. */
  signal?: AbortSignal;
  /** The clock of the run: its length, the registry outage, the view's redraws, the client's timers. Defaults to `systemClock`. */
  clock?: Clock;
}

/** Defaults for DemoOptions. */
export const demoDefaults = Object.freeze({ durationMs: 20_000, concurrency: 16, rate: 100, dashboardPort: 0 });

/** The service the demo's callers run as: the rule controls write rules for it (`demo/isolate/payments/flaky`). */
const RULES_SCOPE = 'demo';

/** DemoSummary is what the run ends with (also printed). */
export interface DemoSummary {
  readonly calls: number;
  readonly succeeded: number;
  readonly fallbacks: number;
  readonly failed: number;
  readonly retries: number;
  readonly breakerRejections: number;
  readonly staleAnswers: number;
  readonly cacheGets: number;
  readonly originLoads: number;
  readonly perInstance: Readonly<Record<string, number>>;
}

interface InstanceStats {
  calls: number;
  errors: number;
  readonly latency: LatencyHistogram;
}

/** runDemo runs the demo and resolves with its summary once everything it started is closed. */
export async function runDemo(options: DemoOptions = {}): Promise<DemoSummary> {
  const durationMs = options.durationMs ?? demoDefaults.durationMs;
  const concurrency = options.concurrency ?? demoDefaults.concurrency;
  const rate = options.rate ?? demoDefaults.rate;
  const output = options.output ?? process.stdout;
  const clock = options.clock ?? systemClock;
  const interactive = options.interactive ?? output.isTTY === true;
  const scriptedOutage = options.scriptedOutage ?? !interactive;
  const dashboardPort = options.dashboardPort ?? demoDefaults.dashboardPort;
  const fleet = await DemoFleet.start({ clock });
  const registry = fleet.registry;
  // A short TTL, so that the registry cache has to ask the registry during the outage and answers stale.
  const cache = new RegistryCache(registry, { ttlMs: 1_000, minRetryIntervalMs: 500, clock });
  // The rule controls on the page write here; the binder applies them to the callers' breakers and client
  // (isolate / reset a breaker, shift weights, rehearse faults), as it would from etcd in a fleet.
  const store = new MemoryRuleStore({ clock });
  const rules = new Rules({ store, service: RULES_SCOPE, clock });
  await rules.start();
  // Instance breakers tuned for a short demo: trip at 60 % failures over the last 8 calls, so that the five
  // refused connections in a row that make outlier detection eject a killed instance trip its breaker too
  // (5 of 8); probe again after 5 s. The flaky instance (30 %) trips now and then, as it should.
  const instanceBreaker = rules.breakerFactory(
    'circuit-breaker',
    (name) => new CircuitBreaker({ name, failureRate: 0.6, minimumCalls: 5, windowCalls: 8, openMs: 5_000, halfOpenCalls: 3, clock }),
  );
  const serviceBreaker = rules.breakerFactory('sre-breaker', (name) => new SreBreaker({ name, clock }));
  const breakers = new BreakerGroup({ factory: (name) => (name.includes('/') ? instanceBreaker(name) : serviceBreaker(name)) });
  const client = new ResilientClient({ registry: cache, breakers, clock, timeoutMs: 1_000, balancer: { strategy: 'p2c', outlier: { baseEjectionMs: 2_000 } } });
  rules.bind('client', 'callers', client);
  rules.bind('circuit-breaker', 'origin', fleet.originBreaker);
  const perInstance = new Map<string, InstanceStats>(fleet.instances.map((i) => [i.server.id, { calls: 0, errors: 0, latency: new LatencyHistogram() }]));
  client.onAttempt((e) => {
    if (e.outcome === 'rejected') return;
    const st = perInstance.get(e.instance.id);
    if (st === undefined) return;
    st.calls++;
    if (e.outcome === 'error') st.errors++;
    st.latency.record(e.latencyMs);
  });
  const metrics = new BulwarkMetrics({ registry: new promClient.Registry() });
  metrics.track(client, { name: 'callers' });
  // The client's parts as components of their own, so that the page shows each instance's breaker,
  // each service's balancer with its instances, and the registry cache's entries.
  metrics.track(breakers, { name: 'instance breakers' });
  metrics.track(cache, { name: 'registry cache' });
  metrics.track(rules, { name: 'rules' });
  metrics.track(fleet.originBreaker, { name: 'origin' });
  for (const n of fleet.cacheNodes()) {
    metrics.track(n.group, { name: `profiles@${n.name}` });
    metrics.track(n.pool, { name: `ring@${n.name}` });
  }

  const states = new Map<string, ServiceState>();
  let view: LiveView | undefined;
  let dashboard: { handler: DashboardHandler; server: Server } | undefined;
  const start = clock.now();
  try {
    if (dashboardPort !== false) {
      const handler = dashboardHandler(metrics, { path: '/', title: 'bulwark demo', actions: fleet, controls: { store, scope: RULES_SCOPE }, clock });
      const server = createServer(handler);
      dashboard = { handler, server };
      await new Promise<void>((resolve, reject) => server.once('error', reject).listen(dashboardPort, '127.0.0.1', () => resolve()));
      output.write(
        `dashboard: http://127.0.0.1:${(server.address() as AddressInfo).port}/  (demo controls: kill / restore instances and cache nodes, registry, origin)\n`,
      );
    }
    for (const name of fleetServices) {
      const state = await client.service(name);
      states.set(name, state);
      // Named after the service: the page's weight controls write a rule for that name.
      metrics.track(state.balancer, { name });
    }
    const snapshot = (): ViewSnapshot => {
      const st = client.stats();
      return {
        elapsedMs: clock.now() - start,
        durationMs,
        calls: st.succeeded + st.fallbacks + st.failed,
        succeeded: st.succeeded,
        fallbacks: st.fallbacks,
        retries: st.retries,
        breakerRejections: st.breakerRejections,
        registryDown: !registry.answering,
        staleAnswers: cache.stats().stale,
        instances: fleet.instances.map((i) => {
          const state = states.get(i.service)!;
          return row(i, perInstance.get(i.server.id)!, state, healthById(state).get(i.server.id) ?? { ejected: false, heldOut: false });
        }),
      };
    };
    view = new LiveView(snapshot, { output, clock, interactive });
    view.start();
    const shown = view;
    await drive(client, fleet, { durationMs, concurrency, rate, scriptedOutage }, clock, options.signal, () => shown.redraw());
    view.stop();
    const summary = summarize(client, cache, fleet, perInstance);
    output.write(renderSummary(summary, snapshot(), clock.now() - start));
    return summary;
  } finally {
    view?.stop();
    if (dashboard !== undefined) {
      await dashboard.handler.close();
      await new Promise<void>((resolve) => (dashboard!.server.close(() => resolve()), dashboard!.server.closeAllConnections()));
    }
    await client.close();
    await cache.close();
    await fleet.close();
    await rules.close();
    await store.close();
    await metrics.close?.();
  }
}

/** drive runs the callers at a bounded rate until the time is up (or the signal), with the scripted registry outage when asked. */
async function drive(
  client: ResilientClient,
  fleet: DemoFleet,
  run: { durationMs: number; concurrency: number; rate: number; scriptedOutage: boolean },
  clock: Clock,
  signal: AbortSignal | undefined,
  onOutage: () => void,
): Promise<void> {
  const { durationMs, concurrency, rate } = run;
  const registry: FaultyRegistry = fleet.registry;
  const end = clock.now() + durationMs;
  // Half-way through, the registry stops answering for a quarter of the run (at most 5 s).
  const outageMs = Math.min(5_000, durationMs / 4);
  // The view shows each change at once, not at its next period (which may fall outside a short outage).
  const outageStart =
    run.scriptedOutage && Number.isFinite(durationMs) ? clock.setTimeout(() => (registry.setAnswering(false), onOutage()), durationMs / 2) : undefined;
  const outageEnd =
    run.scriptedOutage && Number.isFinite(durationMs)
      ? clock.setTimeout(() => (registry.setAnswering(true), onOutage()), durationMs / 2 + outageMs)
      : undefined;
  const degraded = () => new Response(JSON.stringify({ degraded: true }), { status: 200, headers: { 'content-type': 'application/json' } });
  // Each caller starts one call every `every` ms at most: the callers together stay under `rate` calls a second.
  const every = (1000 * concurrency) / rate;
  let turn = 0;
  // Callers waiting for their next turn, woken at once when the signal aborts (one listener for them all).
  const waiting = new Set<() => void>();
  const stopped = () => signal?.aborted === true;
  const wake = () => [...waiting].forEach((w) => w());
  signal?.addEventListener('abort', wake, { once: true });
  const wait = (ms: number) =>
    new Promise<void>((resolve) => {
      const done = () => (clock.clearTimeout(timer), waiting.delete(done), resolve());
      const timer = clock.setTimeout(done, ms);
      waiting.add(done);
    });
  const caller = async () => {
    while (clock.now() < end && !stopped()) {
      const began = clock.now();
      const n = turn++;
      const service = fleetServices[n % fleetServices.length]!;
      try {
        const res = await client.fetch(`http://${service}/pay`, { fallback: degraded });
        await res.arrayBuffer();
      } catch {
        // counted by the client as a failed call; keep calling
      }
      try {
        await fleet.cacheGet(`user-${n % 50}`, n);
      } catch {
        // the group counts its failed loads; keep calling
      }
      const left = Math.min(every - (clock.now() - began), end - clock.now());
      if (left > 0 && !stopped()) await wait(left);
    }
  };
  try {
    await Promise.all(Array.from({ length: concurrency }, caller));
  } finally {
    signal?.removeEventListener('abort', wake);
    clock.clearTimeout(outageStart);
    clock.clearTimeout(outageEnd);
    registry.setAnswering(true);
  }
}

/** healthById answers, per instance, whether it is ejected (or down) and whether its open breaker holds it out of rotation. */
function healthById(state: ServiceState): Map<string, { ejected: boolean; heldOut: boolean }> {
  const out = new Map<string, { ejected: boolean; heldOut: boolean }>();
  const b = state.balancer as { health?: () => { instance: { id: string }; ejected: boolean; up: boolean }[]; isHeldOut?: (id: string) => boolean };
  for (const h of b.health?.() ?? []) out.set(h.instance.id, { ejected: h.ejected || !h.up, heldOut: b.isHeldOut?.(h.instance.id) ?? false });
  return out;
}

function row(i: FleetInstance, st: InstanceStats, state: ServiceState, health: { ejected: boolean; heldOut: boolean }): InstanceRow {
  const breaker = state.breakerOf(i.server.id) as { state?: string } | undefined;
  return {
    id: i.server.id,
    address: i.server.address,
    calls: st.calls,
    errors: st.errors,
    p50Ms: st.latency.quantile(0.5),
    p99Ms: st.latency.quantile(0.99),
    breaker: breaker?.state ?? 'closed',
    ejected: health.ejected,
    heldOut: health.heldOut,
  };
}

function summarize(client: ResilientClient, cache: RegistryCache, fleet: DemoFleet, perInstance: Map<string, InstanceStats>): DemoSummary {
  const st = client.stats();
  return {
    calls: st.calls,
    succeeded: st.succeeded,
    fallbacks: st.fallbacks,
    failed: st.failed,
    retries: st.retries,
    breakerRejections: st.breakerRejections,
    staleAnswers: cache.stats().stale,
    cacheGets: fleet.cacheNodes().reduce((n, c) => n + c.group.stats().gets, 0),
    originLoads: fleet.originLoads,
    perInstance: Object.fromEntries([...perInstance].map(([id, s]) => [id, s.calls])),
  };
}

function pct(part: number, whole: number): string {
  return whole === 0 ? '—' : `${((100 * part) / whole).toFixed(2)} %`;
}

/** renderSummary is the text printed at the end. */
export function renderSummary(s: DemoSummary, last: ViewSnapshot, elapsedMs: number): string {
  const lines = [
    '',
    'Summary',
    `  calls           ${s.calls} in ${(elapsedMs / 1000).toFixed(1)} s (${Math.round(s.calls / (elapsedMs / 1000))}/s)`,
    `  by an instance  ${pct(s.succeeded, s.calls)} of calls (${s.succeeded}) answered by an instance`,
    `  by the fallback ${pct(s.fallbacks, s.calls)} of calls (${s.fallbacks}) answered by the fallback instead`,
    `  failed          ${s.failed} calls`,
    `  saved by retry  ${s.retries} retries on another instance`,
    `  saved by breakers  ${s.breakerRejections} attempts kept away from an instance whose breaker was open`,
    `  saved by fallbacks ${s.fallbacks} calls answered with a degraded response instead of an error`,
    `  registry outage the cache answered ${s.staleAnswers} lookups from stale entries while the registry was down`,
    `  cache cluster   ${s.cacheGets} gets on 3 nodes, ${s.originLoads} loads from the origin`,
    '',
    ...renderFrame(last, false).slice(4),
    '',
  ];
  return lines.join('\n');
}
