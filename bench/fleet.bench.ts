/**
 * Fleet-aware breakers (issue 28), per store (Redis, etcd; both real, on loopback), with 10 instances
 * in this process, each with its own store client (its own connections, as separate processes would):
 *
 * - quorum reached → every instance open: every instance has 2 good calls in its window; four fail 18
 *   calls each (4 failing reporters: under the quorum of 5), then, from t0, a fifth does: the time from
 *   t0 to the last instance open, p50 / p99 over the trials. The fifth publishes at the failure that
 *   makes it a failing reporter (its 2nd: 2 of 4 calls), so this is the store's propagation of one
 *   report; before that publish went out at its next tick (publishMs 100, the default), up to 100 ms later.
 * - the propagation, profiled: how long a publish takes (the store's write: a Lua script on Redis, a
 *   lease put — a raft commit and its fsync — on etcd) and how long from a publish's start until another
 *   instance's watch delivers it, p50 / p99 over every publish of the trials above;
 * - store traffic per instance per second: the store operations each instance makes (publish, snapshot,
 *   permit, probe result) and the watch messages it receives, idle (closed breakers, healthy calls at
 *   20/s) and during an outage (every instance calling a dead dependency at 20/s, held open by the fleet).
 *
 *   npm run bench -- fleet
 */
import { performance } from 'node:perf_hooks';
import { CircuitBreaker } from '../src/breaker/index.js';
import { EtcdFleetStore, RedisFleetStore, type FleetEvent, type FleetReport, type FleetStore } from '../src/fleet/index.js';
import { startRedis } from '../test/support/redis.js';
import { startEtcd } from '../test/support/etcd.js';
import { waitFor } from '../test/support/servers.js';

const INSTANCES = 10;
const TRIALS = Number(process.env.FLEET_TRIALS ?? 30);
const boom = () => Promise.reject(new Error('down'));
const fine = () => Promise.resolve(1);
const noop = () => undefined;

/** Publishes' start times by report (key, caller, gen, calls, failures), for the watch latency; cleared per phase. */
const publishedAt = new Map<string, number>();
const publishMs: number[] = [];
const watchMs: number[] = [];
const reportId = (key: string, r: FleetReport) => `${key}|${r.caller}|${r.gen}|${r.calls}|${r.failures}`;

/** Counted wraps a store and counts its operations and the watch messages it delivers, and times publishes and their delivery. */
function counted(store: FleetStore): { store: FleetStore; ops: () => number; messages: () => number } {
  let ops = 0;
  let messages = 0;
  const s = store as unknown as Record<string, unknown>;
  for (const m of ['publish', 'snapshot', 'takePermit', 'probeResult', 'leave'] as const) {
    const real = (store[m] as (...a: unknown[]) => Promise<unknown>).bind(store);
    s[m] = (...a: unknown[]) => {
      ops++;
      if (m !== 'publish') return real(...a);
      const t = performance.now();
      publishedAt.set(reportId(a[0] as string, a[1] as FleetReport), t);
      return real(...a).then((v) => {
        publishMs.push(performance.now() - t);
        return v;
      });
    };
  }
  const watch = store.watch.bind(store);
  s.watch = (key: string, l: (e: FleetEvent) => void, st: (up: boolean) => void) =>
    watch(
      key,
      (e) => {
        messages++;
        if (e.type === 'report') {
          const t = publishedAt.get(reportId(key, e.report));
          if (t !== undefined) watchMs.push(performance.now() - t);
        }
        l(e);
      },
      st,
    );
  return { store, ops: () => ops, messages: () => messages };
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};

async function runStore(name: string, make: () => FleetStore): Promise<void> {
  const stores = Array.from({ length: INSTANCES }, () => counted(make()));
  const fleetOf = (key: string) =>
    stores.map(
      ({ store }) => new CircuitBreaker({ name: key, minimumCalls: 20, windowCalls: 100, openMs: 1_000, halfOpenCalls: 2, fleet: { store, ttlMs: 3_000 } }),
    );
  const samples: number[] = [];
  publishedAt.clear();
  publishMs.length = 0;
  watchMs.length = 0;
  for (let t = 0; t < TRIALS; t++) {
    const bs = fleetOf(`bench-${Date.now()}-${t}`);
    await waitFor('every view available', () => bs.every((b) => b.stats().fleet?.available === true), 10_000);
    for (const b of bs) for (let i = 0; i < 2; i++) await b.execute(fine);
    // Every view must know all ten reporters first: on a partial view (six reporters, four failing) the
    // quorum is 3 and the fleet would open before t0.
    await waitFor('all reporters seen', () => bs.every((b) => b.stats().fleet?.reporters === INSTANCES), 10_000);
    for (const b of bs.slice(0, 4)) for (let i = 0; i < 18; i++) await b.execute(boom).catch(noop);
    await waitFor('four failing reporters seen', () => bs.every((b) => b.stats().fleet?.failingReporters === 4), 10_000);
    // Checked before the fifth fails (after, the fifth itself may be open already: its own view sees the
    // quorum at its failure that makes it a failing reporter).
    if (bs.some((b) => b.state === 'open' && b.stats().reason === 'fleet')) throw new Error('the fleet opened before the quorum');
    const t0 = performance.now();
    for (let i = 0; i < 18; i++) await bs[4]!.execute(boom).catch(noop);
    await waitFor('every instance open', () => bs.every((b) => b.state === 'open'), 10_000);
    samples.push(performance.now() - t0);
    await Promise.all(bs.map((b) => b.close()));
  }
  console.log(
    `| ${name} | quorum reached → all ${INSTANCES} open | p50 ${pct(samples, 50).toFixed(0)} ms | p99 ${pct(samples, 99).toFixed(0)} ms | max ${Math.max(...samples).toFixed(0)} ms | ${TRIALS} trials |`,
  );
  console.log(
    `| ${name} | publish (the store's write) | p50 ${pct(publishMs, 50).toFixed(1)} ms | p99 ${pct(publishMs, 99).toFixed(1)} ms | max ${Math.max(...publishMs).toFixed(0)} ms | ${publishMs.length} publishes |`,
  );
  console.log(
    `| ${name} | publish → delivered by another instance's watch | p50 ${pct(watchMs, 50).toFixed(1)} ms | p99 ${pct(watchMs, 99).toFixed(1)} ms | max ${Math.max(...watchMs).toFixed(0)} ms | ${watchMs.length} deliveries |`,
  );

  // Traffic: 10 s idle (healthy calls at 20/s), then 10 s of a dead dependency.
  for (const phase of ['idle', 'outage'] as const) {
    const bs = fleetOf(`traffic-${phase}-${Date.now()}`);
    await waitFor('every view available', () => bs.every((b) => b.stats().fleet?.available === true), 10_000);
    const ops0 = stores.reduce((a, s) => a + s.ops(), 0);
    const msg0 = stores.reduce((a, s) => a + s.messages(), 0);
    const start = performance.now();
    const timer = setInterval(() => {
      for (const b of bs) b.execute(phase === 'idle' ? fine : boom).catch(noop);
    }, 50);
    await new Promise((r) => setTimeout(r, 10_000));
    clearInterval(timer);
    const secs = (performance.now() - start) / 1000;
    const ops = (stores.reduce((a, s) => a + s.ops(), 0) - ops0) / INSTANCES / secs;
    const msgs = (stores.reduce((a, s) => a + s.messages(), 0) - msg0) / INSTANCES / secs;
    const open = bs.filter((b) => b.stats().reason === 'fleet').length;
    console.log(
      `| ${name} | traffic ${phase} | ${ops.toFixed(1)} store ops / instance / s | ${msgs.toFixed(1)} watch messages / instance / s | ${open} of ${INSTANCES} held by the fleet | 10 s |`,
    );
    await Promise.all(bs.map((b) => b.close()));
  }
  await Promise.all(stores.map((s) => s.store.close()));
}

console.log('\n## fleet-aware breakers: 10 instances, loopback stores\n');
console.log('| store | what | | | | |\n| --- | --- | --- | --- | --- | --- |');
const redis = await startRedis();
try {
  await runStore('Redis', () => new RedisFleetStore({ redis: redis.url }));
} finally {
  await redis.stop();
}
const etcd = await startEtcd();
try {
  await runStore('etcd', () => new EtcdFleetStore({ etcd: etcd.endpoint }));
} finally {
  await etcd.stop();
}
process.exit(0);
