/**
 * `bulwark demo`: a local cluster on embedded defaults (MemoryRegistry; no etcd, no Redis) that shows
 * the guarded-call flow at work. Three instances of a small HTTP service on loopback — healthy, flaky
 * (30 % of requests fail) and slow (200 ms) — register in the registry; callers hit them through one
 * ResilientClient for a bounded time, with a live view; half-way through the registry stops answering
 * for a few seconds and the RegistryCache serves what it knew. A summary ends it.
 */
import { systemClock, type Clock } from '../../core/index.js';
import { BreakerGroup, CircuitBreaker, SreBreaker } from '../../breaker/index.js';
import { ResilientClient, type ServiceState } from '../../client/index.js';
import { MemoryRegistry, RegistryCache } from '../../registry/index.js';
import { FaultyRegistry } from './faulty-registry.js';
import { LatencyHistogram } from './histogram.js';
import { startDemoServices, type DemoService } from './services.js';
import { LiveView, renderFrame, type InstanceRow, type ViewOutput, type ViewSnapshot } from './view.js';

/** DemoOptions configures one run of the demo. */
export interface DemoOptions {
  /** How long callers call, in ms. Defaults to 20 000. */
  durationMs?: number;
  /** Callers calling at once. Defaults to 16. */
  concurrency?: number;
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
export const demoDefaults = Object.freeze({ durationMs: 20_000, concurrency: 16 });

/** The service name the three instances register under. */
const SERVICE = 'payments';

/** DemoSummary is what the run ends with (also printed). */
export interface DemoSummary {
  readonly calls: number;
  readonly succeeded: number;
  readonly fallbacks: number;
  readonly failed: number;
  readonly retries: number;
  readonly breakerRejections: number;
  readonly staleAnswers: number;
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
  const output = options.output ?? process.stdout;
  const clock = options.clock ?? systemClock;
  const services = await startDemoServices({ clock });
  const memory = new MemoryRegistry();
  const registry = new FaultyRegistry(memory);
  // A short TTL, so that the registry cache has to ask the registry during the outage and answers stale.
  const cache = new RegistryCache(registry, { ttlMs: 1_000, minRetryIntervalMs: 500, clock });
  // Instance breakers tuned for a short demo: trip at 25 % failures over 5 s, probe again after 2 s.
  const breakers = new BreakerGroup({
    factory: (name) =>
      name.includes('/')
        ? new CircuitBreaker({ name, failureRate: 0.25, minimumCalls: 20, windowMs: 5_000, buckets: 10, openMs: 2_000, halfOpenCalls: 3 })
        : new SreBreaker({ name }),
  });
  const client = new ResilientClient({ registry: cache, breakers, clock, timeoutMs: 1_000, balancer: { strategy: 'p2c', outlier: { baseEjectionMs: 3_000 } } });
  const perInstance = new Map<string, InstanceStats>(services.map((s) => [s.id, { calls: 0, errors: 0, latency: new LatencyHistogram() }]));
  client.onAttempt((e) => {
    if (e.outcome === 'rejected') return;
    const st = perInstance.get(e.instance.id);
    if (st === undefined) return;
    st.calls++;
    if (e.outcome === 'error') st.errors++;
    st.latency.record(e.latencyMs);
  });

  let state: ServiceState | undefined;
  let view: LiveView | undefined;
  const start = clock.now();
  try {
    for (const s of services) await memory.register({ id: s.id, name: SERVICE, address: s.address });
    state = await client.service(SERVICE);
    const snapshot = (): ViewSnapshot => {
      const st = client.stats();
      const health = healthById(state!);
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
        instances: services.map((s) => row(s, perInstance.get(s.id)!, state!, health.get(s.id) ?? { ejected: false, heldOut: false })),
      };
    };
    view = new LiveView(snapshot, { output, clock, ...(options.interactive === undefined ? {} : { interactive: options.interactive }) });
    view.start();
    const shown = view;
    await drive(client, durationMs, concurrency, registry, clock, options.signal, () => shown.redraw());
    view.stop();
    const summary = summarize(client, cache, perInstance);
    output.write(renderSummary(summary, snapshot(), clock.now() - start));
    return summary;
  } finally {
    view?.stop();
    await client.close();
    await cache.close();
    await registry.close();
    await Promise.all(services.map((s) => s.close()));
  }
}

/** drive runs the callers until the time is up, with the registry outage in the middle. */
async function drive(
  client: ResilientClient,
  durationMs: number,
  concurrency: number,
  registry: FaultyRegistry,
  clock: Clock,
  signal: AbortSignal | undefined,
  onOutage: () => void,
): Promise<void> {
  const end = clock.now() + durationMs;
  // Half-way through, the registry stops answering for a quarter of the run (at most 5 s).
  const outageMs = Math.min(5_000, durationMs / 4);
  // The view shows each change at once, not at its next period (which may fall outside a short outage).
  const outageStart = clock.setTimeout(() => (registry.setAnswering(false), onOutage()), durationMs / 2);
  const outageEnd = clock.setTimeout(() => (registry.setAnswering(true), onOutage()), durationMs / 2 + outageMs);
  const degraded = () => new Response(JSON.stringify({ degraded: true }), { status: 200, headers: { 'content-type': 'application/json' } });
  const caller = async () => {
    while (clock.now() < end && signal?.aborted !== true) {
      try {
        const res = await client.fetch(`http://${SERVICE}/pay`, { fallback: degraded });
        await res.arrayBuffer();
      } catch {
        // counted by the client as a failed call; keep calling
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: concurrency }, caller));
  } finally {
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

function row(s: DemoService, st: InstanceStats, state: ServiceState, health: { ejected: boolean; heldOut: boolean }): InstanceRow {
  const breaker = state.breakerOf(s.id) as { state?: string } | undefined;
  return {
    id: s.id,
    address: s.address,
    calls: st.calls,
    errors: st.errors,
    p50Ms: st.latency.quantile(0.5),
    p99Ms: st.latency.quantile(0.99),
    breaker: breaker?.state ?? 'closed',
    ejected: health.ejected,
    heldOut: health.heldOut,
  };
}

function summarize(client: ResilientClient, cache: RegistryCache, perInstance: Map<string, InstanceStats>): DemoSummary {
  const st = client.stats();
  return {
    calls: st.calls,
    succeeded: st.succeeded,
    fallbacks: st.fallbacks,
    failed: st.failed,
    retries: st.retries,
    breakerRejections: st.breakerRejections,
    staleAnswers: cache.stats().stale,
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
    '',
    ...renderFrame(last, false).slice(4),
    '',
  ];
  return lines.join('\n');
}
