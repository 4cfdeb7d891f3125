/**
 * EtcdRegistry on a 3-member etcd cluster (loopback), through faults: lookup latency p50/p99/max and
 * failures while a follower is SIGKILLed, while the leader is SIGKILLed (an election), and while a killed
 * member is restarted — uncached (`EtcdRegistry.getService`), through a `RegistryCache` (TTL 1 000 ms, so
 * refreshes do reach etcd during the fault), and a plain `etcd3` client (its default fault handling: a
 * retry of 3 attempts and a breaker per host) doing the same range read, on the same cluster in the same
 * run. Each subject runs in its own child process, all three at once, one lookup after another (the
 * cached one once per millisecond: its hits would otherwise take a core from the others); the parent
 * injects the fault and each child times what follows from when it hears of it:
 * - latencies count every lookup that ended after the fault (the one in flight when it came too);
 * - `gap`: from the fault to the end of the first successful lookup started after it;
 * - `via dead`: (EtcdRegistry) from the death to the first successful lookup that tried the dead member
 *   (and moved on); for the restart, to the first lookup the restarted member answered itself.
 * Every run starts a fresh cluster; medians over BENCH_RUNS runs (default 3). Fault windows are 3 s.
 *
 * Targets: EtcdRegistry fails 0 lookups in every fault (the plain client fails 0 too); its p99 through a
 * follower kill is at most 3× the plain client's (one attempt on the dead member, refused at once, costs
 * ~1 ms before the next member answers).
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Etcd3 } from 'etcd3';
import { EtcdRegistry } from '../src/registry/etcd-registry.js';
import { RegistryCache } from '../src/registry/registry-cache.js';
import { startEtcdCluster, type EtcdCluster } from '../test/support/etcd-cluster.js';

const PREFIX = '/bench-cluster';
const SERVICE = 'api';
const WINDOW_MS = 3_000;
const SETTLE_MS = 1_000;
const MAX_LOOKUPS = 5_000_000;
const SUBJECTS = ['EtcdRegistry', 'EtcdRegistry + RegistryCache', 'etcd3 (plain)'] as const;
type SubjectName = (typeof SUBJECTS)[number];
const SCENARIOS = ['follower SIGKILL', 'leader SIGKILL', 'member restart'] as const;
type Scenario = (typeof SCENARIOS)[number];

interface ChildResult {
  lookups: number;
  failed: number;
  p50: number;
  p99: number;
  max: number;
  baseP50: number;
  gapMs: number;
  viaDeadMs: number;
}

const at = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
const median = (xs: number[]) => {
  const s = xs.filter((x) => typeof x === 'number' && !Number.isNaN(x)).sort((a, b) => a - b); // NaN comes back from JSON as null
  if (s.length === 0) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** child: one subject doing lookups one after another until told to stop; times what follows the fault. */
async function child(name: SubjectName, hosts: string[]): Promise<void> {
  let lookup: () => Promise<unknown>;
  let stats: (() => { endpoint: string; attempts: number; failures: number }[]) | undefined;
  let close: () => Promise<void>;
  if (name === 'etcd3 (plain)') {
    const client = new Etcd3({ hosts });
    const key = Buffer.from(`${PREFIX}/${SERVICE}/`);
    const end = Buffer.from(`${PREFIX}/${SERVICE}0`);
    lookup = () => client.kv.range({ key, range_end: end }, { deadline: new Date(Date.now() + 3_000) });
    close = async () => client.close();
  } else {
    const registry = new EtcdRegistry({ hosts, prefix: PREFIX });
    // "via dead" means something only where every lookup reaches etcd
    if (name === 'EtcdRegistry') stats = () => registry.stats().members;
    if (name === 'EtcdRegistry') {
      lookup = () => registry.getService(SERVICE);
      close = () => registry.close();
    } else {
      const cache = new RegistryCache(registry, { ttlMs: 1_000 });
      lookup = () => cache.getService(SERVICE);
      close = async () => {
        await cache.close();
        await registry.close();
      };
    }
  }
  await lookup();
  const paced = name === 'EtcdRegistry + RegistryCache';
  let fault: { at: number; endpoint: string; kind: string } | undefined;
  let stop = false;
  const lines = createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    const [cmd, kind, endpoint] = line.split(' ');
    if (cmd === 'fault') fault = { at: performance.now(), kind: kind!, endpoint: endpoint! };
    if (cmd === 'stop') stop = true;
  });
  process.stdout.write('@@READY\n');
  const before: number[] = [];
  const during: number[] = [];
  let failed = 0;
  let gapMs = NaN;
  let viaDeadMs = NaN;
  const started = performance.now();
  for (let n = 0; !stop && n < MAX_LOOKUPS && performance.now() - started < 60_000; n++) {
    // a cached lookup never leaves the microtask queue and would take a whole core from the others:
    // that subject looks up once per millisecond (a busy client), the others one after another
    if (paced) await new Promise((r) => setTimeout(r, 1));
    const startedAfter = fault; // the fault this lookup started after, if any
    const member = startedAfter && stats ? stats().find((m) => m.endpoint === startedAfter.endpoint) : undefined;
    const t0 = performance.now();
    let ok = true;
    try {
      await lookup();
    } catch {
      ok = false;
    }
    const t1 = performance.now();
    const f = fault;
    // a lookup in flight when the fault came counts with those after it: it may be the one that waits
    if (f === undefined) {
      before.push(t1 - t0);
      continue;
    }
    during.push(t1 - t0);
    if (!ok) failed++;
    if (ok && startedAfter !== undefined && Number.isNaN(gapMs)) gapMs = t1 - f.at;
    if (ok && member !== undefined && Number.isNaN(viaDeadMs)) {
      const now = stats!().find((m) => m.endpoint === f.endpoint)!;
      const triedDead = now.failures > member.failures;
      const answeredByIt = now.attempts - now.failures > member.attempts - member.failures;
      if (f.kind === 'restart' ? answeredByIt : triedDead) viaDeadMs = t1 - f.at;
    }
    if (t1 - f.at > WINDOW_MS) break;
  }
  const s = [...during].sort((a, b) => a - b);
  const b = [...before].sort((x, y) => x - y);
  const result: ChildResult = {
    lookups: during.length,
    failed,
    p50: at(s, 0.5),
    p99: at(s, 0.99),
    max: s.at(-1) ?? NaN,
    baseP50: at(b, 0.5),
    gapMs,
    viaDeadMs,
  };
  process.stdout.write(`@@RESULT ${JSON.stringify(result)}\n`);
  await close();
  process.exit(0);
}

/** Spawned is one subject's child as the parent sees it. */
interface Spawned {
  ready: Promise<void>;
  result: Promise<ChildResult | undefined>;
  send(line: string): void;
}

function spawnChild(name: SubjectName, hosts: string[]): Spawned {
  const c = spawn(process.execPath, [...process.execArgv, process.argv[1]!, '--subject', name, '--hosts', hosts.join(',')], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  c.stdin!.on('error', () => {}); // a child that has finished its window may be gone before 'stop'
  let ready!: () => void;
  const readyP = new Promise<void>((r) => (ready = r));
  const result = new Promise<ChildResult | undefined>((resolve) => {
    let got: ChildResult | undefined;
    createInterface({ input: c.stdout! }).on('line', (line) => {
      if (line === '@@READY') ready();
      if (line.startsWith('@@RESULT ')) got = JSON.parse(line.slice(9)) as ChildResult;
    });
    c.once('exit', () => {
      ready();
      resolve(got);
    });
  });
  return { ready: readyP, result, send: (line) => void c.stdin!.write(`${line}\n`) };
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** scenario runs one fault with the three subjects watching, and answers their results. */
async function scenario(cluster: EtcdCluster, which: Scenario): Promise<Map<SubjectName, ChildResult | undefined>> {
  const leader = await cluster.leader();
  const follower = cluster.members.find((m) => m !== leader && m.alive)!;
  if (which === 'member restart') {
    await follower.kill();
    await pause(SETTLE_MS); // the subjects have met the dead member before it returns
  }
  const children = SUBJECTS.map((name) => [name, spawnChild(name, cluster.endpoints)] as const);
  await Promise.all(children.map(([, c]) => c.ready));
  await pause(SETTLE_MS);
  const victim = which === 'leader SIGKILL' ? leader : follower;
  const kind = which === 'member restart' ? 'restart' : 'kill';
  for (const [, c] of children) c.send(`fault ${kind} ${victim.endpoint}`);
  if (kind === 'kill') await victim.kill();
  else await victim.restart();
  await pause(WINDOW_MS + 200);
  for (const [, c] of children) c.send('stop');
  const out = new Map<SubjectName, ChildResult | undefined>();
  for (const [name, c] of children) out.set(name, await c.result);
  for (const m of cluster.members) if (!m.alive) await m.restart();
  await cluster.leader();
  return out;
}

async function parent(): Promise<void> {
  const runs = Number(process.env.BENCH_RUNS ?? 3);
  process.stdout.write(
    `\n## etcd cluster: lookups through faults  (${runs} runs, 3 members, ${WINDOW_MS} ms after each fault, subjects in their own processes at once)\n`,
  );
  const all = new Map<string, ChildResult[]>();
  let crashed = false;
  for (let r = 0; r < runs; r++) {
    const cluster = await startEtcdCluster(3);
    try {
      const seed = new EtcdRegistry({ hosts: cluster.endpoints, prefix: PREFIX, ttlMs: 30_000 });
      for (let i = 0; i < 5; i++) await seed.register({ id: `i${i}`, name: SERVICE, address: `127.0.0.1:${9000 + i}` });
      for (const which of SCENARIOS) {
        const results = await scenario(cluster, which);
        for (const [name, res] of results) {
          if (res === undefined) crashed = true;
          else all.set(`${which}|${name}`, [...(all.get(`${which}|${name}`) ?? []), res]);
        }
      }
      await seed.close();
    } finally {
      await cluster.stop();
    }
  }
  const fmt = (x: number) => (Number.isNaN(x) ? '–' : x >= 100 ? x.toFixed(0) : x.toFixed(2));
  const rows = [['fault', 'subject', 'lookups', 'failed', 'p50 ms', 'p99 ms', 'max ms', 'p50 before', 'gap ms', 'via dead ms']];
  for (const which of SCENARIOS) {
    for (const name of SUBJECTS) {
      const rs = all.get(`${which}|${name}`) ?? [];
      const m = (k: keyof ChildResult) => median(rs.map((x) => x[k]));
      rows.push([
        which,
        name,
        fmt(m('lookups')),
        String(Math.max(0, ...rs.map((x) => x.failed))),
        fmt(m('p50')),
        fmt(m('p99')),
        fmt(m('max')),
        fmt(m('baseP50')),
        fmt(m('gapMs')),
        fmt(m('viaDeadMs')),
      ]);
    }
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  for (const row of rows) process.stdout.write(`  ${row.map((c, i) => c.padEnd(widths[i]!)).join('  ')}\n`);
  process.stdout.write('  (failed: the most in any run; the other columns: medians over runs)\n');
  const get = (which: Scenario, name: SubjectName, k: keyof ChildResult) => median((all.get(`${which}|${name}`) ?? []).map((x) => x[k]));
  const worst = (which: Scenario, name: SubjectName) => Math.max(...(all.get(`${which}|${name}`) ?? [{ failed: NaN } as ChildResult]).map((x) => x.failed));
  const targets: Array<{ label: string; value: number; ok: boolean; unit?: string }> = [];
  for (const which of SCENARIOS) {
    const failed = worst(which, 'EtcdRegistry');
    targets.push({ label: `EtcdRegistry: 0 failed lookups, ${which}`, value: failed, ok: failed === 0 });
    const cached = worst(which, 'EtcdRegistry + RegistryCache');
    targets.push({ label: `EtcdRegistry + RegistryCache: 0 failed lookups, ${which}`, value: cached, ok: cached === 0 });
  }
  const ratio = get('follower SIGKILL', 'EtcdRegistry', 'p99') / get('follower SIGKILL', 'etcd3 (plain)', 'p99');
  targets.push({ label: 'EtcdRegistry p99 through a follower SIGKILL ≤ 3× plain etcd3', value: ratio, ok: ratio <= 3, unit: '×' });
  process.stdout.write('  targets:\n');
  for (const t of targets)
    process.stdout.write(
      `  ${t.ok && !Number.isNaN(t.value) ? '✓' : '✗'} ${t.label}: ${Number.isNaN(t.value) ? 'failed' : `${+t.value.toPrecision(3)}${t.unit ?? ''}`}\n`,
    );
  if (crashed) {
    process.stdout.write('  a subject crashed\n');
    process.exitCode = 1;
  }
}

const subjectAt = process.argv.indexOf('--subject');
if (subjectAt >= 0) await child(process.argv[subjectAt + 1] as SubjectName, process.argv[process.argv.indexOf('--hosts') + 1]!.split(','));
else await parent();
