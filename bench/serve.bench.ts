/**
 * `bulwark serve` as a process, measured from outside with HTTP.
 *
 * 1. Hit path: autocannon (c = 10, one cached 1 KiB value) against one node, against a minimal
 *    node:http server answering the same 1 KiB constant (issue 31's floor), and against a node whose
 *    request listener answers that constant (`FLOOR`: what the process costs before the handler runs)
 *    — plainly, as a hit is answered (a hit's five headers, the body a latin1 string: what any hit
 *    handler costs in this process before it routes or looks anything up), with the group's lookup but
 *    no routing, and with that lookup after a ~1 µs busy wait (what JS before the write costs here);
 *    rounds of one run of each, back to back, the order rotating, every server started afresh each round. Printed: medians of req/s, each
 *    server's CPU time per request (from /proc), the median and range of the per-round ratios, the
 *    handler's share split into the answer's (floor + headers − floor), the lookup's and the rest
 *    (dispatch and route), and what the wait added. Targets: the node does ≥ 0.6× the minimal server's
 *    req/s (ratio of medians) and ≥ 0.9× (median of per-round ratios, in req/s and in CPU per request);
 *    the floor with a hit's headers is a ✓/✗ line of its own: below 0.9×, no hit handler could reach
 *    the row.
 *    Measured apart (minimal servers differing in one thing, interleaved, CPU per request, a load
 *    average of 3–6): the node's server options cost nothing measurable; a hit's three extra headers
 *    ≤ 1 µs on ~24 µs, the latin1 body instead of a Buffer ≤ 0.5 µs. This bench's own split, four runs
 *    of 9–11 rounds at a load average of 2.7–6 (medians per run): the floor 0.94–1.02×, with a hit's
 *    headers 0.95–1.00×, the hit 0.84–0.93× in CPU per request; the headers −0.2–2.1 µs, the lookup
 *    0–0.3 µs (two runs), dispatch and route 2.5–3.8 µs. Ruled out earlier: a deopt loop
 *    (--trace-deopt is quiet under load) and the young generation (--max-semi-space-size 1, 4, 32 or
 *    64 MB: no better; 1 and 4 worse).
 *    Where the time is (the route's ~0.3 µs in a loop against ~1.8 µs in place): two things, neither
 *    a function of ours doing too much.
 *    (a) In place every load is cold. A request follows syscalls (epoll, read), and this VM runs with
 *    PTI and no PCID (/sys/devices/system/cpu/vulnerabilities/meltdown: "Mitigation: PTI"; no pcid in
 *    /proc/cpuinfo), so each one flushes the TLB; other processes on the two cores evict the caches.
 *    perf annotate of the hit's JIT code (--perf-prof, perf inject --jit) puts its samples on the
 *    instructions right after loads of objects the request reaches for the first time (the Group, the
 *    performance object for the age, the groups Map's table, the node, module constants), each ~10 %
 *    of route's own samples, not on the work. A listener reading one field of each of 20 arrays on
 *    distinct pages spends 0.42 µs more per request than one reading nothing; of 20 scattered objects,
 *    0.23 µs. Timed in place (performance.now() around the node's request listener and around res.end,
 *    two nodes of two builds in one process, loads alternating, 8 rounds of 2 s), a hit's JS before
 *    its write is 3.6–4.9 µs: to the route 0.3–0.6, the path's parsing and checks 0.6–0.8, getCached
 *    0.5–0.7, the answer's texts 0.2–0.4, writeHead with the five headers 1.2–1.7, the rest 0.6–0.7;
 *    the write itself (res.end: the syscall, loopback delivery, waking the client) ~30 µs.
 *    (b) Time before the write is paid several times over. In one process, the same answer after a
 *    ~1.3 µs busy wait made res.end 6.8 µs longer (listener wall time, 6 rounds); this bench's wait
 *    subject, at a load average of 7, added 3.9 µs of CPU per request (median per round) for ~1 µs of
 *    waiting — the client has gone idle by then and each answer must wake it, in the sender's syscall.
 *    So the ~1–1.5 µs that dispatch and route add before the write in place are the 2.5–7 µs a hit
 *    that the split above puts on them (earlier runs 2.5–3.8; this build's two runs 7.0 and 5.0).
 *    The same run's floors move with the machine. This build, three runs at a load average of 5.4, 6.9
 *    and 9.2 (CPU per request, medians of per-round ratios): the bare floor 0.96×, 0.83×, 0.82×; with a
 *    hit's headers 0.97×, 0.80×, 0.82×; with the lookup 0.97×, 0.86×, 0.79×; after the ~1 µs wait —,
 *    0.76×, 0.73× (it added 3.9 and 3.0 µs a request); the hit 0.83×, 0.78×, 0.77× (req/s 0.71×, 0.64×,
 *    0.72×). In the two busier runs the floors themselves are below 0.9×: no hit handler could pass.
 *    Two identical nodes loaded side by side differed by up to 29 % in CPU per request between pairs
 *    of processes: an A/B of a hit-path change belongs in one process (as above), not in two.
 *    Changed on this evidence: a hit's content-length and age texts come from one-entry memos (a
 *    table of 64 Ki texts put each on a page of its own) and the node keeps the peer path (dispatch no
 *    longer reaches the pool). Timed in place they make no difference that shows: with probes in the
 *    hit path (two nodes, one process) its JS before the write went 3.84 → 3.59 and 5.09 → 4.88 µs in
 *    the two orders; with section 3 (no probes, 6 rounds each order) the old build's was 0.17 and 0.04
 *    µs less — a few tenths of a µs either way is what the order of two nodes in one process moves.
 *    Measured, not done: a hit without the stale store's probe and the clock read for its age saved
 *    0.06–0.41 µs of getCached's 0.5–0.9 in place (the two orders); keeping a value's load time in the
 *    main and hot caches' own slots (one probe, on the lines the value's lookup already brought in) is
 *    the next step, and writeHead's 1.2–1.7 µs for the five headers the largest single share left.
 *    Two more subjects in the floor's process: the lookup behind the cheapest route a client API path
 *    can have (cut at fixed places, nothing checked), and the node's own request listener — so that the
 *    hit is also measured in the process the floors run in. With one set of processes for all rounds
 *    (six runs on 2026-12-06, load average 1–2.5, the same server's CPU per request moving between 22
 *    and 50 µs from one minute to the next) the hit read 0.91×, 0.73×, 0.81×, 0.74×, 0.73×, 0.71× in CPU
 *    per request while the floor with a hit's headers read 0.95×, 0.96×, 0.93×, 0.86×, 0.91×, 0.90×; in
 *    two of them the node's process cost 6.0 and 6.3 µs a request more than its own listener in the
 *    floor's process (in the second, more in every round), in a third 0.1 µs less. The processes, not
 *    the code: a third node process of the same build (a wrapper setting a V8 flag at run time) cost
 *    1.18× the node's in every round of one run (1.01–1.43), and two node processes of two builds 0.99×
 *    in another; a lone node started as `bulwark serve` or from a script, or kept busy or left idle,
 *    cost within 2–6 % (8–10 rounds each). Each process keeps its draw of memory layout for its life, so
 *    one set of processes decided every round alike. Since then every round starts its servers afresh
 *    (a draw per round, which the median over rounds absorbs). Three runs so, load average 1.2–2.3: the
 *    hit 0.957×, 0.955×, 0.922× node:http in CPU per request (req/s 0.971×, 0.965×, 0.956×); the floor
 *    with a hit's headers 1.044×, 1.019×, 0.997×; the cheapest route 1.012×, 0.991×, 0.993×; the node's
 *    own listener in the floor's process 0.979×, 0.977×, 0.951× (0.84, 0.45, 0.64 µs over the cheapest
 *    route); the node's process over that −0.21, 0.85 and 2.98 µs (medians per round: some of the gap
 *    between two processes may still be systematic, and is not explained). The build this session
 *    started from, in the second run: 0.934× (this build ÷ it, per round, 1.029, range 0.92–1.07).
 *    A hit's age now comes from the main and hot caches' own slots,
 *    with no probe of the stale store: in place against the former build, 0.05 µs less JS a hit (per
 *    round, range −0.77–0.61), nothing that shows there.
 *    `redis-benchmark -t get` (c = 10, 1 KiB) on the same machine is printed for scale.
 * 2. Three nodes (static peers), Zipf(1) keys over 100 000 items, an origin answering after 5 ms, a
 *    closed loop of 30 clients spread over the nodes for a bounded time: hit ratio (answers that did not
 *    wait for the origin), origin loads (each key at most once: loads = distinct keys), p50/p99 and
 *    throughput, and the answers' sources.
 * 3. In place (BENCH_SECTION=inplace): one process with this build's node (and SERVE_AB_BASE's beside it),
 *    each request listener timed around itself and around res.end: a hit's JS outside the write against
 *    the floor's (getCached and a hit's answer, no route) in the same process, and an A/B of a hit-path
 *    change where both builds share the process's layout and seconds. Two runs of 6 rounds of 2 s at a
 *    load average of 5–6: the hit's JS outside res.end 3.1 and 5.2 µs, the floor's 2.0 and 3.1 (the
 *    second run at a busier moment: the floor's listener 45 µs against 25), so dispatch and route 1.2
 *    and 2.2 µs a hit (medians per round); in res.end the hit spent 4.0 and 16 µs more than the floor.
 *
 * Every server is a child process stopped by PID; load runs in this process. Environment: BENCH_RUNS
 * (default 11 hit-path rounds), BENCH_MS (autocannon seconds × 1000 per run, default 3 000; the Zipf load
 * runs 3 × BENCH_MS), BENCH_SECTION=hit (the hit path only) or inplace (the hit timed in place only),
 * SERVE_NODE_ARGS (node flags for the servers, e.g. `--cpu-prof`), SERVE_AB_BASE (another build's
 * `cli/main.js`: its node's cache hit is a subject of the same rounds, an A/B of a change; in the in-place
 * section a node in the same process, started after this build's, or before it with SERVE_AB_BASE_FIRST=1).
 * Run: `npm run bench -- serve`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { loadavg } from 'node:os';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { dirname, join } from 'node:path';
import { Pool } from 'undici';
import { zipfStream, KEY_COUNT } from './cache-workload.js';
import { freePort, waitFor } from '../test/support/servers.js';
import { startRedis } from '../test/support/redis.js';

interface AutocannonResult {
  requests: { average: number; total: number };
  non2xx: number;
  errors: number;
}
const autocannon = createRequire(import.meta.url)('autocannon') as (o: Record<string, unknown>) => Promise<AutocannonResult>;

const here = dirname(fileURLToPath(import.meta.url));
const compiled = !import.meta.url.endsWith('.ts');
const MAIN = compiled ? join(here, '../src/cli/main.js') : join(here, '../src/cli/main.ts');
const LOADER = compiled ? [] : ['--import', 'tsx'];
const HIT_RUNS = Number(process.env.BENCH_RUNS ?? 11);
const MS = Number(process.env.BENCH_MS ?? 3_000);
const VALUE = 'x'.repeat(1024);

const children: ChildProcess[] = [];
function child(args: string[]): ChildProcess {
  const c = spawn(process.execPath, [...(process.env.SERVE_NODE_ARGS?.split(' ').filter(Boolean) ?? []), ...args], { stdio: ['ignore', 'ignore', 'inherit'] });
  children.push(c);
  return c;
}
async function stopChildren(): Promise<void> {
  await Promise.all(
    children.map((c) =>
      c.exitCode !== null || c.signalCode !== null
        ? undefined
        : new Promise<void>((r) => {
            c.once('exit', () => r());
            c.kill('SIGKILL');
          }),
    ),
  );
  children.length = 0;
}
async function ready(url: string): Promise<void> {
  await waitFor(
    `${url} to be ready`,
    async () => {
      try {
        return (await fetch(url)).status === 200;
      } catch {
        return false;
      }
    },
    30_000,
  );
}
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}
function check(label: string, value: number, ok: boolean, unit: string): boolean {
  console.log(`  ${ok ? '✓' : '✗'} ${label}: ${value.toFixed(2)}${unit}`);
  return ok;
}

/** startOrigin answers `GET /items/<key>` with a 1 KiB value after `delayMs`, counting loads per key. */
async function startOrigin(delayMs: number): Promise<{ url: string; loads: Map<string, number>; close(): void }> {
  const loads = new Map<string, number>();
  const server = createServer((req, res) => {
    const key = req.url ?? '';
    loads.set(key, (loads.get(key) ?? 0) + 1);
    const answer = () => res.writeHead(200, { 'content-length': VALUE.length }).end(VALUE);
    if (delayMs > 0) setTimeout(answer, delayMs);
    else answer();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    loads,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

const MINIMAL = `const v = Buffer.from('x'.repeat(1024));
require('node:http').createServer((req, res) => { res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': v.length }); res.end(v); }).listen(Number(process.argv[1]), '127.0.0.1');`;

/** cpuMs answers a child process's CPU time so far (user + system, ms), from /proc; NaN where there is none. */
function cpuMs(c: ChildProcess): number {
  try {
    const stat = readFileSync(`/proc/${c.pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / TICKS;
  } catch {
    return NaN;
  }
}
const TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

function spread(xs: number[]): string {
  const s = [...xs].sort((a, b) => a - b);
  return `${median(s).toFixed(3)} (range ${s[0]!.toFixed(3)}–${s[s.length - 1]!.toFixed(3)})`;
}

/**
 * FLOOR is a `bulwark serve` process (this build's node, its server options, its metrics and timers)
 * whose request listener is replaced, once the node listens, by one answering the minimal server's
 * constant: what the node costs before its handler runs, so that the handler's own share is the gap
 * between this subject and the node's cache hit. At `/headers` it answers the constant as a hit is
 * answered — the same five headers (x-bulwark-source, age and x-bulwark-age-ms, which docs/cli.md
 * promises, beside content-type and content-length) in one reused array, the body a latin1 string —
 * what any handler giving a hit's answer costs in this process: no route, no lookup. At `/lookup` it
 * answers the same way what the group holds for `hot-key` (ServedGroup.getCached, as a hit does), with
 * no routing: the lookup's share in place. argv: the serve flags.
 */
const FLOOR = (dir: string) => `const { readServeConfig } = await import(${JSON.stringify(pathToFileURL(join(dir, 'config.js')).href)});
const { ServeNode } = await import(${JSON.stringify(pathToFileURL(join(dir, 'node.js')).href)});
const node = await ServeNode.start(readServeConfig(process.argv.slice(1)));
const v = Buffer.from('x'.repeat(1024));
const s = v.toString('latin1');
const h = ['content-type', 'application/octet-stream', 'content-length', '1024', 'x-bulwark-source', 'main', 'age', '0', 'x-bulwark-age-ms', '0'];
const group = node.groups.get('default');
await group.get('hot-key', undefined);
const own = node.server.listeners('request')[0];
node.server.removeAllListeners('request');
node.server.on('request', (req, res) => {
  if (req.url.startsWith('/v1/')) {
    // The node's own request listener, in this process: a hit as bulwark serve answers it.
    own.call(node.server, req, res);
  } else if (req.url === '/headers') {
    h[9] = String(Math.round(performance.now() - 1_000));
    res.writeHead(200, h);
    res.end(s, 'latin1');
  } else if (req.url.startsWith('/r/v1/')) {
    // The cheapest route to the same lookup: the group and the key cut from the path as the client API
    // lays it out (behind /r), no checks at all (a real route validates each), the group found by name.
    const url = req.url;
    const groupEnd = url.indexOf('/', 13);
    const a = node.groups.get(url.slice(13, groupEnd)).getCached(url.slice(groupEnd + 6));
    h[5] = a.source;
    h[9] = String(Math.round(a.ageMs));
    res.writeHead(200, h);
    res.end(a.value.binary(), 'latin1');
  } else if (req.url === '/lookup' || req.url === '/lookup-wait') {
    // /lookup-wait: the same answer after a busy wait of ~1 µs (what a handler's JS before its write costs).
    if (req.url === '/lookup-wait') for (const until = performance.now() + 0.001; performance.now() < until; );
    const a = group.getCached('hot-key');
    h[5] = a.source;
    h[9] = String(Math.round(a.ageMs));
    res.writeHead(200, h);
    res.end(a.value.binary(), 'latin1');
  } else {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': v.length });
    res.end(v);
  }
});`;

async function hitPath(): Promise<boolean> {
  console.log(
    `\n## serve: hit path — autocannon c=10, one cached 1 KiB value, ${HIT_RUNS} interleaved rounds of ${MS / 1000} s (load average ${loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')})\n`,
  );
  const origin = await startOrigin(0);
  const serveArgs = (port: number) => ['serve', '--quiet', '--listen', `127.0.0.1:${port}`, '--origin', `${origin.url}/items/{key}`];
  // Every round starts its servers afresh: two identical processes here have differed by up to ~20 % in
  // CPU per request for their whole lives (each its own draw of memory layout), so a single pair of
  // processes would decide every round alike; a process per round makes that a draw per round.
  const startServers = async (): Promise<[string, string, ChildProcess][]> => {
    const minimalPort = await freePort();
    const minimal = child(['-e', MINIMAL, String(minimalPort)]);
    const floorPort = await freePort();
    const floor = compiled ? child(['--input-type=module', '-e', FLOOR(join(here, '../src/cli/serve')), '--', ...serveArgs(floorPort).slice(1)]) : undefined;
    const nodePort = await freePort();
    const node = child([...LOADER, MAIN, ...serveArgs(nodePort)]);
    const started: [string, string, ChildProcess][] = [
      ['node:http, 1 KiB constant', `http://127.0.0.1:${minimalPort}/`, minimal],
      ...(floor === undefined
        ? []
        : ([
            ['floor: bulwark serve answering the constant', `http://127.0.0.1:${floorPort}/`, floor],
            ["floor + a hit's headers: the constant with a hit's five headers", `http://127.0.0.1:${floorPort}/headers`, floor],
            ['floor + headers + the lookup: getCached answered, no route', `http://127.0.0.1:${floorPort}/lookup`, floor],
            ['floor + headers + the lookup after a ~1 µs busy wait', `http://127.0.0.1:${floorPort}/lookup-wait`, floor],
            ['floor + headers + the lookup after the cheapest route (no checks)', `http://127.0.0.1:${floorPort}/r/v1/groups/default/keys/hot-key`, floor],
            ["bulwark serve's own request listener in the floor's process: a cache hit", `http://127.0.0.1:${floorPort}/v1/groups/default/keys/hot-key`, floor],
          ] as [string, string, ChildProcess][])),
      ['bulwark serve, cache hit', `http://127.0.0.1:${nodePort}/v1/groups/default/keys/hot-key`, node],
    ];
    // SERVE_AB_BASE=<another build's cli/main.js>: that build's node too, in the same rounds (an A/B of a change).
    if (process.env.SERVE_AB_BASE !== undefined) {
      const basePort = await freePort();
      started.push([
        `bulwark serve, cache hit (${process.env.SERVE_AB_BASE})`,
        `http://127.0.0.1:${basePort}/v1/groups/default/keys/hot-key`,
        child([process.env.SERVE_AB_BASE, ...serveArgs(basePort)]),
      ]);
    }
    for (const [, url] of started) await ready(url);
    for (const [, url] of started) await autocannon({ url, connections: 10, duration: 1 }); // warm-up
    return started;
  };
  let subjects = await startServers();
  const rates = new Map<string, number[]>(subjects.map(([n]) => [n, []]));
  // Server CPU time per request (µs): what the server itself spends, which the load generator's share of the cores does not move.
  const cpus = new Map<string, number[]>(subjects.map(([n]) => [n, []]));
  // Per-round ratios to node:http: req/s (subject ÷ node:http) and CPU per request (node:http ÷ subject).
  const rateRatios = new Map<string, number[]>(subjects.map(([n]) => [n, []]));
  const cpuRatios = new Map<string, number[]>(subjects.map(([n]) => [n, []]));
  for (let run = 0; run < HIT_RUNS; run++) {
    if (run > 0) {
      await stopChildren();
      subjects = await startServers();
    }
    const round = new Map<string, { rate: number; cpu: number }>();
    // Each round runs every subject back to back, the order rotating: each round's ratios are measured in the same seconds.
    const order = subjects.map((_, i) => subjects[(i + run) % subjects.length]!);
    for (const [name, url, proc] of order) {
      const c0 = cpuMs(proc);
      const r = await autocannon({ url, connections: 10, duration: Math.max(1, Math.round(MS / 1000)) });
      const cpu = ((cpuMs(proc) - c0) * 1000) / r.requests.total;
      if (r.non2xx > 0 || r.errors > 0) throw new Error(`${name}: ${r.non2xx} non-2xx, ${r.errors} errors`);
      rates.get(name)!.push(r.requests.average);
      cpus.get(name)!.push(cpu);
      round.set(name, { rate: r.requests.average, cpu });
    }
    const base = round.get(subjects[0]![0])!;
    for (const [name] of subjects) {
      rateRatios.get(name)!.push(round.get(name)!.rate / base.rate);
      cpuRatios.get(name)!.push(base.cpu / round.get(name)!.cpu);
    }
  }
  const base = median(rates.get(subjects[0]![0])!);
  console.log(
    '| subject | req/s (median) | runs | × node:http (ratio of medians) | server CPU µs/req (median) | per-round CPU ratio node:http ÷ subject (median, range) |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: |');
  for (const [name] of subjects) {
    const m = median(rates.get(name)!);
    console.log(
      `| ${name} | ${Math.round(m).toLocaleString('en-US')} | ${rates
        .get(name)!
        .map((x) => Math.round(x))
        .join(' ')} | ${(m / base).toFixed(2)} | ${median(cpus.get(name)!).toFixed(1)} | ${spread(cpuRatios.get(name)!)} |`,
    );
  }
  const served = subjects.find(([n]) => n === 'bulwark serve, cache hit')![0];
  console.log(
    `\nper-round ratios, bulwark serve ÷ node:http: req/s ${spread(rateRatios.get(served)!)}; server CPU per request (node:http ÷ serve) ${spread(cpuRatios.get(served)!)}`,
  );
  let headersRatio: number | undefined;
  let routedRatio: number | undefined;
  if (compiled) {
    const floorName = subjects[1]![0];
    const headersName = subjects[2]![0];
    const minus = (a: string, b: string) => cpus.get(a)!.map((x, i) => x - cpus.get(b)![i]!);
    console.log(
      `floor (bulwark serve answering the constant) ÷ node:http, CPU per request: ${spread(cpuRatios.get(floorName)!)}; the cache hit handler's own CPU per request (serve − floor, per round): ${spread(minus(served, floorName))} µs`,
    );
    const lookupName = subjects[3]![0];
    console.log(
      `floor + a hit's headers ÷ node:http, CPU per request: ${spread(cpuRatios.get(headersName)!)}; of the handler's share, a hit's answer (headers, latin1 body) ${spread(minus(headersName, floorName))} µs, the lookup (getCached, in place) ${spread(minus(lookupName, headersName))} µs, the rest (dispatch, route) ${spread(minus(served, lookupName))} µs`,
    );
    const waitName = subjects[4]![0];
    console.log(
      `floor + headers + lookup after a ~1 µs busy wait ÷ node:http, CPU per request: ${spread(cpuRatios.get(waitName)!)}; what the wait added (per round): ${spread(minus(waitName, lookupName))} µs`,
    );
    const routedName = subjects[5]![0];
    console.log(
      `floor + headers + lookup after the cheapest route ÷ node:http, CPU per request: ${spread(cpuRatios.get(routedName)!)}; what that route added (per round): ${spread(minus(routedName, lookupName))} µs; bulwark serve over it (its dispatch and checks): ${spread(minus(served, routedName))} µs`,
    );
    const ownName = subjects[6]![0];
    console.log(
      `the node's own listener in the floor's process ÷ node:http, CPU per request: ${spread(cpuRatios.get(ownName)!)}; over the cheapest route in that process (its dispatch and checks): ${spread(minus(ownName, routedName))} µs; the node's process over the floor's, the same hit (per round): ${spread(minus(served, ownName))} µs`,
    );
    headersRatio = median(cpuRatios.get(headersName)!);
    routedRatio = median(cpuRatios.get(routedName)!);
  }
  if (process.env.SERVE_AB_BASE !== undefined) {
    const other = subjects[subjects.length - 1]![0];
    const ab = cpus.get(other)!.map((c, i) => c / cpus.get(served)![i]!);
    console.log(`A/B, server CPU per request, ${other} ÷ this build, per round: ${spread(ab)}`);
  }
  await stopChildren();
  origin.close();
  try {
    const redis = await startRedis();
    const out = spawnSync('redis-benchmark', ['-h', '127.0.0.1', '-p', String(redis.port), '-t', 'get', '-c', '10', '-d', '1024', '-n', '200000', '-q'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    await redis.stop();
    const m = /GET: ([\d.]+) requests per second/.exec(out.stdout);
    console.log(
      `\nfor scale, redis-benchmark -t get -c 10 -d 1024 on this machine: ${m === null ? out.stdout.trim() : `${Math.round(Number(m[1])).toLocaleString('en-US')} req/s = ${(Number(m[1]) / median(rates.get(served)!)).toFixed(2)}× bulwark serve`}`,
    );
  } catch (err) {
    console.log(`\nredis-benchmark not run: ${(err as Error).message}`);
  }
  console.log('');
  const ok6 = check(
    'bulwark serve hit path ≥ 0.6× a minimal node:http server (ratio of medians)',
    median(rates.get(served)!) / base,
    median(rates.get(served)!) / base >= 0.6,
    '×',
  );
  // Issue 31's floor: the median of the per-round ratios.
  const ok9 = check(
    'bulwark serve hit path ≥ 0.9× node:http (median of per-round req/s ratios)',
    median(rateRatios.get(served)!),
    median(rateRatios.get(served)!) >= 0.9,
    '×',
  );
  // The same floor in CPU time, which other jobs on a shared machine move far less than req/s.
  const okCpu = check(
    'bulwark serve CPU per hit ≥ 0.9× node:http (node:http ÷ serve CPU µs/req, median of per-round ratios)',
    median(cpuRatios.get(served)!),
    median(cpuRatios.get(served)!) >= 0.9,
    '×',
  );
  // What bounds the row from below: no handler answering a hit as docs/cli.md says costs this process less than this subject.
  if (headersRatio !== undefined)
    check(
      "floor: this process answering a constant with a hit's headers ≥ 0.9× node:http (CPU per request, median of per-round ratios; ✗: no hit handler can reach 0.9×)",
      headersRatio,
      headersRatio >= 0.9,
      '×',
    );
  // The same with the lookup behind the cheapest route a path like the client API's can have: a hit's whole work, nothing checked.
  if (routedRatio !== undefined)
    check(
      'floor: this process routing to the lookup and answering as a hit, with no checks, ≥ 0.9× node:http (CPU per request, median of per-round ratios; ✗: no hit handler that routes can reach 0.9×)',
      routedRatio,
      routedRatio >= 0.9,
      '×',
    );
  return ok6 && ok9 && okCpu;
}

/**
 * IN_PLACE is one process running this build's node and, with SERVE_AB_BASE, the other build's node beside it
 * (each on its own port), every request listener wrapped to time it: performance.now() around the listener and
 * around res.end. A hit's JS is the listener's time outside res.end — measured where it runs, after the syscalls
 * and other processes have left every line it reaches cold, not in a loop — and an A/B of a hit-path change
 * lives in one process, where both builds share its layout and its seconds (two identical nodes in two
 * processes differed by up to 29 %). `/lookup` on this build's node answers as FLOOR's does: no route.
 * `/_inplace` answers the sums so far (ms and requests per subject) and starts them again. argv: the origin's
 * URL template, then pairs of a build's serve directory and a port.
 */
const IN_PLACE = `const { ServerResponse } = await import('node:http');
const end = ServerResponse.prototype.end;
let inEnd = 0;
ServerResponse.prototype.end = function (...a) { const t = performance.now(); const r = end.apply(this, a); inEnd += performance.now() - t; return r; };
const sums = new Map();
const h = ['content-type', 'application/octet-stream', 'content-length', '1024', 'x-bulwark-source', 'main', 'age', '0', 'x-bulwark-age-ms', '0'];
const [origin, ...builds] = process.argv.slice(1);
for (let i = 0; i < builds.length; i += 2) {
  const { readServeConfig } = await import(builds[i] + '/config.js');
  const { ServeNode } = await import(builds[i] + '/node.js');
  const node = await ServeNode.start(readServeConfig(['--quiet', '--listen', '127.0.0.1:' + builds[i + 1], '--origin', origin]));
  const group = node.groups.get('default');
  await group.get('hot-key', undefined);
  const listener = node.server.listeners('request')[0];
  node.server.removeAllListeners('request');
  node.server.on('request', (req, res) => {
    if (req.url === '/_inplace') {
      const body = JSON.stringify(Object.fromEntries(sums));
      sums.clear();
      return void res.end(body);
    }
    const lookup = i === 0 && req.url === '/lookup';
    const t0 = performance.now();
    if (lookup) {
      const a = group.getCached('hot-key');
      h[5] = a.source;
      h[9] = String(Math.round(a.ageMs));
      res.writeHead(200, h);
      res.end(a.value.binary(), 'latin1');
    } else listener(req, res);
    const t = performance.now() - t0;
    const key = (lookup ? 'lookup:' : 'hit:') + i;
    const s = sums.get(key) ?? [0, 0, 0];
    s[0] += t; s[1] += inEnd; s[2]++;
    sums.set(key, s);
    inEnd = 0;
  });
}
process.send?.('ready');`;

async function inPlace(): Promise<boolean> {
  if (!compiled) return true;
  const base = process.env.SERVE_AB_BASE === undefined ? undefined : dirname(process.env.SERVE_AB_BASE);
  console.log(
    `\n## serve: a hit timed in place — one process, ${HIT_RUNS} rounds of ${MS / 1000} s per subject, loads in turn (load average ${loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')})\n`,
  );
  const origin = await startOrigin(0);
  const ports = [await freePort(), await freePort()];
  // Which node starts first matters by a few tenths of a µs (the heap's layout): SERVE_AB_BASE_FIRST=1 swaps them.
  const baseFirst = base !== undefined && process.env.SERVE_AB_BASE_FIRST === '1';
  const own = join(here, '../src/cli/serve');
  const builds = base === undefined ? [own] : baseFirst ? [join(base, 'serve'), own] : [own, join(base, 'serve')];
  const [at, baseAt] = baseFirst ? [1, 0] : [0, 1];
  const proc = spawn(
    process.execPath,
    [
      ...(process.env.SERVE_NODE_ARGS?.split(' ').filter(Boolean) ?? []),
      '--input-type=module',
      '-e',
      IN_PLACE,
      `${origin.url}/items/{key}`,
      ...builds.flatMap((b, i) => [pathToFileURL(b).href, String(ports[i])]),
    ],
    { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] },
  );
  children.push(proc);
  await new Promise<void>((r) => proc.once('message', () => r()));
  const hit = (i: number) => `http://127.0.0.1:${ports[i]}/v1/groups/default/keys/hot-key`;
  const subjects: [string, string, string][] = [
    [`floor: getCached and a hit's answer, no route (the first node's process)`, `http://127.0.0.1:${ports[0]}/lookup`, 'lookup:0'],
    ['cache hit (this build)', hit(at), `hit:${2 * at}`],
    ...(base === undefined ? [] : ([[`cache hit (${process.env.SERVE_AB_BASE})`, hit(baseAt), `hit:${2 * baseAt}`]] as [string, string, string][])),
  ];
  const sums = async (): Promise<Record<string, [number, number, number]>> =>
    (await fetch(`http://127.0.0.1:${ports[0]}/_inplace`)).json() as Promise<Record<string, [number, number, number]>>;
  for (const [, url] of subjects) await autocannon({ url, connections: 10, duration: 1 }); // warm-up
  await sums();
  const listener = new Map<string, number[]>(subjects.map(([n]) => [n, []]));
  const inEnd = new Map<string, number[]>(subjects.map(([n]) => [n, []]));
  const js = new Map<string, number[]>(subjects.map(([n]) => [n, []]));
  for (let run = 0; run < HIT_RUNS; run++) {
    for (const [name, url, key] of subjects.map((_, i) => subjects[(i + run) % subjects.length]!)) {
      await autocannon({ url, connections: 10, duration: Math.max(1, Math.round(MS / 1000)) });
      const [t, e, n] = (await sums())[key]!;
      listener.get(name)!.push((t * 1000) / n);
      inEnd.get(name)!.push((e * 1000) / n);
      js.get(name)!.push(((t - e) * 1000) / n);
    }
  }
  console.log('| subject | listener µs/req (median) | in res.end | JS outside res.end (median, range) |');
  console.log('| --- | ---: | ---: | ---: |');
  for (const [name] of subjects)
    console.log(`| ${name} | ${median(listener.get(name)!).toFixed(2)} | ${median(inEnd.get(name)!).toFixed(2)} | ${spread(js.get(name)!)} |`);
  const minus = (m: Map<string, number[]>, a: string, b: string) => m.get(a)!.map((x, i) => x - m.get(b)![i]!);
  const [floorName, hitName] = [subjects[0]![0], subjects[1]![0]];
  console.log(
    `\nper round, the hit − the floor: JS outside res.end ${spread(minus(js, hitName, floorName))} µs; in res.end ${spread(minus(inEnd, hitName, floorName))} µs`,
  );
  if (base !== undefined) {
    const other = subjects[2]![0];
    console.log(
      `A/B in one process, per round, ${other} − this build: JS outside res.end ${spread(minus(js, other, hitName))} µs; listener ${spread(minus(listener, other, hitName))} µs`,
    );
  }
  await stopChildren();
  origin.close();
  return true;
}

async function zipfCluster(): Promise<boolean> {
  const durationMs = 3 * MS;
  console.log(`\n## serve: three nodes, Zipf(1) over ${KEY_COUNT.toLocaleString('en-US')} items, origin 5 ms, 30 clients for ${durationMs / 1000} s\n`);
  const origin = await startOrigin(5);
  const ports = await Promise.all([0, 1, 2].map(() => freePort()));
  const urls = ports.map((p) => `http://127.0.0.1:${p}`);
  for (const [i, port] of ports.entries()) {
    child([
      ...LOADER,
      MAIN,
      'serve',
      '--quiet',
      '--listen',
      `127.0.0.1:${port}`,
      '--peers',
      urls.filter((_, j) => j !== i).join(','),
      '--origin',
      `${origin.url}/items/{key}`,
      '--cache-bytes',
      '256MiB',
    ]);
  }
  for (const u of urls) await ready(`${u}/readyz`);
  const pools = urls.map((u) => new Pool(u, { connections: 10 }));
  const stream = zipfStream(1_000_000);
  const latencies: number[] = [];
  const sources = new Map<string, number>();
  let errors = 0;
  let next = 0;
  const deadline = performance.now() + durationMs;
  const client = async (c: number) => {
    const pool = pools[c % pools.length]!;
    while (performance.now() < deadline && next < stream.length) {
      const key = `key:${stream[next++]!}`;
      const t0 = performance.now();
      const res = await pool.request({ path: `/v1/groups/default/keys/${encodeURIComponent(key)}`, method: 'GET' });
      await res.body.dump();
      latencies.push(performance.now() - t0);
      if (res.statusCode !== 200) errors++;
      const s = String(res.headers['x-bulwark-source'] ?? 'none');
      sources.set(s, (sources.get(s) ?? 0) + 1);
    }
  };
  const started = performance.now();
  // The hit ratio of the second half, once the cache is warm, besides the whole run's (cold start included).
  let half = { requests: 0, loads: 0 };
  const halfTimer = setTimeout(() => (half = { requests: latencies.length, loads: [...origin.loads.values()].reduce((a, b) => a + b, 0) }), durationMs / 2);
  await Promise.all(Array.from({ length: 30 }, (_, c) => client(c)));
  clearTimeout(halfTimer);
  const elapsed = performance.now() - started;
  await Promise.all(pools.map((p) => p.close()));
  const requests = latencies.length;
  const loads = [...origin.loads.values()].reduce((a, b) => a + b, 0);
  const distinct = new Set(Array.from(stream.subarray(0, requests))).size;
  latencies.sort((a, b) => a - b);
  const pct = (q: number) => latencies[Math.min(requests - 1, Math.floor(q * requests))]!;
  const originAnswers = sources.get('origin') ?? 0;
  const warm = 1 - (loads - half.loads) / Math.max(1, requests - half.requests);
  console.log('| requests | throughput | hit ratio | hit ratio, 2nd half | origin loads | distinct keys | p50 | p99 | sources |');
  console.log('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |');
  console.log(
    `| ${requests.toLocaleString('en-US')} | ${Math.round(requests / (elapsed / 1000)).toLocaleString('en-US')} req/s | ${(100 * (1 - loads / requests)).toFixed(1)} % | ${(100 * warm).toFixed(1)} % | ${loads.toLocaleString('en-US')} | ${distinct.toLocaleString('en-US')} | ${pct(0.5).toFixed(2)} ms | ${pct(0.99).toFixed(2)} ms | ${[...sources].map(([k, v]) => `${k} ${v}`).join(', ')} |`,
  );
  console.log(`\n(hit ratio = 1 − origin loads / requests; ${originAnswers} answers waited for an origin load on the node asked; errors: ${errors})\n`);
  await stopChildren();
  origin.close();
  const once = [...origin.loads.values()].every((n) => n === 1);
  return check('each key loaded from the origin at most once (max loads of one key)', Math.max(...origin.loads.values()), once && errors === 0, '');
}

let ok = true;
try {
  if (process.env.BENCH_SECTION === undefined || 'hit path'.includes(process.env.BENCH_SECTION)) ok = (await hitPath()) && ok;
  if (process.env.BENCH_SECTION === undefined || ['in place', 'inplace'].includes(process.env.BENCH_SECTION)) ok = (await inPlace()) && ok;
  if (process.env.BENCH_SECTION === undefined || 'zipf cluster'.includes(process.env.BENCH_SECTION)) ok = (await zipfCluster()) && ok;
} finally {
  await stopChildren();
}
process.exit(ok ? 0 : 1);
