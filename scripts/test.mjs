#!/usr/bin/env node
// Runs every test (unit tests beside the code in src/, cross-module and real-server tests in test/) with
// node:test's own runner. Arguments filter files by substring; --test-name-pattern=<re> (node's option,
// repeatable) runs only the tests whose names match; --typecheck type-checks too (what `npm test` does):
//   node scripts/test.mjs breaker registry
//   node scripts/test.mjs grpc-balancing --test-name-pattern=P2C
// BULWARK_TEST_CONCURRENCY (default 2) is node's --test-concurrency for the files that use the CPU.
//
// Each part is here for a reason node's runner does not cover:
// - The build. Tests that start processes run what a user runs, the built CLI (`node dist/cli/main.js`)
//   and the built package, so dist/ is rebuilt (tsc -p tsconfig.build.json) whenever a file it is built
//   from (src/ but its tests, the tsconfigs, package.json) is newer than the last build (.tmp/build-stamp).
// - TypeScript under plain node (scripts/test-ts.mjs, test-ts-hooks.mjs): the .ts files of src/ and test/
//   that changed are compiled at once (types stripped by esbuild, into .tmp/ts-js/) and every test process
//   and the TypeScript children it starts load them, instead of loading tsx (~0.3 CPU-s a process).
// - The type check (--typecheck: tsc --noEmit, incremental in .tmp/) runs beside the build and the tests;
//   its output is shown if it fails, and then the run fails once the tests are done.
// - One process per module for the unit tests of src/ (node 20 has no --experimental-test-isolation):
//   a generated entry, .tmp/units/<module>.test.mjs, imports the module's test files in turn, each file's
//   tests in a suite named by the file, so a failure still names its file. A process's start-up was most
//   of what a short test file cost. ISOLATED files keep a process of their own; the short test/ files in
//   SHARED share a few the same way; every other test/ file (servers, children, chaos) keeps its own.
// - The order. node's runner starts files in the order given (`node --test` sorts them by name), so the
//   files are given longest first, by the times the last run recorded (.tmp/test-times.json, written by
//   scripts/test-times.mjs): a long real-server file started last would run on alone.
// - Two runs at once (scripts/test-run.mjs): the load-sensitive files (SENSITIVE), one at a time, followed
//   by the files that mostly wait on servers (WAITING), in one; every other file but ALONE's, BULWARK_TEST_CONCURRENCY
//   at a time, in the other. The waiting files get a slot beside the two CPU slots, as they idle most of
//   their time; the sensitive ones never run beside a waiting file, nor beside each other. Then the files
//   that measure a fleet of processes (ALONE), one at a time, once both runs have ended.
// - --test-force-exit ends a file's process once its tests are done instead of waiting for a timer or
//   socket a dependency leaves behind. It hides nothing a test asserts: every close() is still awaited in
//   the files' after() hooks, and test/registry-etcd.test.ts checks in a child process that a closed
//   EtcdRegistry leaves nothing that keeps a process alive. Its process.exit() would drop results still
//   queued for the pipe to the runner: scripts/test-stdout.mjs, preloaded into every test process, makes
//   those writes blocking.
// - A file gets 240 s: the docs test runs ~45 example programs, each a process of its own.
//
// No test waits a fixed time for something to happen: each waits for a condition with a deadline
// (test/support/servers.ts's waitFor), and unit tests drive a ManualClock. These fixed waits stay, because
// the time is the thing under test (or the scenario), not a wait for something:
// - test/serve-etcd-cluster.test.ts, 7 s after the etcd leader's kill: past the nodes' 6 s lease TTL, a
//   lease not kept alive through the election would have expired; the rings must never lose a member.
// - test/limit-redis.test.ts, 2.5 s in rescue: the window over which rescue's admissions are counted
//   against rate / instances; and 300 ms while Redis is stopped: its probes keep failing, and still only
//   one warning is emitted for the outage (nothing to wait for: it is something that must not happen).
// - test/registry-chaos.test.ts, 1.5 s: the etcd outage's length, which the lookups must ride out.
// - test/cli-registry.test.ts, 1 s: the etcd outage under `registry watch`, longer than a reconnect attempt.
// - test/serve-partition.test.ts and test/limit-partition.test.ts, 5 s: the partition's length.
// - test/fleet-breakers.test.ts, 500 ms: the store's outage beyond its detection, which no call may fail
//   through.
// - test/serve-cluster.test.ts, 1.5 s: a node started while etcd is down must stay not ready throughout.
// - test/serve-node.test.ts, 500 ms: held-1's 400 ms TTL (±10 %) in a child process (no clock to drive)
//   must have passed for the stale answer under test.
// - test/http-middleware.test.ts, 20 ms: after the late handler answers, no token is reported twice.
// - test/event-loop-load.test.ts, 2 × 15 ms: node's event-loop delay monitor records on its own real timer.
// - src/core/abort.test.ts, delay(1): the real-timer path of core's delay() is what it tests.
// Polls inside a wait for a condition (waitFor's 25 ms) and the pace of a bounded load loop (a few ms
// between calls) are not waits and are not listed.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { compileTs } from './test-ts-hooks.mjs';

const root = new URL('..', import.meta.url).pathname;
const args = process.argv.slice(2);
const typecheck = args.includes('--typecheck');
const namePatterns = [];
const filters = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--typecheck') continue;
  if (a === '--test-name-pattern') namePatterns.push(args[++i] ?? '');
  else if (a.startsWith('--test-name-pattern=')) namePatterns.push(a.slice('--test-name-pattern='.length));
  else filters.push(a);
}
const concurrency = Number(process.env.BULWARK_TEST_CONCURRENCY ?? 2);
if (!Number.isInteger(concurrency) || concurrency < 1) {
  console.error(`BULWARK_TEST_CONCURRENCY must be a whole number ≥ 1, got ${process.env.BULWARK_TEST_CONCURRENCY}`);
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
  'test-parts': [
    'balancer-health',
    'balancer-registry',
    'cache-cluster',
    'cache-membership',
    'client-fetch',
    'http-guards',
    'http-middleware',
    'registry-client-watches',
    'registry-contract',
    'servers',
  ],
};
/**
 * WAITING lists the test/ files that mostly wait — on etcd's elections and lease TTLs, a Redis Cluster's
 * failover, an outage, Prometheus's scrapes, deadlines, Go builds and peers, partitions — not on the CPU
 * (alone, their wall time is 2.5-4× their CPU time). They run one at a time in a slot beside the others.
 */
const WAITING = [
  'test/registry-chaos.test.ts',
  'test/limit-cluster.test.ts',
  'test/metrics-prometheus.test.ts',
  'test/ops-dashboard.test.ts',
  'test/limit-redis.test.ts',
  'test/cache-peer-deadlines.test.ts',
  'test/groupcache-interop.test.ts',
  'test/registry-go-interop.test.ts',
  'test/registry-go-e2e.test.ts',
  'test/limit-partition.test.ts',
  'test/serve-partition.test.ts',
  'test/latency.test.ts',
  'test/limit-cluster-partition.test.ts',
  'test/registry-etcd-partition.test.ts',
  // A fleet-aware breaker partitioned from etcd: lease TTLs and TCP retransmission after the heal.
  'test/fleet-partition.test.ts',
];

/**
 * SENSITIVE lists the test/ files whose assertions depend on how busy the machine is: P2C's share of calls
 * to a slow server, whose fast servers share the test's event loop (grpc-balancing), and the shedder under
 * a CPU-bound overload (grpc-shedding). They run first in the waiting files' slot, one at a time.
 */
const SENSITIVE = ['test/grpc-balancing.test.ts', 'test/grpc-shedding.test.ts'];

/**
 * ALONE lists the test/ files that measure a fleet of processes against a bound and run after both runs
 * have ended, one at a time, with nothing beside them: fleet-breakers counts the calls ten caller
 * processes send to a dead dependency before the fleet's evidence has reached all of them (≤ 40 on
 * etcd and on Redis), and that count is the callers' and the store's time to react — beside two other
 * test files their event loops waited 40–400 ms for a core, and it read 28–102.
 */
const ALONE = ['test/fleet-breakers.test.ts'];

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
  ? run('typecheck (tsc --noEmit)', [tsc, '-p', 'tsconfig.json', '--noEmit', '--incremental', '--tsBuildInfoFile', join(tmp, 'typecheck.tsbuildinfo')], {
      quiet: true,
    })
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
    writeFileSync(
      entry,
      `// Generated by scripts/test.mjs: these test files in one process, each file's tests in a suite named by the file.
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
`,
    );
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
// The test/ files first, then the shared processes (a core busy for 5-15 s straight: beside a sensitive
// file at the start, one failed grpc-balancing's P2C test); each part longest first, a file not timed yet
// first in its part.
const part = (f) => (f.startsWith('test/') ? 0 : 1);
files.sort((a, b) => part(a) - part(b) || expected(b) - expected(a));
const waitSlot = files.filter((f) => SENSITIVE.includes(f)).concat(files.filter((f) => WAITING.includes(f)));
const plan = { files, slot: waitSlot, alone: files.filter((f) => ALONE.includes(f)), concurrency, timeoutMs: 240_000, namePatterns };
const child = spawn(
  process.execPath,
  [
    '--import',
    join(root, 'scripts', 'test-ts.mjs'),
    '--import',
    join(root, 'scripts', 'test-stdout.mjs'),
    join(root, 'scripts', 'test-run.mjs'),
    JSON.stringify(plan),
  ],
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
