/**
 * Fleet-aware breakers on real processes, a real HTTP dependency and real Redis and etcd (issue 28).
 * Ten caller processes send 20 calls a second each to one dependency (an HTTP server in this test,
 * which counts every request it gets). The same file is the caller: run with BULWARK_FLEET_WORKER=1 it
 * makes a store and a CircuitBreaker (minimumCalls 20, failure rate 50 %, openMs 1 000, 2 probes) and
 * runs the commands the parent sends on stdin; it reports its breaker's transitions as they happen.
 *
 * - dead dependency: the calls that reach it before every caller stopped sending, with and without the
 *   fleet, and the time from the pooled threshold (its 20th failed call) to the last caller open, with
 *   the propagation's timeline (each caller traces its steps: the failure that makes it a failing
 *   reporter, its publish sent and answered, the others' watch delivering it, its breaker held open)
 *   and, on etcd, etcd's own put → watch latency measured beside it: the floor under the propagation;
 * - poisoning: one caller's network to the dependency is broken, the nine others never refuse a call;
 * - recovery: while it is dead, only probes reach the dependency, exactly halfOpenCalls of them per permit
 *   period (each probe names the period of the permit it used) and one period per openMs; once it is
 *   back, every caller closes within 1 s of the probes succeeding (on the callers' own clocks);
 * - store down (SIGKILL): no call fails because of it, the fleet view says unavailable and comes back;
 * - a caller killed with SIGKILL drops out of the reporters after its TTL.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Etcd3 } from 'etcd3';
import { CircuitBreaker } from '../src/breaker/index.js';
import { EtcdFleetStore, RedisFleetStore, type FleetStore } from '../src/fleet/index.js';
import { redisBinary, startRedis, type RedisServer } from './support/redis.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { freePort, skipReason, waitFor } from './support/servers.js';
import { tsNodeArgs } from './support/ts-node.js';

const CALLERS = 10;
const RATE = 20;
const MINIMUM_CALLS = 20;
const OPEN_MS = 1_000;
const HALF_OPEN_CALLS = 2;
const TTL_MS = 2_000;

/** Step is one traced step of a caller: a failed call, a publish sent or answered, a report its watch delivered, its breaker open. */
interface Step {
  k: 'failed' | 'sent' | 'acked' | 'seen' | 'open';
  caller: string;
  calls?: number;
  failures?: number;
  /** performance.timeOrigin + performance.now() of the process that traced it. */
  at?: number;
}

interface WorkerStats {
  ok: number;
  failed: number;
  refused: number;
  breaker: ReturnType<CircuitBreaker['stats']>;
  /** From 'go' to the breaker's first open: the event loop's longest delay and the CPU used, in ms. */
  untilOpen?: { lagMs: number; cpuMs: number };
}

async function worker(): Promise<void> {
  const env = process.env;
  const store: FleetStore = env.FLEET_STORE === 'redis' ? new RedisFleetStore({ redis: env.STORE_URL! }) : new EtcdFleetStore({ etcd: env.STORE_URL! });
  const say = (line: string) => process.stdout.write(`@@${line}\n`);
  const event = (line: string) => process.stdout.write(`@!${line}\n`);
  // The propagation's steps, timed on the wall (timeOrigin + now: comparable across the processes).
  // Only until the caller's breaker first opens (a new breaker starts it again): the trace is a line per
  // step, and what comes after the open is not the propagation but the load it would add to the run.
  let tracing = false;
  const trace = (step: Step) => {
    if (tracing) process.stdout.write(`@~${JSON.stringify({ ...step, at: performance.timeOrigin + performance.now() })}\n`);
  };
  const publish = store.publish.bind(store);
  store.publish = (key, r, ttlMs) => {
    trace({ k: 'sent', caller: r.caller, calls: r.calls, failures: r.failures });
    return publish(key, r, ttlMs).then(() => {
      trace({ k: 'acked', caller: r.caller, calls: r.calls, failures: r.failures });
    });
  };
  const watch = store.watch.bind(store);
  store.watch = (key, listener, onStatus) =>
    watch(
      key,
      (e) => {
        if (e.type === 'report') trace({ k: 'seen', caller: e.report.caller, calls: e.report.calls, failures: e.report.failures });
        listener(e);
      },
      onStatus,
    );
  // The permits granted and not yet used, by the start of their period (it names the period): a call made
  // while the fleet holds the breaker is the probe of the oldest, and says so to the dependency.
  const permits: number[] = [];
  const takePermit = store.takePermit.bind(store);
  store.takePermit = (key, gen, limit, periodMs) =>
    takePermit(key, gen, limit, periodMs).then((a) => {
      if (a.granted) permits.push(a.periodStart);
      return a;
    });
  // How busy the caller was while the propagation ran: its event loop's delay and its CPU, from 'go' to its open.
  const lag = monitorEventLoopDelay({ resolution: 5 });
  lag.enable();
  let cpuAtGo = process.cpuUsage();
  let untilOpen: WorkerStats['untilOpen'];
  let breaker: CircuitBreaker | undefined;
  let timer: NodeJS.Timeout | undefined;
  const n = { ok: 0, failed: 0, refused: 0 };
  let answeredDead = 0;
  say('ready');
  for await (const line of createInterface({ input: process.stdin })) {
    const sp = line.indexOf(' ');
    const c = sp < 0 ? line : line.slice(0, sp);
    const arg = sp < 0 ? '' : line.slice(sp + 1);
    if (c === 'breaker') {
      const o = JSON.parse(arg) as { fleet: boolean; key: string };
      // A new breaker stops the old one's calls: a test that failed before its 'stop' left them running,
      // and the closed breaker's refusals counted as the next test's failed calls.
      clearInterval(timer);
      await breaker?.close();
      breaker = new CircuitBreaker({
        name: o.key,
        minimumCalls: MINIMUM_CALLS,
        failureRate: 0.5,
        windowMs: 30_000,
        buckets: 10,
        openMs: OPEN_MS,
        halfOpenCalls: HALF_OPEN_CALLS,
        ...(o.fleet ? { fleet: { store, key: o.key, publishMs: 25, ttlMs: TTL_MS } } : {}),
      });
      breaker.onStateChange((ch) => {
        if (ch.to === 'open') {
          if (tracing) {
            const cpu = process.cpuUsage(cpuAtGo);
            untilOpen = { lagMs: lag.max / 1e6, cpuMs: (cpu.user + cpu.system) / 1000 };
          }
          trace({ k: 'open', caller: store.callerId });
          tracing = false;
        }
        // 'fleet': held by the fleet's evidence or closed by its probes; 'local': the breaker's own rule, or
        // handed back to it (the store unavailable: its reason says so).
        const kind = ch.reason.startsWith('fleet:') ? 'fleet' : 'local';
        event(`${performance.timeOrigin + performance.now()} ${ch.to} ${kind} ${ch.reason}`);
      });
      n.ok = n.failed = n.refused = answeredDead = permits.length = 0;
      untilOpen = undefined;
      tracing = true;
      say('ok');
    } else if (c === 'go') {
      const url = arg;
      const b = breaker!;
      clearInterval(timer);
      lag.reset();
      cpuAtGo = process.cpuUsage();
      timer = setInterval(() => {
        b.execute(async (signal) => {
          const period = b.heldByFleet ? permits.shift() : undefined;
          const res = await fetch(url, period === undefined ? { signal } : { signal, headers: { 'x-probe-period': String(period) } });
          await res.arrayBuffer();
          if (res.status >= 500) {
            trace({ k: 'failed', caller: store.callerId, failures: ++answeredDead }); // before the breaker counts it
            throw new Error(`HTTP ${res.status}`);
          }
        }).then(
          () => n.ok++,
          (err: { code?: string }) => (err.code === 'ERR_BREAKER_OPEN' ? n.refused++ : n.failed++),
        );
      }, 1_000 / RATE);
      say('ok');
    } else if (c === 'stop') {
      clearInterval(timer);
      say('ok');
    } else if (c === 'stats') {
      say(JSON.stringify({ ...n, breaker: breaker!.stats(), untilOpen }));
    } else if (c === 'exit') break;
  }
  clearInterval(timer);
  await breaker?.close();
  await store.close();
}

/** WorkerEvent is a transition of a caller's breaker: `open fleet`, `half-open local`, `closed fleet` … */
interface WorkerEvent {
  what: string;
  /** performance.now() of the parent when the line arrived. */
  at: number;
  /** timeOrigin + now of the caller when it happened (comparable across the processes). */
  wall: number;
  /** The transition's reason. */
  why: string;
}

interface Worker {
  ready: Promise<void>;
  send(command: string): Promise<string>;
  stats(): Promise<WorkerStats>;
  /** Transitions so far: `open fleet`, `half-open local`, `closed fleet` … with the parent's time of arrival. */
  events: WorkerEvent[];
  /** The propagation steps it traced (see Step). */
  steps: Step[];
  child: ChildProcess;
  exited: Promise<void>;
}

function startWorker(env: NodeJS.ProcessEnv): Worker {
  const child = spawn(process.execPath, tsNodeArgs(fileURLToPath(import.meta.url)), {
    env: { ...process.env, ...env, BULWARK_FLEET_WORKER: '1' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (b: Buffer) => (err += b));
  const waiters: ((line: string) => void)[] = [];
  const lines: string[] = [];
  const events: WorkerEvent[] = [];
  const steps: Step[] = [];
  createInterface({ input: child.stdout! }).on('line', (l) => {
    if (l.startsWith('@!')) {
      const [wall, to, kind] = l.slice(2).split(' ', 3);
      events.push({ what: `${to} ${kind}`, at: performance.now(), wall: Number(wall), why: l.slice(2 + wall!.length + to!.length + kind!.length + 3) });
    }
    if (l.startsWith('@~')) steps.push(JSON.parse(l.slice(2)) as Step);
    if (!l.startsWith('@@')) return;
    const w = waiters.shift();
    if (w) w(l.slice(2));
    else lines.push(l.slice(2));
  });
  const next = () => new Promise<string>((resolve) => (lines.length > 0 ? resolve(lines.shift()!) : waiters.push(resolve)));
  const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
  const exited = new Promise<void>((resolve, reject) =>
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (code === 0 || signal === 'SIGKILL') resolve();
      else reject(new Error(`worker exited ${code}\n${err}`));
    }),
  );
  exited.catch(() => {});
  const send = (command: string) => {
    if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve('');
    child.stdin!.write(`${command}\n`);
    if (command === 'exit') child.stdin!.end();
    return Promise.race([next(), exited.then(() => '')]);
  };
  return {
    ready: Promise.race([next().then(() => undefined), exited]),
    send,
    stats: async () => JSON.parse(await send('stats')) as WorkerStats,
    events,
    steps,
    child,
    exited,
  };
}

/** Dependency is the HTTP server the callers share: it counts requests, and answers 200 or, dead, 503. */
interface Hit {
  at: number;
  wall: number;
  dead: boolean;
  period: number | undefined;
}

interface Dependency {
  url: string;
  dead: boolean;
  /** performance.now() and wall time (timeOrigin + now) of every request, whether it was answered dead, and the permit period a probe names. */
  hits: Hit[];
  close(): Promise<void>;
}

async function startDependency(): Promise<Dependency> {
  const dep: Partial<Dependency> & { dead: boolean; hits: Hit[] } = { dead: false, hits: [] };
  const server: Server = createServer((req, res) => {
    const at = performance.now();
    const period = req.headers['x-probe-period'];
    dep.hits.push({ at, wall: performance.timeOrigin + at, dead: dep.dead, period: typeof period === 'string' ? Number(period) : undefined });
    res.statusCode = dep.dead ? 503 : 200;
    res.end(dep.dead ? 'dead' : 'ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  dep.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  dep.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return dep as Dependency;
}

const allIn = (workers: Worker[], what: string, since: number) => workers.every((w) => w.events.some((e) => e.what.startsWith(what) && e.at >= since));
const lastAt = (workers: Worker[], what: string, since: number) =>
  Math.max(...workers.map((w) => w.events.find((e) => e.what.startsWith(what) && e.at >= since)!.at));
const say = (line: string) => process.stdout.write(`# ${line}\n`);

/**
 * warmUp runs the fleet on a healthy dependency under another key until every view has every caller's
 * report: each process has published and its watch has delivered reports, as in a fleet that was running
 * when its dependency died. Fresh processes ran the store's put and its watch's delivery for the first
 * time in the measured run, and that first time (a gRPC method's and its messages' first use: 7–9 ms of
 * CPU against 2 for a put on an idle machine) was on the propagation's path.
 */
async function warmUp(workers: Worker[], dep: Dependency): Promise<void> {
  dep.dead = false;
  await Promise.all(workers.map((w) => w.send(`breaker ${JSON.stringify({ fleet: true, key: 'warm-up' })}`)));
  await Promise.all(workers.map((w) => w.send(`go ${dep.url}`)));
  await waitFor(
    'every view with every reporter',
    async () => (await Promise.all(workers.map((w) => w.stats()))).every((s) => s.breaker.fleet?.reporters === workers.length),
    20_000,
  );
  await Promise.all(workers.map((w) => w.send('stop')));
}

/** deadRun: every caller sends to the dependency, dead from the start; answers what reached it before all were open. */
async function deadRun(
  workers: Worker[],
  dep: Dependency,
  fleet: boolean,
  key: string,
  floorOf?: string,
): Promise<{ calls: number; thresholdToAllOpenMs: number; reasons: string[]; timeline: string; floor: number[] }> {
  await Promise.all(workers.map((w) => w.send(`breaker ${JSON.stringify({ fleet, key })}`)));
  // The dependency dies under a fleet already formed: every view has its watch, its snapshot and (etcd)
  // its lease. Without this wait the run measured the fleet's set-up too — a new watch and a lease grant
  // (a raft write) per process, which on a loaded machine took up to 1.3 s and landed after the failures.
  if (fleet)
    await waitFor(
      'every fleet view available',
      async () => (await Promise.all(workers.map((w) => w.stats()))).every((s) => s.breaker.fleet?.available === true),
      10_000,
    );
  for (const w of workers) w.steps.length = 0;
  dep.dead = true;
  dep.hits.length = 0;
  // etcd's own put → watch, measured while the callers fail (same machine, same moment): the floor.
  const floorClient = floorOf === undefined ? undefined : await etcdFloor(floorOf);
  const t0 = performance.now();
  const floor = floorClient === undefined ? Promise.resolve([]) : floorClient.measure(() => allIn(workers, 'open', t0));
  await Promise.all(workers.map((w) => w.send(`go ${dep.url}`)));
  await waitFor('every caller open', () => allIn(workers, 'open', t0), 20_000);
  const allOpen = lastAt(workers, 'open', t0);
  // Calls already sent when the last caller opened still arrive: wait until the dependency is quiet. The
  // callers stop sending first (and start again after): without the fleet, ten local half-opens probing
  // once per openMs each, at times of their own, kept a busy machine's dependency from ever being quiet.
  await Promise.all(workers.map((w) => w.send('stop')));
  let seen = -1;
  await waitFor(
    'the dependency quiet',
    () => {
      const quiet = seen === dep.hits.length;
      seen = dep.hits.length;
      return quiet;
    },
    5_000,
  );
  const calls = dep.hits.filter((h) => h.at <= allOpen + 100).length;
  const threshold = dep.hits[MINIMUM_CALLS - 1]!.at;
  const reasons = workers.map((w) => w.events.find((e) => e.what.startsWith('open') && e.at >= t0)!.what);
  const busy = (await Promise.all(workers.map((w) => w.stats()))).flatMap((s) => (s.untilOpen === undefined ? [] : [s.untilOpen]));
  await Promise.all(workers.map((w) => w.send(`go ${dep.url}`)));
  const load = `the callers from go to open: event-loop delay ${ms(busy.map((b) => b.lagMs))}, CPU ${ms(busy.map((b) => b.cpuMs))}`;
  return { calls, thresholdToAllOpenMs: Math.round(allOpen - threshold), reasons, timeline: fleet ? `${timeline(workers)}; ${load}` : '', floor: await floor };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;
const ms = (xs: number[]) => `${Math.round(median(xs))} [${Math.round(Math.max(...xs))}] ms`;

/**
 * timeline answers the propagation's steps, each as the median [max] over the callers: the failure that
 * made a caller a failing reporter (its 2nd) → its publish sent → answered by the store, and → delivered
 * by the others' watches (the median receiver); and at each caller, the last report its watch delivered
 * before its breaker opened → open (the view's reaction).
 */
function timeline(workers: Worker[]): string {
  const reporter: number[] = [];
  const acked: number[] = [];
  const seen: number[] = [];
  const react: number[] = [];
  for (const w of workers) {
    const own = w.steps.find((s) => s.k === 'failed' && s.failures === 2);
    const sent = w.steps.find((s) => s.k === 'sent' && s.calls! >= 2);
    const open = w.steps.find((s) => s.k === 'open');
    if (own === undefined || sent === undefined || open === undefined) continue;
    const same = (s: Step) => s.caller === sent.caller && s.calls === sent.calls && s.failures === sent.failures;
    reporter.push(sent.at! - own.at!);
    const ack = w.steps.find((s) => s.k === 'acked' && same(s));
    if (ack !== undefined) acked.push(ack.at! - sent.at!);
    const others = workers.filter((o) => o !== w).flatMap((o) => o.steps.filter((s) => s.k === 'seen' && same(s)).map((s) => s.at! - sent.at!));
    if (others.length > 0) seen.push(median(others));
    const last = w.steps.filter((s) => s.k === 'seen' && s.at! <= open.at!).at(-1);
    if (last !== undefined) react.push(open.at! - last.at!);
  }
  const sends = workers.map((w) => w.steps.filter((s) => s.k === 'sent').length);
  return `2nd failure → publish sent ${ms(reporter)}; sent → answered ${ms(acked)}; sent → the others' watch ${ms(seen)}; last report delivered → held open ${ms(react)}; publishes before each caller's open: ${sends.reduce((a, b) => a + b, 0)} (${sends.join(', ')})`;
}

/**
 * etcdFloor makes a client with a watch, warmed up by three puts (the first uses of a gRPC method cost
 * several times the later ones), for `measure`: etcd's own put → watch latency, in ms, sorted — puts in a
 * row (at least 5, at most 500), each waited for at the watch, until `stop()` says so. Started before the
 * callers are told to go, so that it covers their failures from the first.
 */
async function etcdFloor(endpoint: string): Promise<{ measure(stop: () => boolean): Promise<number[]> }> {
  const client = new Etcd3({ hosts: endpoint });
  const watcher = await client.watch().key('floor').create();
  let delivered: (() => void) | undefined;
  watcher.on('put', () => delivered?.());
  const put = async (i: number) => {
    const t = performance.now();
    const got = new Promise<void>((resolve) => (delivered = resolve));
    await client.put('floor').value(String(i));
    await got;
    return performance.now() - t;
  };
  for (let i = 0; i < 3; i++) await put(i);
  return {
    async measure(stop) {
      try {
        const out: number[] = [];
        for (let i = 0; i < 500 && (i < 5 || !stop()); i++) out.push(await put(i));
        return out.sort((a, b) => a - b);
      } finally {
        await watcher.cancel();
        client.close();
      }
    },
  };
}

function suite(name: 'redis' | 'etcd', binary: string | undefined): void {
  describe(`fleet-aware breakers on ${name}`, { skip: skipReason(binary, name === 'redis' ? 'redis-server' : 'etcd'), timeout: 180_000 }, () => {
    let server: RedisServer | EtcdServer;
    let url: string;
    let dep: Dependency;
    let workers: Worker[] = [];
    const spawnAll = async (count: number) => {
      const ws = Array.from({ length: count }, () => startWorker({ FLEET_STORE: name, STORE_URL: url }));
      await Promise.all(ws.map((w) => w.ready));
      return ws;
    };

    before(async () => {
      if (name === 'redis') {
        const r = await startRedis();
        server = r;
        url = r.url;
      } else {
        const e = await startEtcd();
        server = e;
        url = e.endpoint;
      }
      dep = await startDependency();
      workers = await spawnAll(CALLERS);
    });

    after(async () => {
      await Promise.all(workers.map((w) => w.send('exit')));
      await Promise.all(workers.map((w) => w.exited));
      await dep?.close();
      await server?.stop();
    });

    it(`a dependency that dies: with the fleet ≤ 2 × minimumCalls calls reach it before all ${CALLERS} callers are open, without ≈ ${CALLERS} ×; then exactly ${HALF_OPEN_CALLS} probes per openMs, and all close within 1 s of the probes succeeding`, async () => {
      const without = await deadRun(workers, dep, false, 'alone');
      await Promise.all(workers.map((w) => w.send('stop')));
      await warmUp(workers, dep);
      const withFleet = await deadRun(workers, dep, true, 'payments', name === 'etcd' ? url : undefined);
      const floor = name === 'etcd' ? withFleet.floor : undefined;
      say(`${name}: calls reaching the dead dependency before every caller was open: with the fleet ${withFleet.calls}, without ${without.calls}`);
      say(
        `${name}: pooled threshold (its ${MINIMUM_CALLS}th failed call) → all ${CALLERS} open: ${withFleet.thresholdToAllOpenMs} ms with the fleet, ${without.thresholdToAllOpenMs} ms without; opened by: ${withFleet.reasons.join(', ')}`,
      );
      say(`${name}: the propagation, median [max] over the callers: ${withFleet.timeline}`);
      if (floor !== undefined)
        say(
          `etcd: its own put → watch while the callers failed (the floor under the propagation): p50 ${median(floor).toFixed(1)} ms, p90 ${floor[Math.floor(floor.length * 0.9)]!.toFixed(1)} ms, max ${floor.at(-1)!.toFixed(1)} ms (${floor.length} puts in a row)`,
        );
      assert.ok(without.calls >= CALLERS * MINIMUM_CALLS * 0.9, `without the fleet each caller fails minimumCalls on its own: ${without.calls}`);
      // The goal (issue 28): ≤ 2 × minimumCalls — 20 failed calls, plus what the callers send while the
      // view propagates: one store write and its delivery after each caller's 2nd failure. The count is the
      // callers' and the store's time to react, so it follows how long they wait for a core: this file runs
      // alone, after every other test file (scripts/test.mjs, ALONE). Beside two other test files on this
      // 2-core machine the callers' event loops waited 40–400 ms and etcd's count read 28–102 (docs/fleet.md).
      assert.ok(withFleet.calls <= 2 * MINIMUM_CALLS, `with the fleet: ${withFleet.calls} > ${2 * MINIMUM_CALLS}; ${withFleet.timeline}`);
      assert.ok(withFleet.reasons.filter((r) => r === 'open fleet').length >= CALLERS - 1, `opened by the fleet: ${withFleet.reasons.join(', ')}`);

      // Recovery: the dependency stays dead until the probes of four permit periods reached it; count what
      // reaches it. The first and the last of them may be cut (probes before the count began, or still to
      // come); the two between are whole.
      const openedAt = performance.now();
      dep.hits.length = 0;
      const periodsSeen = () => new Set(dep.hits.flatMap((h) => (h.period === undefined ? [] : [h.period]))).size;
      await waitFor('the probes of four permit periods', () => periodsSeen() >= 4, 10 * OPEN_MS);
      const hits = [...dep.hits];
      // Each probe names the permit period it was let through by (the period's start in the store: see the
      // worker), so probes are counted per period whatever the time between a permit and its call — the
      // bursts of one period's probes, split by their arrival times, ran into the next period's under load
      // (a permit answered in 0.6 s, the next period's at once: 'bursts' of 1 and 7, or 4 and 3).
      const periods = new Map<number, number[]>();
      for (const h of hits) if (h.period !== undefined) periods.set(h.period, [...(periods.get(h.period) ?? []), h.at]);
      const starts = [...periods.keys()].sort((a, b) => a - b);
      const unpermitted = hits.filter((h) => h.period === undefined).length;
      say(
        `${name}: probes while dead, per permit period: ${starts.map((s) => periods.get(s)!.length).join(', ')} (periods starting ${starts.map((s) => s - starts[0]!).join(', ')} ms after the first; probes arriving at ${starts
          .map((s) =>
            periods
              .get(s)!
              .map((t) => Math.round(t - openedAt))
              .join('+'),
          )
          .join(', ')} ms); without a permit: ${unpermitted}`,
      );
      assert.equal(unpermitted, 0, 'every call that reached the dead dependency was a probe under a fleet permit');
      for (let i = 1; i < starts.length; i++) assert.ok(starts[i]! - starts[i - 1]! >= OPEN_MS, `one permit period per openMs: ${starts.join(', ')}`);
      for (const [i, s] of starts.entries()) {
        const n = periods.get(s)!.length;
        if (i === 0 || i === starts.length - 1) assert.ok(n <= HALF_OPEN_CALLS, `at most halfOpenCalls probes in the period at ${s}: ${n}`);
        else assert.equal(n, HALF_OPEN_CALLS, `exactly halfOpenCalls probes across the fleet in the period at ${s}`);
      }
      const still = await Promise.all(workers.map((w) => w.stats()));
      const transitions = workers.flatMap((w, i) =>
        w.events.filter((e) => e.at >= openedAt).map((e) => `#${i} ${Math.round(e.at - openedAt)} ms ${e.what} (${e.why})`),
      );
      say(
        `${name}: while dead: permits per caller ${still.map((s) => s.breaker.fleet?.probePermits).join(', ')}; store errors per caller ${still.map((s) => s.breaker.fleet?.storeErrors).join(', ')}; transitions ${transitions.length === 0 ? 'none' : transitions.join('; ')}`,
      );
      assert.ok(
        still.every((s) => s.breaker.reason === 'fleet'),
        'every caller still held by the fleet',
      );
      dep.hits.length = 0;
      dep.dead = false;
      const back = performance.now();
      await waitFor('every caller closed', () => allIn(workers, 'closed', back), 2 * OPEN_MS + 2_000);
      // On the wall, at both ends: when the dependency answered the probe, and when each caller's breaker
      // closed (not when the parent read that from the caller's output, which its own loop delays under load).
      // The fleet closes when one permit period's probes all succeed. A period that began while the
      // dependency was dead (a probe of it failed, another came after the revival) cannot close it, so
      // the probes that close it are the first period's whose halfOpenCalls probes all came after it:
      // the 2nd good probe overall may belong to the period before that (seen in CI: 1.5 s "late").
      const goodByPeriod = new Map<number, number[]>();
      let lastProbe: number | undefined;
      for (const h of dep.hits) {
        if (h.period === undefined) continue;
        const walls = [...(goodByPeriod.get(h.period) ?? []), h.wall];
        goodByPeriod.set(h.period, walls);
        if (walls.length === HALF_OPEN_CALLS && !periods.has(h.period)) {
          lastProbe = h.wall;
          break;
        }
      }
      assert.ok(lastProbe !== undefined, `a permit period whose ${HALF_OPEN_CALLS} probes all reached the revived dependency`);
      const closedIn = Math.round(Math.max(...workers.map((w) => w.events.find((e) => e.what.startsWith('closed') && e.at >= back)!.wall)) - lastProbe);
      say(
        `${name}: every caller closed ${closedIn} ms after the dependency answered the ${HALF_OPEN_CALLS}th good probe of the permit period that closed the fleet`,
      );
      assert.ok(closedIn <= 1_000, `closed within 1 s of the probes succeeding: ${closedIn} ms`);
      await Promise.all(workers.map((w) => w.send('stop')));
    });

    it('poisoning: one caller whose calls all fail (its network to the dependency is broken) opens alone; the nine others refuse nothing', async () => {
      dep.dead = false;
      const closedPort = await freePort();
      await Promise.all(workers.map((w) => w.send(`breaker ${JSON.stringify({ fleet: true, key: 'poison' })}`)));
      const t0 = performance.now();
      await workers[0]!.send(`go http://127.0.0.1:${closedPort}/`);
      await Promise.all(workers.slice(1).map((w) => w.send(`go ${dep.url}`)));
      await waitFor('the broken caller open', () => workers[0]!.events.some((e) => e.what === 'open local' && e.at >= t0), 20_000);
      // The nine see the broken caller's evidence, then each makes minimumCalls more calls with it in view: none refused.
      await waitFor(
        'the nine see the failing reporter',
        async () => (await Promise.all(workers.slice(1).map((w) => w.stats()))).every((s) => s.breaker.fleet?.failingReporters === 1),
        20_000,
      );
      const seen = await Promise.all(workers.slice(1).map((w) => w.stats()));
      await waitFor(
        'minimumCalls more calls by each of the nine',
        async () =>
          (await Promise.all(workers.slice(1).map((w) => w.stats()))).every(
            (s, i) => s.ok + s.failed + s.refused >= seen[i]!.ok + seen[i]!.failed + seen[i]!.refused + MINIMUM_CALLS,
          ),
        20_000,
      );
      const stats = await Promise.all(workers.map((w) => w.stats()));
      await Promise.all(workers.map((w) => w.send('stop')));
      const nine = stats.slice(1);
      say(
        `${name}: poisoning: the broken caller ${stats[0]!.failed} failed / ${stats[0]!.refused} refused; the nine ${nine.reduce((a, s) => a + s.ok, 0)} ok, ${nine.reduce((a, s) => a + s.refused, 0)} refused; view ${JSON.stringify(nine[0]!.breaker.fleet)}`,
      );
      assert.equal(stats[0]!.breaker.reason, 'local', JSON.stringify({ stats: stats[0], events: workers[0]!.events }));
      assert.equal(nine[0]!.breaker.fleet?.failingReporters, 1, 'the nine see the one failing reporter');
      for (const s of nine) {
        assert.equal(s.refused, 0);
        assert.equal(s.failed, 0);
        assert.equal(s.breaker.state, 'closed');
      }
    });

    it(`the store killed (SIGKILL): no call fails because of it, the view says unavailable and returns with the store; a SIGKILLed caller leaves the reporters after its TTL`, async () => {
      dep.dead = false;
      await Promise.all(workers.map((w) => w.send(`breaker ${JSON.stringify({ fleet: true, key: 'outage' })}`)));
      await Promise.all(workers.map((w) => w.send(`go ${dep.url}`)));
      await waitFor(
        'every view available with all reporters',
        async () =>
          (await Promise.all(workers.map((w) => w.stats()))).every((s) => s.breaker.fleet?.available === true && s.breaker.fleet.reporters === CALLERS),
        10_000,
      );
      await server.kill();
      await waitFor(
        'every view unavailable',
        async () => (await Promise.all(workers.map((w) => w.stats()))).every((s) => s.breaker.fleet?.available === false),
        10_000,
      );
      await new Promise((r) => setTimeout(r, 500)); // the outage's length beyond its detection: the scenario
      await server.restart();
      await waitFor(
        'every view back',
        async () => (await Promise.all(workers.map((w) => w.stats()))).every((s) => s.breaker.fleet?.available === true),
        20_000,
      );
      const stats = await Promise.all(workers.map((w) => w.stats()));
      say(
        `${name}: store outage: ${stats.reduce((a, s) => a + s.ok, 0)} ok, ${stats.reduce((a, s) => a + s.failed, 0)} failed, ${stats.reduce((a, s) => a + s.refused, 0)} refused; store errors per caller ${stats.map((s) => s.breaker.fleet?.storeErrors).join(', ')}`,
      );
      for (const s of stats) {
        assert.equal(s.failed, 0);
        assert.equal(s.refused, 0);
      }
      // A caller killed with SIGKILL (no leave): the others count it until its TTL runs out.
      const victim = workers.pop()!;
      await waitFor(
        'all reporters seen again',
        async () => (await Promise.all(workers.map((w) => w.stats()))).every((s) => s.breaker.fleet?.reporters === CALLERS),
        15_000,
      );
      victim.child.kill('SIGKILL');
      await victim.exited;
      const killedAt = performance.now();
      await waitFor(
        'the killed caller gone from every view',
        async () => (await Promise.all(workers.map((w) => w.stats()))).every((s) => s.breaker.fleet?.reporters === CALLERS - 1),
        15_000,
      );
      const goneIn = Math.round(performance.now() - killedAt);
      say(`${name}: a SIGKILLed caller left every view ${goneIn} ms after (ttlMs ${TTL_MS})`);
      assert.ok(goneIn <= TTL_MS + 2_000, `gone within its TTL (and etcd's whole-second lease) plus a little: ${goneIn} ms`);
      await Promise.all(workers.map((w) => w.send('stop')));
    });
  });
}

if (process.env.BULWARK_FLEET_WORKER === '1') {
  await worker();
} else {
  const only = process.env.BULWARK_FLEET_STORES?.split(',');
  if (only === undefined || only.includes('redis')) suite('redis', redisBinary);
  if (only === undefined || only.includes('etcd')) suite('etcd', etcdBinary);
}
