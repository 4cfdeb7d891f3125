#!/usr/bin/env node
// Runs every test (unit tests beside the code in src/, cross-module and real-server tests in test/)
// with node:test. TypeScript runs under plain node through scripts/test-ts.mjs: every .ts file of src/ and
// test/ that changed since the last run is compiled (types stripped by esbuild, into .tmp/ts-js/) beside
// the build, and the test processes, and the TypeScript children they start, load those files instead of
// loading tsx (~0.3 CPU-s per process; some 100 processes a run). Arguments filter files by substring:
//   node scripts/test.mjs breaker registry
// `npm test` runs `node scripts/test.mjs --typecheck`: the type check of everything (tsc --noEmit, incremental
// through .tmp/typecheck.tsbuildinfo) runs beside the build and then beside the tests; its output is shown
// if it fails, and then the run fails once the tests are done.
//
// It builds first. Tests that start processes run what a user runs — the built CLI (`node dist/cli/main.js`)
// and the built package (docs examples, test children) — so dist/ is rebuilt (tsc -p tsconfig.build.json)
// whenever a file it is built from (src/ but its tests, the tsconfigs, package.json) is newer than the last
// build (.tmp/build-stamp); `node scripts/test.mjs serve` never tests a stale dist/.
//
// The unit tests in src/ run one process per module, not one per file: a generated entry,
// .tmp/units/<module>.test.mjs, imports that module's test files in turn, each file's tests (and top-level
// hooks) inside a suite named by the file (`src/core/clock.test.ts`), so a failure still names its file and
// test; a process's start-up (node + tsx + loading src through tsx, ~1 CPU-s then) was most of what a short
// test file cost. Files in ISOLATED keep a process of their own. The short test/ files listed in SHARED
// share a few processes the same way; every other test/ file (servers, children, chaos) keeps its own.
//
// A file gets 240 s: the docs test runs ~45 example programs, each a process of its own.
//
// Files run in lanes (scripts/test-lanes.mjs): two at a time (BULWARK_TEST_CONCURRENCY to change it), and
// beside them the files listed in WAITING, which mostly wait on servers, one at a time; the files listed in
// SENSITIVE never run beside a waiting file. Start order: the SENSITIVE files, then the test/ files with a
// process of their own, then the shared processes (.tmp/units/…, src/balancer/scale.test.ts), each part the
// longest first. Each run records how long each file's tests took in .tmp/test-times.json (scripts/test-times.mjs,
// a reporter beside the visible one), and the next run starts the files in that order, so that the long
// real-server files do not start last while the other slot idles; a file not timed yet goes first in its
// part. The shared processes keep a core busy for 5-15 s straight; in two full runs under a load of 9-14
// that ordered them among the real-server files, grpc-balancing's P2C test (its fast servers share the
// test's event loop) failed with the balancer unit process beside it.
//
// --test-force-exit ends a file's process once its tests are done instead of waiting for a timer or socket
// a dependency leaves behind. It hides nothing a test asserts: every close() is still awaited in the files'
// after() hooks, and test/registry-etcd.test.ts checks in a child process that a closed EtcdRegistry
// leaves nothing that keeps a process alive (etcd3's watch-reconnect timer used to, for up to 30 s).
// Its process.exit() would drop results still queued for the pipe to the runner: scripts/test-stdout.mjs,
// preloaded into every test process, makes those writes blocking.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { compileTs } from './test-ts-hooks.mjs';

const root = new URL('..', import.meta.url).pathname;
const args = process.argv.slice(2);
const typecheck = args.includes('--typecheck');
const filters = args.filter((a) => a !== '--typecheck');
const concurrency = Number(process.env.BULWARK_TEST_CONCURRENCY ?? 2);
if (!Number.isInteger(concurrency) || concurrency < 1) {
  console.error(`BULWARK_TEST_CONCURRENCY must be a whole number ≥ 1, got ${process.env.BULWARK_TEST_CONCURRENCY}`);
  process.exit(2);
}
const waitLane = Number(process.env.BULWARK_TEST_WAIT_LANE ?? 1);
if (!Number.isInteger(waitLane) || waitLane < 0) {
  console.error(`BULWARK_TEST_WAIT_LANE must be a whole number ≥ 0, got ${process.env.BULWARK_TEST_WAIT_LANE}`);
  process.exit(2);
}
const tmp = join(root, '.tmp');
const timesFile = join(tmp, 'test-times.json');
const lastRunFile = join(tmp, `test-times.${process.pid}.json`);
const buildStamp = join(tmp, 'build-stamp');
const unitsDir = join(tmp, 'units');
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

/**
 * ISOLATED lists the unit test files of src/ that keep a process of their own: they measure CPU time of one
 * operation against a bound, which another file's garbage would inflate.
 */
const ISOLATED = new Set(['src/balancer/scale.test.ts']);

/**
 * SHARED lists the test/ files that share a process, by group: .tmp/units/<group>.test.mjs runs the group's
 * files. Every other test/ file keeps a process of its own, as a new one does until it is listed here. A
 * file listed here is short, leaves no server, socket, timer or subscription behind its after() hooks, sets
 * nothing process-wide that another file's assertions see, and measures no time or CPU against a bound.
 */
const SHARED = {
  'test-redis': ['limit-batch', 'limit-cluster-rescue', 'limit-keys', 'limit-rescue', 'limit-slots', 'diagnostics-redis', 'metrics-redis'],
  'test-metrics': ['metrics-client', 'metrics-docs', 'metrics-text', 'metrics-unit', 'diagnostics', 'ops-alerts'],
  'test-parts': ['balancer-health', 'balancer-registry', 'cache-cluster', 'cache-membership', 'client-fetch', 'http-guards', 'http-middleware', 'registry-client-watches', 'registry-contract', 'servers'],
};
/**
 * WAITING lists the test/ files that mostly wait — on etcd's elections and lease TTLs, a Redis Cluster's
 * failover, an outage, Prometheus's scrapes, deadlines, Go peers — not on the CPU: alone, their wall time
 * is 2.5-4× their CPU time, and what they bound in time is seconds of server behaviour (a lease, a
 * failover, a deadline), not a latency a busy CPU stretches. (registry-etcd, 2×, is not listed: it already
 * runs four tests at once, and its 1.5 s dial timeouts on a real etcd failed once at a load of 11.)
 * They run in a lane of their own (BULWARK_TEST_WAIT_LANE files at a time, default 1; 0 runs them among
 * the others) beside the BULWARK_TEST_CONCURRENCY slots of the other files. A file listed here must keep
 * its assertions robust to a busy machine: every wait a deadline on a condition.
 */
const WAITING = new Set([
  'test/registry-chaos.test.ts',
  'test/limit-cluster.test.ts',
  'test/metrics-prometheus.test.ts',
  'test/ops-dashboard.test.ts',
  'test/limit-redis.test.ts',
  'test/cache-peer-deadlines.test.ts',
  'test/groupcache-interop.test.ts',
  // lease TTLs and a Go program (the etcd client's cold build is ~50 s of one core; in this lane the two
  // files build one after the other, the second from Go's build cache)
  'test/registry-go-interop.test.ts',
  'test/registry-go-e2e.test.ts',
  // Partitions and latency (test/support/netfault.ts): 5 s partitions and deadlines under a delaying proxy.
  'test/limit-partition.test.ts',
  'test/serve-partition.test.ts',
  'test/latency.test.ts',
  'test/limit-cluster-partition.test.ts',
  'test/registry-etcd-partition.test.ts',
  // Fleet-aware breakers: ten caller processes, open periods, a store SIGKILLed and a caller's TTL.
  'test/fleet-breakers.test.ts',
  // A fleet-aware breaker partitioned from etcd: lease TTLs and TCP retransmission after the heal.
  'test/fleet-partition.test.ts',
]);

/**
 * SENSITIVE lists the test/ files whose assertions depend on how busy the machine is: P2C's share of calls
 * to a slow server, whose fast servers share the test's event loop (grpc-balancing), and the shedder under
 * a CPU-bound overload (grpc-shedding). They start first, never two at once, and no waiting file starts
 * while one runs, so that nothing runs beside them that did not before (one other file).
 */
const SENSITIVE = new Set(['test/grpc-balancing.test.ts', 'test/grpc-shedding.test.ts']);

const sharedGroup = new Map(Object.entries(SHARED).flatMap(([group, names]) => names.map((n) => [`test/${n}.test.ts`, group])));

function walk(dir, keep, out) {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name.startsWith('.')) continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, keep, out);
    else if (keep(name)) out.push(relative(root, p));
  }
  return out;
}

function readTimes(file) {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return {};
  }
}

const isTest = (name) => name.endsWith('.test.ts');
const selected = [...walk(join(root, 'src'), isTest, []), ...walk(join(root, 'test'), isTest, [])]
  .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
  .sort();
if (selected.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
mkdirSync(tmp, { recursive: true });

/**
 * run runs `node <args>` and answers its exit code; its output goes to ours, or with `quiet` is kept and
 * printed only if it fails.
 */
function run(label, nodeArgs, { quiet = false } = {}) {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, nodeArgs, { cwd: root, stdio: ['ignore', quiet ? 'pipe' : 'inherit', quiet ? 'pipe' : 'inherit'] });
    let output = '';
    child.stdout?.on('data', (d) => (output += d));
    child.stderr?.on('data', (d) => (output += d));
    child.on('exit', (code, signal) => {
      if (code !== 0) process.stderr.write(output);
      console.error(`# ${label}: ${code === 0 ? 'done' : `failed (${code ?? signal})`} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
      resolve(code ?? 1);
    });
  });
}

/** buildIsStale tells whether dist/ is older than a file it is built from (or missing). */
function buildIsStale() {
  if (!existsSync(join(root, 'dist', 'cli', 'main.js')) || !existsSync(buildStamp)) return true;
  const built = statSync(buildStamp).mtimeMs;
  const inputs = walk(join(root, 'src'), (n) => n.endsWith('.ts') && !n.endsWith('.test.ts'), []);
  inputs.push('tsconfig.json', 'tsconfig.build.json', 'package.json');
  return inputs.some((f) => statSync(join(root, f)).mtimeMs > built);
}

async function build() {
  if (!buildIsStale()) return 0;
  const started = new Date();
  const code = await run('build (tsc -p tsconfig.build.json)', [tsc, '-p', 'tsconfig.build.json']);
  if (code === 0) {
    // stamped with the time the build started: a file saved during the build makes the next run build again
    writeFileSync(buildStamp, '');
    utimesSync(buildStamp, started, started);
  }
  return code;
}

/** compile compiles the .ts files of src/ and test/ that changed since the last run, for scripts/test-ts.mjs. */
async function compile() {
  const started = performance.now();
  const ts = (n) => n.endsWith('.ts') && !n.endsWith('.d.ts');
  const count = await compileTs([...walk(join(root, 'src'), ts, []), ...walk(join(root, 'test'), ts, [])].map((f) => join(root, f)));
  if (count > 0) console.error(`# compiled ${count} TypeScript file(s) for the tests in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return 0;
}

// The type check runs beside the tests too (its output is shown if it fails, and then the run fails at the
// end): the tests need the build (test children run dist/), not the type check.
const typechecked = typecheck
  ? run('typecheck (tsc --noEmit)', [tsc, '-p', 'tsconfig.json', '--noEmit', '--incremental', '--tsBuildInfoFile', join(tmp, 'typecheck.tsbuildinfo')], { quiet: true })
  : Promise.resolve(0);
if ((await Promise.all([build(), compile()])).some((c) => c !== 0)) {
  await typechecked;
  process.exit(1);
}

/** groupOf answers the shared process a file runs in (`core`, `test-redis`), or undefined for one of its own. */
function groupOf(file) {
  if (file.startsWith('src/')) return ISOLATED.has(file) ? undefined : file.split('/')[1];
  return sharedGroup.get(file);
}

/**
 * entries writes a generated entry per group, .tmp/units/<group>.test.mjs, that runs the group's files in
 * one process, each file's tests (and its top-level hooks) in a suite named by the file.
 */
function entries(groups) {
  rmSync(unitsDir, { recursive: true, force: true });
  mkdirSync(unitsDir, { recursive: true });
  const out = [];
  for (const [group, files] of groups) {
    const entry = join(unitsDir, `${group}.test.mjs`);
    const list = files.map((f) => `  ${JSON.stringify(f)},`).join('\n');
    writeFileSync(entry, `// Generated by scripts/test.mjs: these test files in one process, each file's tests in a suite named by the file.
import { AsyncResource } from 'node:async_hooks';
import { describe } from 'node:test';
const files = [
${list}
];
// Every suite is registered at once (the process ends when the last registered test does), but the files
// load one at a time: a file's tests register inside its suite as its module evaluates, and node:test
// finds a new test's parent through the async context the test was created in, so each import() runs in
// the scope of its suite (an AsyncResource made while the suite's function runs), after the previous file.
let previous = Promise.resolve();
for (const file of files) {
  describe(file, () => {
    const scope = new AsyncResource(file);
    const url = new URL(\`../../\${file}\`, import.meta.url).href;
    const loading = previous.then(() => scope.runInAsyncScope(() => import(url)));
    previous = loading.catch(() => {}); // a file that fails to load fails its suite, not the next ones
    return loading;
  });
}
`);
    out.push(relative(root, entry));
  }
  return out;
}

const groups = new Map();
const alone = [];
for (const f of selected) {
  const group = groupOf(f);
  if (group === undefined) alone.push(f);
  else groups.set(group, [...(groups.get(group) ?? []), f]);
}
const files = [...entries(groups), ...alone];

const times = readTimes(timesFile);
const expected = (f) => times[join(root, f)] ?? Infinity;
/** kindOf answers a file's lane (see test-lanes.mjs): 'wait', 'sensitive' or 'cpu'. */
const kindOf = (f) => (WAITING.has(f) && waitLane > 0 ? 'wait' : SENSITIVE.has(f) ? 'sensitive' : 'cpu');
// Start order: the load-sensitive files first (see SENSITIVE), then the test/ files with a process of their
// own, then the shared processes, each part the longest first.
const part = (f) => (kindOf(f) === 'sensitive' ? 0 : f.startsWith('test/') ? 1 : 2);
files.sort((a, b) => part(a) - part(b) || expected(b) - expected(a));

// The visible reporter is node's default: spec on a terminal, TAP otherwise.
const plan = {
  files: files.map((file) => ({ file, kind: kindOf(file) })),
  cpu: concurrency,
  wait: waitLane,
  timeoutMs: 240_000,
  reporter: process.stdout.isTTY ? 'spec' : 'tap',
  timesReporter: join(root, 'scripts', 'test-times.mjs'),
};
const child = spawn(
  process.execPath,
  ['--import', join(root, 'scripts', 'test-ts.mjs'), '--import', join(root, 'scripts', 'test-assert.mjs'), '--import', join(root, 'scripts', 'test-stdout.mjs'), join(root, 'scripts', 'test-lanes.mjs'), JSON.stringify(plan)],
  { cwd: root, stdio: 'inherit', env: { ...process.env, BULWARK_TEST_TIMES_FILE: lastRunFile } },
);
const tested = await new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
if (existsSync(lastRunFile)) {
  const merged = { ...readTimes(timesFile), ...readTimes(lastRunFile) };
  writeFileSync(timesFile, `${JSON.stringify(merged, null, 1)}\n`);
  rmSync(lastRunFile, { force: true });
}
const checked = await typechecked;
process.exit(tested !== 0 ? tested : checked);
