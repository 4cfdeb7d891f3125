/**
 * The dashboard's numbers (issue 29):
 * 1. Page weight: the page's bytes as served, and gzipped for scale.
 * 2. Time to first data on loopback: from opening `<path>/events` to the first frame's bytes (the page's
 *    own time to its first frame drawn is measured in chromium by test/dashboard-browser.test.ts).
 * 3. The aggregator: a FleetFeed following 100 simulated instances (one process of 100 dashboardHandlers,
 *    each over a BulwarkMetrics of 20 components), one tick a second, one viewer: its CPU (share of one
 *    core) and memory. Goal: ≤ 10 % of a core.
 * 4. A process serving its dashboard: an HTTP service (every request through an HttpGuard; 20 components
 *    tracked) under a closed loop of 8 connections, with 0, 1 and 10 viewers on its dashboard, runs
 *    interleaved: CPU per 1 000 calls. Goal: 1 and 10 viewers ≤ 1.05 × none (the snapshot is taken once
 *    per tick whatever the number of viewers).
 * Every server is a child process stopped by PID; loads are bounded in time and count, on 127.0.0.1.
 * Environment: BENCH_RUNS (default 5 rounds of 4.), BENCH_MS (ms per round of 4., default 5 000; 3.
 * measures 4 × BENCH_MS). Run: `npm run bench -- dashboard`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { gzipSync } from 'node:zlib';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
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
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const MS = Number(process.env.BENCH_MS ?? 5_000);
/** The most requests one round of 4. sends, whatever the machine. */
const MAX_CALLS = 2_000_000;

const children: ChildProcess[] = [];
/** start runs a subject and answers the JSON line it prints once ready. */
function start<T>(args: string[]): Promise<T> {
  const c = spawn(process.execPath, [...LOADER, SUBJECT, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
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
}
async function usage(port: number): Promise<Usage> {
  return (await (await fetch(`http://127.0.0.1:${port}/cpu`)).json()) as Usage;
}
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

try {
  // 1.
  const page = Buffer.byteLength(PAGE);
  console.log(`## dashboard\n\npage: ${page} bytes (${(page / 1024).toFixed(1)} KiB; ${gzipSync(PAGE).length} gzipped); goal ≤ 300 KB`);

  // 4'. What a tick costs, measured alone (the process's CPU per 1 000 calls is noisy on a shared machine).
  {
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
      `one tick of a process of 20 components (snapshot, rates, percentiles, history, JSON of ${(bytes / 1024).toFixed(1)} KiB): ${perTickUs.toFixed(0)} µs of CPU, ${(perTickUs / 10_000).toFixed(3)} % of a core at one tick a second`,
    );
    await feed.close();
    await m.close();
  }

  // 2. and 4.
  const served = await start<{ port: number }>(['served']);
  const events = `http://127.0.0.1:${served.port}/dashboard/events`;
  const firsts: number[] = [];
  for (let i = 0; i < 20; i++) {
    const v = viewer(events);
    firsts.push(await v.firstFrameMs);
    v.close();
  }
  console.log(
    `first data on loopback (open the stream → first frame's bytes), 20 tries: median ${median(firsts).toFixed(1)} ms, max ${Math.max(...firsts).toFixed(1)} ms; goal ≤ 1 000 ms`,
  );

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

  // 3.
  const sim = await start<{ ports: number[] }>(['instances', '100', '20']);
  const agg = await start<{ port: number }>(['aggregator', sim.ports.join(',')]);
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
  const a0 = await usage(agg.port);
  const t0 = performance.now();
  const b0 = one.bytes();
  await sleep(4 * MS);
  const a1 = await usage(agg.port);
  const wall = performance.now() - t0;
  const streamed = one.bytes() - b0;
  one.close();
  console.log(`\nThe aggregator following 100 instances (20 components each), 1 tick/s, one viewer, over ${(wall / 1000).toFixed(0)} s:`);
  console.log(
    `CPU ${((cpuMs(a0, a1) / wall) * 100).toFixed(1)} % of a core (goal ≤ 10 %); RSS ${(a1.rss / 2 ** 20).toFixed(0)} MiB, heap used ${(a1.heapUsed / 2 ** 20).toFixed(0)} MiB; fleet frame ${(frameBytes / 1024).toFixed(0)} KiB, ${(streamed / 1024 / (wall / 1000)).toFixed(0)} KiB/s to the viewer`,
  );
} finally {
  stopAll();
}
