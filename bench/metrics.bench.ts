/**
 * metrics: what tracking costs. Every subject runs in its own process.
 *
 *   npm run bench -- metrics        (BENCH_RUNS=3 BENCH_MS=500 while iterating)
 *
 * What it promises, checked as `targets` and printed ✓/✗ after each table:
 * - tracked vs untracked within 5 %: SreBreaker and CircuitBreaker `execute` success path,
 *   `TokenLimiter.allow()`, and `ResilientClient.call` (whose attempts and calls feed duration
 *   histograms), each measured A/B in one process, alternating rounds: the ratio is the median over
 *   rounds of tracked / untracked ns per op; the client within 3 % (issue 31): 1.007–1.048 over 12
 *   runs (median 1.018, 10 of them ≤ 1.03; load 4–12, pinned to core 0), against 1.066–1.108 (median
 *   1.073) in runs alternating with them when each answered call called the metrics' hook. What the
 *   hook cost then (one process per variant, against the same client untracked, medians of 15–25
 *   processes): one that does nothing, inlined, ~1.00; the same not inlined (a call, two doubles
 *   boxed) ~1.03; two increments of a typed array in it ~1.03; two histogram observations ~1.05–1.09 —
 *   what was inlined into CallRun.finish took the inlining budget of calls made there. Now a call notes
 *   its two durations in its service's batch (two stores, finish's own code) and the metrics fold 128
 *   at a time (~2.6 ns a call: a paired observer, sums in registers, runs of one bucket counted once);
 * - a scrape of a BreakerGroup of 10 000 SreBreakers plus a KeyedLimiter holding 1 000 keys takes at
 *   most 50 ms (text size `textKB`, `series`, `seriesPerBreaker`), and beats the floor measured in the
 *   same run: prom-client's own `registry.metrics()` serializing as many series from pre-set Gauges and
 *   Counters. The same scrape as the handlers send it, as one Buffer (`metricsBuffer()`) and through
 *   prom-client's formatter (`registry.metrics()`, which stays correct, only slower) are printed too.
 *   Issue 31's target: the scrape as the handlers send it in ≤ 10 ms — its parts (each family's bytes,
 *   in the buffer they were rendered in), handed back at once as by a response that has finished; the
 *   handlers write them to the response one by one and never join them (the join, `metricsBuffer()`,
 *   is a fresh ~5.5 MB a scrape, whose page faults and copy cost more than the rendering) — beside its
 *   floor, the same bytes written into a fresh buffer from buffers made beforehand, one per line (its
 *   own ✓/✗ says whether 10 ms is within reach on the machine; its fresh buffer's page faults are in
 *   it, so the scrape in parts can beat it). The three are also measured in one process, alternating
 *   (`sentMs`, `joinedMs`, `floorMs`, the medians over rounds of sent / floor and sent / joined, and the
 *   page faults each takes), which the machine's drift cannot tilt. A line unchanged since the last
 *   scrape is copied from it, so the same scrape after every breaker took a call (those 10 000 calls
 *   included) is printed too, with `keptMB`, what the scrapes keep between them. Issue 31's ≤ 10 ms
 *   also holds for the scrape paced like a real scraper's (`pacedMs`, its own ✓/✗): the clock moves
 *   15 s between two scrapes, so that every breaker's 10 s window has passed whole and is emptied when
 *   the scrape reads its stats, and a different tenth of the breakers takes a call in between (only the
 *   scrape is timed); measured in one process against the same scrape back to back (`backMs`,
 *   `pacedVsBack`, medians over rounds, alternating); the same every 5 s is printed too (no target),
 *   where the windows pass in part. The breakers run on the default coarse clock over
 *   a ManualClock, since a real 15 s pause a scrape would make a run last hours. The heap each tracked
 *   breaker adds is printed as `bytesPerBreaker` (tracked standalone breakers against the same
 *   breakers untracked);
 * - the same scrape through the real handler over loopback HTTP, against a server answering
 *   `metricsBuffer()` with `res.end` (what the handler did before) and a minimal node:http server
 *   answering the same bytes from one buffer made beforehand, all in one process with their client,
 *   alternating rounds: `handlerExtraMs` and `joinedExtraMs` (medians over rounds) are what each adds
 *   to sending the bytes; printed, no target (the socket's and the client's work are the machine's,
 *   not the scrape's). Scrapes back to back let the allocator reuse the joined buffer's memory, so the
 *   join's page faults, which a scrape every 15 s meets, mostly do not show here (`joinedFaults`);
 * - against opossum 9 + opossum-prometheus 0.3 on the same breaker workload (success path with the
 *   exporter attached; a scrape of 1 000 breakers): bulwark tracked is faster on both.
 */
import { createServer, request, Agent, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import Opossum from 'opossum';
import OpossumPrometheus from 'opossum-prometheus';
import { Counter, Gauge, Registry } from 'prom-client';
import { bench, fasterBy, type Subject, type Target } from './harness.js';
import { BreakerGroup, CircuitBreaker, SreBreaker } from '../src/breaker/index.js';
import { KeyedLimiter, TokenLimiter } from '../src/limit/index.js';
import { ManualClock } from '../src/core/clock.js';
import { CoarseClock, setDefaultCoarseClock } from '../src/core/coarse-clock.js';
import { MemoryRegistry } from '../src/registry/index.js';
import { ResilientClient } from '../src/client/index.js';
import { BulwarkMetrics, metricsHandler } from '../src/metrics/index.js';
import { EXPOSITION_PARTS } from '../src/metrics/metrics.js';

async function task(): Promise<number> {
  return 1;
}

function gc(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

function tracked<T extends object>(c: T): T {
  new BulwarkMetrics({ registry: new Registry() }).track(c);
  return c;
}

async function clientSubject(track: boolean): Promise<Part> {
  const registry = new MemoryRegistry();
  for (const id of ['a', 'b', 'c']) await registry.register({ id, name: 'svc', address: `127.0.0.1:${9000 + id.charCodeAt(0)}` });
  const c = new ResilientClient({ registry });
  if (track) tracked(c);
  const fn = (_i: unknown, _s: AbortSignal) => Promise.resolve(1);
  await c.call('svc', fn);
  return {
    op: () => c.call('svc', fn),
    close: async () => {
      await c.close();
      await registry.close();
    },
  };
}

/** Part is one side of an interleaved subject. */
interface Part {
  op: () => unknown;
  close?: () => Promise<void>;
}

/** ROUND: ops per side per round of an interleaved subject. */
const ROUND = 200;

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;

/**
 * interleaved measures an untracked and a tracked part in ONE process, alternating rounds of ROUND
 * ops, short enough that most rounds see no preemption (which side goes first alternates too), so that machine noise hits both alike. Its extras are
 * the medians over rounds of each side's ns per op and of their ratio (tracked / untracked).
 */
async function interleaved(make: (track: boolean) => Part | Promise<Part>, isAsync: boolean): Promise<Subject> {
  const plain = await make(false);
  const watched = await make(true);
  const ratios: number[] = [];
  const plainNs: number[] = [];
  const watchedNs: number[] = [];
  const side = async (op: () => unknown): Promise<number> => {
    const t = performance.now();
    if (isAsync) for (let i = 0; i < ROUND; i++) await op();
    else for (let i = 0; i < ROUND; i++) op();
    return ((performance.now() - t) * 1e6) / ROUND;
  };
  let round = 0;
  return {
    op: async () => {
      let a: number;
      let b: number;
      if (round++ % 2 === 0) {
        a = await side(plain.op);
        b = await side(watched.op);
      } else {
        b = await side(watched.op);
        a = await side(plain.op);
      }
      plainNs.push(a);
      watchedNs.push(b);
      ratios.push(b / a);
    },
    async: true,
    batch: 1,
    extra: () => ({ untrackedNs: median(plainNs), trackedNs: median(watchedNs), ratio: median(ratios) }),
    teardown: async () => {
      await plain.close?.();
      await watched.close?.();
    },
  };
}

const within5 = (what: string, subject: string): Target => ({
  label: `${what}: tracked ≤ 1.05× untracked (A/B in one process, median of rounds)`,
  check: (m) => {
    const value = m.extra(subject, 'ratio');
    return { value, ok: value <= 1.05, unit: '×' };
  },
});

const SRE = 'SreBreaker.execute: untracked | tracked';
const CIRCUIT = 'CircuitBreaker.execute: untracked | tracked';
const TOKEN = 'TokenLimiter.allow: untracked | tracked';
const CLIENT = 'ResilientClient.call: untracked | tracked';

await bench('metrics: tracked vs untracked (hot paths, A/B interleaved in one process)', {
  subjects: {
    [SRE]: () =>
      interleaved((track) => {
        const b = new SreBreaker();
        if (track) tracked(b);
        return { op: () => b.execute(task) };
      }, true),
    [CIRCUIT]: () =>
      interleaved((track) => {
        const b = new CircuitBreaker();
        if (track) tracked(b);
        return { op: () => b.execute(task) };
      }, true),
    [TOKEN]: () =>
      interleaved((track) => {
        const l = new TokenLimiter({ rate: 1e9, burst: 1e9 });
        if (track) tracked(l);
        return { op: () => l.allow() };
      }, false),
    [CLIENT]: () => interleaved(clientSubject, true),
  },
  targets: [
    within5('SreBreaker.execute', SRE),
    within5('CircuitBreaker.execute', CIRCUIT),
    within5('TokenLimiter.allow', TOKEN),
    within5('ResilientClient.call', CLIENT),
    {
      label: 'ResilientClient.call: tracked ≤ 1.03× untracked (issue 31; A/B in one process, median of rounds)',
      check: (m) => {
        const value = m.extra(CLIENT, 'ratio');
        return { value, ok: value <= 1.03, unit: '×' };
      },
    },
  ],
});

const SCRAPE = 'scrape: BreakerGroup of 10 000 SreBreakers + KeyedLimiter of 1 000 keys';
const SCRAPE_SENT = 'the same scrape as the handlers send it (its parts, each written to the response, none joined)';
const SCRAPE_BYTES = 'the same scrape as one Buffer (metricsBuffer: the parts joined)';
const SCRAPE_PROM = 'the same scrape through prom-client (registry.metrics())';
const FLOOR = 'floor: prom-client registry.metrics() of as many pre-set Gauges/Counters series';
const BYTES_FLOOR = 'floor: writing the same bytes from pre-built buffers (one per sample line)';

const SENT_FLOOR = 'as the handlers send it | as one Buffer | its floor (one process, alternating)';
const SCRAPE_PACED = 'paced like a real scraper (15 s and 1 000 calls between scrapes) | back to back (one process, alternating)';
const SCRAPE_PACED_5S = 'paced every 5 s (and 1 000 calls between scrapes) | back to back (one process, alternating)';
const SCRAPE_BUSY = 'the same scrape as the handlers send it, each breaker having taken a call since the last (10 000 calls included)';

async function scrapeSetup(): Promise<BulwarkMetrics> {
  return (await scrapeGroup()).metrics;
}

async function scrapeGroup(): Promise<{ metrics: BulwarkMetrics; group: BreakerGroup }> {
  const group = new BreakerGroup({ maxBreakers: 20_000 });
  for (let i = 0; i < 10_000; i++) await group.execute(`svc-${i}`, task);
  const keyed = new KeyedLimiter({ rate: 10 });
  for (let i = 0; i < 1_000; i++) keyed.allow(`user-${i}`);
  const m = new BulwarkMetrics({ registry: new Registry() });
  m.track(group, { name: 'peers' });
  m.track(keyed, { name: 'per-user' });
  return { metrics: m, group };
}

/** seriesOf counts the sample lines of a text exposition. */
function seriesOf(text: string): number {
  let n = 0;
  for (const l of text.split('\n')) if (l.length > 0 && !l.startsWith('#')) n++;
  return n;
}

/**
 * sent is what a handler does with a scrape but the socket's own work: the scrape's parts, handed back
 * once sent (a response that has finished; here at once, as to a client that reads at once).
 */
async function sent(m: BulwarkMetrics): Promise<number> {
  const x = await m[EXPOSITION_PARTS]();
  x.release();
  return x.length;
}

async function scrapeSubject(how: 'text' | 'sent' | 'bytes' | 'prom' | 'busy'): Promise<Subject> {
  const { metrics: m, group } = await scrapeGroup();
  const series = seriesOf(await m.metrics());
  // What the scrapes keep between them (buffers, and the parts of the lines they copy when unchanged).
  gc();
  const before = process.memoryUsage();
  for (let i = 0; i < 3; i++) await sent(m);
  gc();
  const after = process.memoryUsage();
  const keptMB = (after.heapUsed + after.arrayBuffers - before.heapUsed - before.arrayBuffers) / 1e6;
  let bytes = 0;
  const names = Array.from({ length: 10_000 }, (_, i) => `svc-${i}`);
  const op =
    how === 'text'
      ? async () => void (bytes = (await m.metrics()).length)
      : how === 'sent'
        ? async () => void (bytes = await sent(m))
        : how === 'bytes'
          ? async () => void (bytes = (await m.metricsBuffer()).length)
          : how === 'busy'
            ? async () => {
                for (const n of names) await group.execute(n, task);
                bytes = await sent(m);
              }
            : async () => void (bytes = (await m.registry.metrics()).length);
  return { op, async: true, batch: 1, extra: () => ({ textKB: bytes / 1024, series, seriesPerBreaker: (series - 4) / 10_000, keptMB }) };
}

/**
 * floorSubject: prom-client serializing the same number of series, with the same names and labels,
 * from plain Gauges and Counters set beforehand (no collect callbacks): what any exporter built on
 * prom-client's formatter cannot go below.
 */
async function floorSubject(): Promise<Subject> {
  const text = await (await scrapeSetup()).metrics();
  const registry = new Registry();
  const made = new Map<string, Gauge | Counter>();
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m === null) continue;
    const labels: Record<string, string> = {};
    for (const pair of (m[2] ?? '').matchAll(/([a-z_]+)="([^"]*)"/g)) labels[pair[1]!] = pair[2]!;
    let metric = made.get(m[1]!);
    if (metric === undefined) {
      const config = { name: m[1]!, help: 'h', labelNames: Object.keys(labels), registers: [registry] };
      metric = m[1]!.endsWith('_total') ? new Counter(config) : new Gauge(config);
      made.set(m[1]!, metric);
    }
    if (metric instanceof Counter) metric.inc(labels, Number(m[3]));
    else metric.set(labels, Number(m[3]));
  }
  let bytes = 0;
  const series = seriesOf(await registry.metrics());
  return { op: async () => void (bytes = (await registry.metrics()).length), async: true, batch: 1, extra: () => ({ textKB: bytes / 1024, series }) };
}

/**
 * bytesFloorSubject: issue 31's floor for the scrape — the exposition's bytes written into a fresh
 * buffer from buffers made beforehand, one per line: what a scrape costs that has nothing left to
 * read or format, only bytes to write.
 */
async function bytesFloorSubject(): Promise<Subject> {
  const floor = bytesFloor(await (await scrapeSetup()).metricsBuffer());
  let bytes = 0;
  return {
    op: async () => void (bytes = floor.write()),
    async: true,
    batch: 1,
    extra: () => ({ textKB: bytes / 1024, lines: floor.lines }),
  };
}

/** bytesFloor answers the floor's write of `text` (see bytesFloorSubject): it answers the bytes written. */
function bytesFloor(text: Buffer): { write: () => number; lines: number } {
  const lines: Buffer[] = [];
  for (let at = 0; at < text.length;) {
    let end = text.indexOf(0x0a, at);
    if (end === -1) end = text.length - 1;
    lines.push(Buffer.from(text.subarray(at, end + 1)));
    at = end + 1;
  }
  return {
    write: () => {
      // A native copy per line: for lines of ~70 bytes it beats a JS byte loop (9 against 18 ms CPU for 80 000).
      const out = Buffer.allocUnsafe(text.length);
      let o = 0;
      for (const l of lines) o += l.copy(out, o);
      return o;
    },
    lines: lines.length,
  };
}

/**
 * rotation runs `sides` in turn, the order turning each round (so that the machine's drift hits all
 * alike), and keeps each side's ms and page faults (process.resourceUsage()) per round, divided by
 * `per` (the operations one turn of a side makes).
 */
function rotation(sides: (() => Promise<unknown>)[], per = 1): { op: () => Promise<void>; ms: number[][]; faults: number[][] } {
  const ms = sides.map((): number[] => []);
  const faults = sides.map((): number[] => []);
  let round = 0;
  return {
    ms,
    faults,
    op: async () => {
      const r = round++;
      for (let k = 0; k < sides.length; k++) {
        const i = (k + r) % sides.length;
        const f = process.resourceUsage().minorPageFault;
        const t = performance.now();
        await sides[i]!();
        ms[i]!.push((performance.now() - t) / per);
        faults[i]!.push((process.resourceUsage().minorPageFault - f) / per);
      }
    },
  };
}

/**
 * sentFloorSubject: the scrape as the handlers send it, the same scrape as one Buffer and the floor, in
 * ONE process, alternating rounds (the order turns each round), so that the machine's drift hits all
 * three alike: its extras are the medians over rounds of each one's ms and of sent / floor and
 * sent / joined, and the page faults each takes (process.resourceUsage()).
 */
async function sentFloorSubject(): Promise<Subject> {
  const { metrics: m } = await scrapeGroup();
  const floor = bytesFloor(await m.metricsBuffer());
  const { op, ms, faults } = rotation([() => sent(m), async () => (await m.metricsBuffer()).length, async () => floor.write()]);
  return {
    op,
    async: true,
    batch: 1,
    extra: () => ({
      sentMs: median(ms[0]!),
      joinedMs: median(ms[1]!),
      floorMs: median(ms[2]!),
      sentVsFloor: median(ms[0]!.map((x, i) => x / ms[2]![i]!)),
      sentVsJoined: median(ms[0]!.map((x, i) => x / ms[1]![i]!)),
      sentFaults: median(faults[0]!),
      joinedFaults: median(faults[1]!),
      floorFaults: median(faults[2]!),
    }),
  };
}

/** PACE_MS: the time between two paced scrapes, Prometheus's default scrape interval. */
const PACE_MS = 15_000;
/** PACE_5S_MS: a shorter scrape interval than the breakers' 10 s window, so that their windows pass in part. */
const PACE_5S_MS = 5_000;
/** PACE_CALLS: the breakers that take a call between two paced scrapes (a different tenth each time). */
const PACE_CALLS = 1_000;

/**
 * pacedSubject: the scrape as the handlers send it when time passes between scrapes, as with a real
 * scraper, against the same scrape back to back, in ONE process, alternating rounds (the order turns
 * each round). The breakers run on the process's default coarse clock, as they do when made by a
 * group's default factory, but over a ManualClock (`setDefaultCoarseClock`): a real 15 s pause per
 * scrape would make a run last hours, and what the scrape meets is only the time its breakers read.
 * Before each paced scrape the clock moves `paceMs` (PACE_MS: every breaker's 10 s window has passed
 * whole; PACE_5S_MS: half of it, and whole only for the breakers idle since two scrapes) and
 * PACE_CALLS breakers, a different tenth of the group each time, take a call; only the scrape is
 * timed. Its extras are the medians over rounds of each one's ms and of paced / back to back.
 */
async function pacedSubject(paceMs: number): Promise<Subject> {
  const manual = new ManualClock(1_000_000);
  setDefaultCoarseClock(new CoarseClock({ source: manual }));
  const { metrics: m, group } = await scrapeGroup();
  const names = Array.from({ length: 10_000 }, (_, i) => `svc-${i}`);
  let next = 0;
  const paced = async (): Promise<number> => {
    manual.advance(paceMs);
    for (let i = 0; i < PACE_CALLS; i++) await group.execute(names[next++ % names.length]!, task);
    const t = performance.now();
    await sent(m);
    return performance.now() - t;
  };
  const back = async (): Promise<number> => {
    const t = performance.now();
    await sent(m);
    return performance.now() - t;
  };
  await paced();
  const ms: number[][] = [[], []];
  let round = 0;
  return {
    op: async () => {
      const r = round++;
      if (r % 2 === 0) {
        ms[0]!.push(await paced());
        ms[1]!.push(await back());
      } else {
        ms[1]!.push(await back());
        ms[0]!.push(await paced());
      }
    },
    async: true,
    batch: 1,
    extra: () => ({ pacedMs: median(ms[0]!), backMs: median(ms[1]!), pacedVsBack: median(ms[0]!.map((x, i) => x / ms[1]![i]!)) }),
  };
}

/** heapSubject: the heap 10 000 standalone breakers take, tracked or not; op is a tracked scrape-free get. */
function heapSubject(track: boolean): Subject {
  gc();
  const before = process.memoryUsage().heapUsed;
  const m = new BulwarkMetrics({ registry: new Registry() });
  const breakers: SreBreaker[] = [];
  for (let i = 0; i < 10_000; i++) {
    const b = new SreBreaker({ name: `b${i}` });
    if (track) m.track(b);
    breakers.push(b);
  }
  gc();
  const bytes = process.memoryUsage().heapUsed - before;
  let i = 0;
  // teardown references the metrics: they stay reachable (and counted) until measured.
  return { op: () => breakers[i++ % breakers.length]!.stats(), extra: () => ({ bytesPerBreaker: bytes / 10_000 }), teardown: () => m.close() };
}

await bench('metrics: a scrape of 10 000 breakers and 1 000 keys; memory per tracked breaker', {
  baseline: SCRAPE,
  subjects: {
    [SCRAPE]: () => scrapeSubject('text'),
    [SCRAPE_SENT]: () => scrapeSubject('sent'),
    [SCRAPE_BYTES]: () => scrapeSubject('bytes'),
    [SCRAPE_BUSY]: () => scrapeSubject('busy'),
    [SCRAPE_PROM]: () => scrapeSubject('prom'),
    [FLOOR]: () => floorSubject(),
    [BYTES_FLOOR]: () => bytesFloorSubject(),
    [SENT_FLOOR]: () => sentFloorSubject(),
    [SCRAPE_PACED]: () => pacedSubject(PACE_MS),
    [SCRAPE_PACED_5S]: () => pacedSubject(PACE_5S_MS),
    '10 000 SreBreakers (untracked): heap': () => heapSubject(false),
    '10 000 SreBreakers (tracked): heap': () => heapSubject(true),
  },
  targets: [
    {
      label: 'scrape of 10 000 breakers + 1 000 keys (metrics()) ≤ 50 ms',
      check: (m) => {
        const value = m.ns(SCRAPE) / 1e6;
        return { value, ok: value <= 50, unit: ' ms' };
      },
    },
    fasterBy('the scrape is faster than prom-client serializing as many pre-set series (the floor)', SCRAPE, FLOOR, 1),
    {
      // Issue 31: ≤ 10 ms, beside its floor; the floor's own time says whether 10 ms is within reach here.
      label: 'scrape as the handlers send it (its parts) of 10 000 breakers + 1 000 keys ≤ 10 ms',
      check: (m) => {
        const value = m.ns(SCRAPE_SENT) / 1e6;
        return { value, ok: value <= 10, unit: ' ms' };
      },
    },
    {
      label: 'the same scrape paced like a real scraper (15 s and 1 000 calls between scrapes; median of its rounds) ≤ 10 ms',
      check: (m) => {
        const value = m.extra(SCRAPE_PACED, 'pacedMs');
        return { value, ok: value <= 10, unit: ' ms' };
      },
    },
    {
      label: 'its floor, the same bytes written from pre-built buffers, ≤ 10 ms (else 10 ms is out of reach on this machine)',
      check: (m) => {
        const value = m.ns(BYTES_FLOOR) / 1e6;
        return { value, ok: value <= 10, unit: ' ms' };
      },
    },
    {
      label: 'heap per tracked breaker (tracked − untracked) ≤ 1 KB',
      check: (m) => {
        const value = m.extra('10 000 SreBreakers (tracked): heap', 'bytesPerBreaker') - m.extra('10 000 SreBreakers (untracked): heap', 'bytesPerBreaker');
        return { value, ok: value <= 1024, unit: ' B' };
      },
    },
  ],
});

/** listen starts `server` on a free loopback port and answers its URL. */
async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
}

/** fetched asks `url` over `agent` and answers the body's length once it is all read (the body dropped). */
function fetched(url: string, agent: Agent): Promise<number> {
  return new Promise((resolve, reject) => {
    request(url, { agent }, (res) => {
      let n = 0;
      res.on('data', (c: Buffer) => (n += c.length));
      res.on('end', () => resolve(n));
      res.on('error', reject);
    })
      .on('error', reject)
      .end();
  });
}

/** LOOPBACK_ROUND: scrapes per side per round of the loopback comparison. */
const LOOPBACK_ROUND = 3;

/**
 * loopbackSubject: the handler answering the 10 000-breaker scrape over loopback HTTP, against a server
 * answering `metricsBuffer()` with `res.end` (the parts joined, as the handler did before it wrote them
 * one by one) and a minimal node:http server answering the same bytes from one buffer made beforehand,
 * in ONE process (client included), alternating rounds (the order turns each round): all three pay the
 * same socket and client work, so a difference to the pre-built side is what a handler adds to sending
 * the bytes. Its extras are the medians over rounds of each side's ms per scrape, of the differences to
 * the pre-built side and of handler / joined, and the page faults each side takes.
 */
async function loopbackSubject(): Promise<Subject> {
  const { metrics: m } = await scrapeGroup();
  const prebuilt = await m.metricsBuffer();
  const head = (res: ServerResponse): void => {
    res.setHeader('content-type', m.contentType);
    res.setHeader('cache-control', 'no-store');
  };
  const servers = [
    createServer(metricsHandler(m)),
    createServer((_req, res) => {
      void m.metricsBuffer().then((b) => {
        head(res);
        res.end(b);
      });
    }),
    createServer((_req, res) => {
      head(res);
      res.end(prebuilt);
    }),
  ];
  const urls: string[] = [];
  for (const s of servers) urls.push(await listen(s));
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const scrapes = (url: string) => async () => {
    for (let j = 0; j < LOOPBACK_ROUND; j++) if ((await fetched(url, agent)) !== prebuilt.length) throw new Error(`${url}: wrong length`);
  };
  const { op, ms, faults } = rotation(urls.map(scrapes), LOOPBACK_ROUND);
  return {
    op,
    async: true,
    batch: 1,
    extra: () => ({
      handlerMs: median(ms[0]!),
      joinedMs: median(ms[1]!),
      prebuiltMs: median(ms[2]!),
      handlerExtraMs: median(ms[0]!.map((x, i) => x - ms[2]![i]!)),
      joinedExtraMs: median(ms[1]!.map((x, i) => x - ms[2]![i]!)),
      handlerVsJoined: median(ms[0]!.map((x, i) => x / ms[1]![i]!)),
      handlerFaults: median(faults[0]!),
      joinedFaults: median(faults[1]!),
      prebuiltFaults: median(faults[2]!),
    }),
    teardown: async () => {
      agent.destroy();
      for (const s of servers) await new Promise((r) => s.close(r));
      await m.close();
    },
  };
}

const LOOPBACK = 'handler | metricsBuffer with res.end | the same bytes pre-built, over loopback HTTP (one process, alternating)';

await bench('metrics: the 10 000-breaker scrape over loopback HTTP (interleaved in one process)', {
  subjects: { [LOOPBACK]: () => loopbackSubject() },
  // A round is ~60 ms (nine scrapes): three times BENCH_MS, some 50 rounds a run by default.
  durationMs: 3 * Number(process.env.BENCH_MS ?? 1_000),
});

const OPOSSUM = 'opossum fire + opossum-prometheus';
const OURS = 'CircuitBreaker.execute + BulwarkMetrics';

await bench('metrics: against opossum + opossum-prometheus (same breaker workload)', {
  baseline: OURS,
  subjects: {
    [OURS]: () => {
      const b = tracked(new CircuitBreaker({ name: 'svc' }));
      return { op: () => b.execute(task), async: true };
    },
    'opossum fire (no exporter)': () => {
      const b = new Opossum(task, { name: 'svc' });
      return { op: () => b.fire(), async: true };
    },
    [OPOSSUM]: () => {
      const b = new Opossum(task, { name: 'svc' });
      new OpossumPrometheus({ circuits: [b], registry: new Registry() as never });
      return { op: () => b.fire(), async: true };
    },
    // Each breaker has served one call first: opossum-prometheus only has series for events seen.
    'scrape of 1 000 CircuitBreakers (BulwarkMetrics)': async () => {
      const m = new BulwarkMetrics({ registry: new Registry() });
      for (let i = 0; i < 1_000; i++) {
        const b = new CircuitBreaker({ name: `svc-${i}` });
        m.track(b);
        await b.execute(task);
      }
      let bytes = 0;
      return { op: async () => void (bytes = (await m.metrics()).length), async: true, batch: 1, extra: () => ({ textKB: bytes / 1024 }) };
    },
    'scrape of 1 000 opossum breakers (opossum-prometheus)': async () => {
      const circuits = Array.from({ length: 1_000 }, (_, i) => new Opossum(task, { name: `svc-${i}` }));
      for (const c of circuits) await c.fire();
      const p = new OpossumPrometheus({ circuits, registry: new Registry() as never });
      for (const c of circuits) await c.fire();
      let bytes = 0;
      return { op: async () => void (bytes = (await p.metrics).length), async: true, batch: 1, extra: () => ({ textKB: bytes / 1024 }) };
    },
  },
  targets: [
    fasterBy('success path: bulwark tracked faster than opossum + exporter', OURS, OPOSSUM, 1),
    fasterBy(
      'scrape of 1 000 breakers: bulwark faster than opossum-prometheus',
      'scrape of 1 000 CircuitBreakers (BulwarkMetrics)',
      'scrape of 1 000 opossum breakers (opossum-prometheus)',
      1,
    ),
  ],
});
