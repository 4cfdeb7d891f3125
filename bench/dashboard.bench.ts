/**
 * The dashboard's numbers (issue 29):
 * 1. Page weight: the page's bytes as served, and gzipped for scale.
 * 2. Time to first data on loopback: from opening `<path>/events` to the first frame's bytes; and in
 *    chromium (Debian's, driven by playwright-core), from the navigation's start to the first values drawn,
 *    over several page loads, with the browser's own timings of the steps between (the HTML's first and
 *    last byte, the script run, the stream open, its first frame, the first paint with values).
 * 3. The aggregator: a FleetFeed following 100 simulated instances (one process of 100 dashboardHandlers,
 *    each over a BulwarkMetrics of 20 components), one tick a second, one viewer: its CPU (share of one
 *    core) and memory. Goal: ≤ 10 % of a core. In the long mode (BENCH_AGGREGATOR_MINUTES=6) it is
 *    followed for that many minutes, past the 5 minutes of history it keeps, and its heap (after a full
 *    GC) is read each minute: the curve must flatten once the history is full.
 * 4. A process serving its dashboard: an HTTP service (every request through an HttpGuard; 20 components
 *    tracked) under a closed loop of 8 connections, with 0, 1 and 10 viewers on its dashboard, runs
 *    interleaved: CPU per 1 000 calls. Goal: 1 and 10 viewers ≤ 1.05 × none (the snapshot is taken once
 *    per tick whatever the number of viewers).
 * Every server is a child process stopped by PID; loads are bounded in time and count, on 127.0.0.1.
 * Environment: BENCH_PARTS (a comma list of weight, first-data, served, aggregator; default all),
 * BENCH_RUNS (default 5 rounds of 4.), BENCH_MS (ms per round of 4., default 5 000; 3. measures
 * 4 × BENCH_MS), BENCH_PAGE_LOADS (page loads in 2., default 9), BENCH_AGGREGATOR_MINUTES (3.'s long
 * mode; default 0: the short one). Run: `npm run bench -- dashboard`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { gzipSync } from 'node:zlib';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadavg } from 'node:os';
import { existsSync } from 'node:fs';
import { Pool } from 'undici';
import { chromium } from 'playwright-core';
import promClient from 'prom-client';
import { PAGE } from '../src/dashboard/page.js';
import { ProcessFeed } from '../src/dashboard/index.js';
import { BulwarkMetrics } from '../src/metrics/index.js';
import { ManualClock } from '../src/core/index.js';
import { CircuitBreaker } from '../src/breaker/index.js';
import { TokenLimiter } from '../src/limit/index.js';

const here = dirname(fileURLToPath(import.meta.url));
const compiled = !import.meta.url.endsWith('.ts');
const SUBJECT = join(here, compiled ? 'dashboard-subject.js' : 'dashboard-subject.ts');
const LOADER = compiled ? [] : ['--import', 'tsx'];
const PARTS = new Set((process.env.BENCH_PARTS ?? 'weight,first-data,served,aggregator').split(','));
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const PAGE_LOADS = Number(process.env.BENCH_PAGE_LOADS ?? 9);
const AGGREGATOR_MINUTES = Number(process.env.BENCH_AGGREGATOR_MINUTES ?? 0);
const CHROMIUM = '/usr/bin/chromium';
const MS = Number(process.env.BENCH_MS ?? 5_000);
/** The most requests one round of 4. sends, whatever the machine. */
const MAX_CALLS = 2_000_000;

const children: ChildProcess[] = [];
/** start runs a subject and answers the JSON line it prints once ready. */
function start<T>(args: string[], node: string[] = []): Promise<T> {
  const c = spawn(process.execPath, [...node, ...LOADER, SUBJECT, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(c);
  return new Promise((resolve, reject) => {
    let out = '';
    c.stdout!.on('data', (b: Buffer) => {
      out += b.toString();
      const nl = out.indexOf('\n');
      if (nl >= 0) resolve(JSON.parse(out.slice(0, nl)) as T);
    });
    c.once('exit', (code) => reject(new Error(`${args[0]} exited with ${code}`)));
  });
}
function stopAll(): void {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}

interface Usage {
  cpu: { user: number; system: number };
  rss: number;
  heapUsed: number;
  /** Memory of JavaScript objects held outside the heap (Buffers, sockets' data). */
  external: number;
}
/** usage reads a subject's CPU and memory; `gc` runs a full collection first (a subject started with --expose-gc). */
async function usage(port: number, gc = false): Promise<Usage> {
  return (await (await fetch(`http://127.0.0.1:${port}/cpu${gc ? '?gc=1' : ''}`)).json()) as Usage;
}
const MiB = (x: number) => (x / 2 ** 20).toFixed(1);
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(', ');
const cpuMs = (a: Usage, b: Usage) => (b.cpu.user + b.cpu.system - a.cpu.user - a.cpu.system) / 1000;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** viewer opens one event stream and reads it until `close`; answers the bytes read so far and the time to its first frame. */
function viewer(url: string): { close(): void; firstFrameMs: Promise<number>; bytes(): number } {
  const t0 = performance.now();
  let bytes = 0;
  let first!: (ms: number) => void;
  const firstFrameMs = new Promise<number>((r) => (first = r));
  let seen = false;
  const req = request(url, { headers: { accept: 'text/event-stream' } }, (res) => {
    res.on('data', (b: Buffer) => {
      bytes += b.length;
      if (!seen && b.includes('event: tick')) {
        seen = true;
        first(performance.now() - t0);
      }
    });
  });
  req.on('error', () => {});
  req.end();
  return { close: () => req.destroy(), firstFrameMs, bytes: () => bytes };
}

/** The page's own timings of one load, ms from the navigation's start (-1: the step did not happen). */
interface PageTimings {
  responseStart: number;
  responseEnd: number;
  domInteractive: number;
  streamOpen: number;
  firstTick: number;
  firstData: number;
  drawn: number;
  fcp: number;
  embedded: boolean;
}

/**
 * pageLoads opens the page `n` times, each in a fresh browser context (nothing cached), and reads the
 * browser's timings. `drawn` is when the first values were painted: the first contentful paint when the
 * values were in the document by then (that paint shows them), else the first animation frame that
 * starts once the page marked them (`bulwark-first-data`), the frame that paints them.
 */
async function pageLoads(url: string, n: number): Promise<PageTimings[]> {
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  const out: PageTimings[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      const page = await context.newPage();
      // Before the page's own script: watch every animation frame for the first one after the mark. (Text,
      // not a function: tsx would wrap a named function in a helper the page does not have.)
      await page.addInitScript(
        "(function(){function look(){if(performance.getEntriesByName('bulwark-first-data').length>0)window.__drawn=performance.now();else requestAnimationFrame(look)}requestAnimationFrame(look)})()",
      );
      await page.goto(url);
      // Functions, not text: a predicate given as text is run with eval, which the page's CSP refuses.
      await page.waitForFunction(
        () => (globalThis as unknown as { __drawn?: number }).__drawn !== undefined && performance.getEntriesByName('first-contentful-paint').length > 0,
        undefined,
        { timeout: 30_000 },
      );
      const [streamOpen, firstTick, firstData, fcp, embedded] = await page.evaluate(() =>
        ['bulwark-stream-open', 'bulwark-first-tick', 'bulwark-first-data', 'first-contentful-paint', 'bulwark-embedded-data'].map(
          (n) => performance.getEntriesByName(n)[0]?.startTime ?? -1,
        ),
      );
      const nav = await page.evaluate(() => {
        // The navigation's entry (the bench is type-checked without the DOM's types).
        const e = (performance.getEntriesByType as (t: string) => unknown[])('navigation')[0] as {
          responseStart: number;
          responseEnd: number;
          domInteractive: number;
        };
        return [e.responseStart, e.responseEnd, e.domInteractive];
      });
      const afterMark = await page.evaluate(() => (globalThis as unknown as { __drawn: number }).__drawn);
      out.push({
        responseStart: nav[0]!,
        responseEnd: nav[1]!,
        domInteractive: nav[2]!,
        streamOpen: streamOpen!,
        firstTick: firstTick!,
        firstData: firstData!,
        drawn: fcp! >= firstData! ? fcp! : afterMark,
        fcp: fcp!,
        embedded: embedded! >= 0,
      });
      await context.close();
    }
  } finally {
    await browser.close();
  }
  return out;
}

try {
  // 1.
  if (PARTS.has('weight')) {
    const page = Buffer.byteLength(PAGE);
    console.log(`## dashboard\n\npage: ${page} bytes (${(page / 1024).toFixed(1)} KiB; ${gzipSync(PAGE).length} gzipped); goal ≤ 300 KB`);
  }

  // 4'. What a tick costs, measured alone (the process's CPU per 1 000 calls is noisy on a shared machine).
  if (PARTS.has('served')) {
    const m = new BulwarkMetrics({ registry: new promClient.Registry() });
    for (let i = 0; i < 10; i++) {
      const b = new CircuitBreaker({ name: `b${i}` });
      for (let j = 0; j < 100; j++) b.admit().success();
      m.track(b);
      m.track(new TokenLimiter({ rate: 100 }), { name: `l${i}` });
    }
    const clock = new ManualClock(0);
    const feed = new ProcessFeed(m, { clock, tickMs: 1_000 });
    let bytes = 0;
    feed.onTick((f) => (bytes = f.length));
    for (let i = 0; i < 500; i++) clock.advance(1_000); // warm-up, and five minutes of history and more
    const n = 2_000;
    const t0 = process.cpuUsage();
    for (let i = 0; i < n; i++) clock.advance(1_000);
    const d = process.cpuUsage(t0);
    const perTickUs = (d.user + d.system) / n;
    console.log(
      `one tick of a process of 20 components (snapshot, rates, percentiles, history, JSON of ${(bytes / 1024).toFixed(1)} KiB): ${perTickUs.toFixed(0)} µs of CPU, ${(perTickUs / 10_000).toFixed(3)} % of a core at one tick a second; five minutes of history: ${(feed.history().length / 1024).toFixed(0)} KiB of JSON`,
    );
    await feed.close();
    await m.close();
  }

  // 2.
  if (PARTS.has('first-data') || PARTS.has('served')) {
    const served = await start<{ port: number }>(['served']);
    const events = `http://127.0.0.1:${served.port}/dashboard/events`;
    if (PARTS.has('first-data')) {
      const firsts: number[] = [];
      for (let i = 0; i < 20; i++) {
        const v = viewer(events);
        firsts.push(await v.firstFrameMs);
        v.close();
      }
      console.log(
        `first data on loopback (open the stream → first frame's bytes), 20 tries: median ${median(firsts).toFixed(1)} ms, max ${Math.max(...firsts).toFixed(1)} ms; goal ≤ 1 000 ms`,
      );
      if (!existsSync(CHROMIUM)) console.log(`(no ${CHROMIUM}: the page's time to first data in a browser is not measured)`);
      else {
        await sleep(5_000); // a few points of history, as a page opened on a running process finds
        const before = load();
        const t = await pageLoads(`http://127.0.0.1:${served.port}/dashboard/`, PAGE_LOADS);
        const col = (k: keyof PageTimings) => {
          const xs = t.map((x) => Number(x[k])).filter((x) => x >= 0);
          return xs.length === 0 ? '–' : `${median(xs).toFixed(0)} ms`;
        };
        console.log(
          `\nThe page in chromium, ${t.length} loads (each in a fresh context), load average ${before} before, ${load()} after; medians from the navigation's start:`,
        );
        console.log(
          '| HTML first byte | HTML last byte | DOM interactive | stream open | first frame | first values in the document | first values painted | first contentful paint |',
        );
        console.log('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
        console.log(
          `| ${col('responseStart')} | ${col('responseEnd')} | ${col('domInteractive')} | ${col('streamOpen')} | ${col('firstTick')} | ${col('firstData')} | ${col('drawn')} | ${col('fcp')} |`,
        );
        const drawn = t.map((x) => x.drawn);
        const p50 = median(drawn);
        console.log(
          `first values in the document / painted, per load: ${t.map((x) => `${x.firstData.toFixed(0)}/${x.drawn.toFixed(0)}`).join(', ')} ms; ${t.every((x) => x.embedded) ? 'from the data embedded in the HTML' : 'from the stream'}`,
        );
        console.log(`${p50 <= 1_000 ? '✓' : '✗'} time to first data (navigation → first values painted), p50 ≤ 1 000 ms: ${p50.toFixed(0)} ms`);
      }
    }

    if (PARTS.has('served')) {
      const pool = new Pool(`http://127.0.0.1:${served.port}`, { connections: 8, pipelining: 1 });
      const perK: Record<number, number[]> = { 0: [], 1: [], 10: [] };
      // Round 0 warms the JIT of both processes up and is not counted.
      for (let run = -1; run < RUNS; run++) {
        for (const n of [0, 1, 10]) {
          const vs = Array.from({ length: n }, () => viewer(events));
          await Promise.all(vs.map((v) => v.firstFrameMs));
          const before = await usage(served.port);
          let calls = 0;
          const end = performance.now() + MS;
          await Promise.all(
            Array.from({ length: 8 }, async () => {
              while (performance.now() < end && calls < MAX_CALLS) {
                const r = await pool.request({ path: '/api', method: 'GET' });
                await r.body.dump();
                calls++;
              }
            }),
          );
          const after = await usage(served.port);
          for (const v of vs) v.close();
          if (run >= 0) perK[n]!.push((cpuMs(before, after) / calls) * 1000);
          await sleep(200);
        }
      }
      await pool.close();
      const base = median(perK[0]!);
      console.log(
        `\nA process serving its dashboard (HttpGuard on every request, 20 components tracked, closed loop of 8), ${RUNS} rounds of ${MS} ms after one to warm up, interleaved:`,
      );
      console.log('| viewers | CPU per 1 000 calls (median) | runs | vs none |\n| ---: | ---: | --- | ---: |');
      for (const n of [0, 1, 10]) {
        const m = median(perK[n]!);
        console.log(`| ${n} | ${m.toFixed(1)} ms | ${perK[n]!.map((x) => x.toFixed(1)).join(', ')} | ${(m / base).toFixed(3)} |`);
      }
      const ok = (n: number) => median(perK[n]!) / base <= 1.05;
      console.log(
        `${ok(1) ? '✓' : '✗'} 1 viewer ≤ 1.05 × none: ${(median(perK[1]!) / base).toFixed(3)}\n${ok(10) ? '✓' : '✗'} 10 viewers ≤ 1.05 × none: ${(median(perK[10]!) / base).toFixed(3)}`,
      );
    }
  }

  // 3.
  if (PARTS.has('aggregator')) {
    const sim = await start<{ ports: number[] }>(['instances', '100', '20']);
    const agg = await start<{ port: number }>(['aggregator', sim.ports.join(',')], ['--expose-gc']);
    const deadline = Date.now() + 60_000;
    for (;;) {
      const frame = (await (await fetch(`http://127.0.0.1:${agg.port}/status.json`).catch(() => undefined))?.json().catch(() => undefined)) as
        { instances?: Array<{ state: string }> } | undefined;
      if (frame?.instances?.filter((i) => i.state === 'up').length === 100) break;
      if (Date.now() > deadline) throw new Error('the aggregator did not see 100 instances up within 60 s');
      await sleep(250);
    }
    const one = viewer(`http://127.0.0.1:${agg.port}/events`);
    await one.firstFrameMs;
    await sleep(2_000);
    const frameBytes = Buffer.byteLength(await (await fetch(`http://127.0.0.1:${agg.port}/status.json`)).text());
    const a0 = await usage(agg.port, true);
    const t0 = performance.now();
    const b0 = one.bytes();
    const curve: Array<{ min: number; cpu: number; usage: Usage; history: number }> = [];
    if (AGGREGATOR_MINUTES > 0) {
      // The long mode: a reading a minute (heap after a full GC), past the history's 5 minutes.
      let prev = a0;
      let prevT = t0;
      for (let min = 1; min <= AGGREGATOR_MINUTES; min++) {
        await sleep(Math.max(0, t0 + min * 60_000 - performance.now()));
        const u = await usage(agg.port, true);
        const now = performance.now();
        const history = Buffer.byteLength(await (await fetch(`http://127.0.0.1:${agg.port}/history.json`)).text());
        curve.push({ min, cpu: (cpuMs(prev, u) / (now - prevT)) * 100, usage: u, history });
        console.error(`# aggregator minute ${min}: heap ${MiB(u.heapUsed)} MiB, RSS ${MiB(u.rss)} MiB, history ${(history / 1024).toFixed(0)} KiB`);
        prev = u;
        prevT = now;
      }
    } else await sleep(4 * MS);
    const a1 = curve.length > 0 ? curve[curve.length - 1]!.usage : await usage(agg.port, true);
    const wall = performance.now() - t0;
    const streamed = one.bytes() - b0;
    one.close();
    const cpu = (cpuMs(a0, a1) / wall) * 100;
    console.log(
      `\nThe aggregator following 100 instances (20 components each), 1 tick/s, one viewer, over ${(wall / 1000).toFixed(0)} s, load average ${load()}:`,
    );
    console.log(
      `CPU ${cpu.toFixed(1)} % of a core; RSS ${MiB(a1.rss)} MiB, heap used ${MiB(a1.heapUsed)} MiB (after a full GC; ${MiB(a0.heapUsed)} MiB at the start); fleet frame ${(frameBytes / 1024).toFixed(0)} KiB, ${(streamed / 1024 / (wall / 1000)).toFixed(0)} KiB/s to the viewer`,
    );
    if (curve.length > 0) {
      console.log('| minute | CPU, % of a core | heap used (after GC) | external | RSS | history kept |\n| ---: | ---: | ---: | ---: | ---: | ---: |');
      console.log(`| 0 | – | ${MiB(a0.heapUsed)} MiB | ${MiB(a0.external)} MiB | ${MiB(a0.rss)} MiB | – |`);
      for (const c of curve)
        console.log(
          `| ${c.min} | ${c.cpu.toFixed(1)} | ${MiB(c.usage.heapUsed)} MiB | ${MiB(c.usage.external)} MiB | ${MiB(c.usage.rss)} MiB | ${(c.history / 1024).toFixed(0)} KiB |`,
        );
      const full = curve.find((c) => c.min === 5);
      if (full !== undefined && curve.length > 5) {
        const last = curve[curve.length - 1]!;
        const grew = last.usage.heapUsed - full.usage.heapUsed;
        const bound = Math.max(0.05 * full.usage.heapUsed, 2 * 2 ** 20);
        console.log(
          `${grew <= bound ? '✓' : '✗'} the heap flattens once the 5 minutes of history are full: ${grew >= 0 ? '+' : ''}${MiB(grew)} MiB from minute 5 to minute ${last.min} (bound ${MiB(bound)} MiB)`,
        );
      } else console.log('(fewer than 6 minutes: whether the heap flattens past the history is not judged; BENCH_AGGREGATOR_MINUTES=6 does)');
    }
    console.log(`${cpu <= 10 ? '✓' : '✗'} the aggregator's CPU ≤ 10 % of a core: ${cpu.toFixed(1)} %`);
  }
} finally {
  stopAll();
}
