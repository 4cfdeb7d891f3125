#!/usr/bin/env node
// Runs every test (unit tests beside the code in src/, cross-module and real-server tests in test/)
// with node:test, TypeScript loaded through tsx. Arguments filter files by substring:
//   node scripts/test.mjs breaker registry
// `npm test` runs `node scripts/test.mjs --typecheck`: the type check of everything (tsc --noEmit, incremental
// through .tmp/typecheck.tsbuildinfo) runs beside the build, and the tests only if both pass.
//
// It builds first. Tests that start processes run what a user runs — the built CLI (`node dist/cli/main.js`)
// and the built package (docs examples, test children) — so dist/ is rebuilt (tsc -p tsconfig.build.json)
// whenever a file it is built from (src/ but its tests, the tsconfigs, package.json) is newer than the last
// build (.tmp/build-stamp); `node scripts/test.mjs serve` never tests a stale dist/.
//
// The unit tests in src/ run one process per module, not one per file: a generated entry,
// .tmp/units/<module>.test.mjs, imports that module's test files in turn, each file's tests inside a suite
// named by the file (`src/core/clock.test.ts`), so a failure still names its file and test; a process's
// start-up (node + tsx, ~0.4 CPU-s) is most of what a unit test file costs. Files in ISOLATED keep a process
// of their own (see there). The test/ files, which start servers and set process-wide hooks, keep theirs.
//
// A file gets 240 s: the docs test runs ~45 example programs, each a process of its own.
//
// Files run two at a time (BULWARK_TEST_CONCURRENCY to change it), the longest first: each run records how
// long each file's tests took in .tmp/test-times.json (scripts/test-times.mjs, a reporter beside the
// visible one), and the next run starts the files in that order, so that the long real-server files do not
// start last while the other slot idles; files not timed yet go first among test/ files (they may be long)
// and last among src/ ones (unit tests, short).
//
// --test-force-exit ends a file's process once its tests are done instead of waiting for a timer or socket
// a dependency leaves behind. It hides nothing a test asserts: every close() is still awaited in the files'
// after() hooks, and test/registry-etcd.test.ts checks in a child process that a closed EtcdRegistry
// leaves nothing that keeps a process alive (etcd3's watch-reconnect timer used to, for up to 30 s).
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';

const root = new URL('..', import.meta.url).pathname;
const args = process.argv.slice(2);
const typecheck = args.includes('--typecheck');
const filters = args.filter((a) => a !== '--typecheck');
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
 * ISOLATED lists the unit test files that keep a process of their own: they measure CPU time of one
 * operation against a bound, which another file's garbage would inflate.
 */
const ISOLATED = new Set(['src/balancer/scale.test.ts']);

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

/** run runs `node <args>` with its output on ours and answers its exit code. */
function run(label, nodeArgs) {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, nodeArgs, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('exit', (code, signal) => {
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

const checks = [build()];
if (typecheck) {
  checks.push(run('typecheck (tsc --noEmit)', [tsc, '-p', 'tsconfig.json', '--noEmit', '--incremental', '--tsBuildInfoFile', join(tmp, 'typecheck.tsbuildinfo')]));
}
if ((await Promise.all(checks)).some((c) => c !== 0)) process.exit(1);

/**
 * units groups the selected unit test files of src/ by module (src/<module>/…) into generated entries,
 * each importing its files in turn, every file's tests in a suite named by the file.
 */
function units(files) {
  const byModule = new Map();
  for (const f of files) {
    const module = f.split('/')[1];
    if (!byModule.has(module)) byModule.set(module, []);
    byModule.get(module).push(f);
  }
  rmSync(unitsDir, { recursive: true, force: true });
  mkdirSync(unitsDir, { recursive: true });
  const entries = [];
  for (const [module, group] of byModule) {
    const entry = join(unitsDir, `${module}.test.mjs`);
    const list = group.map((f) => `  ${JSON.stringify(f)},`).join('\n');
    writeFileSync(entry, `// Generated by scripts/test.mjs: the unit tests of src/${module}/ in one process, each file's tests in a suite named by the file.
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
    entries.push(relative(root, entry));
  }
  return entries;
}

const grouped = selected.filter((f) => f.startsWith('src/') && !ISOLATED.has(f));
const files = [...units(grouped), ...selected.filter((f) => !grouped.includes(f))];

const times = readTimes(timesFile);
const expected = (f) => times[join(root, f)] ?? (f.startsWith('test/') ? Infinity : 0);
files.sort((a, b) => expected(b) - expected(a));

// The visible reporter is node's default: spec on a terminal, TAP otherwise.
const visible = process.stdout.isTTY ? 'spec' : 'tap';
const child = spawn(
  process.execPath,
  [
    '--import', 'tsx', '--test', '--test-force-exit', `--test-concurrency=${concurrency}`, '--test-timeout=240000',
    `--test-reporter=${visible}`, '--test-reporter-destination=stdout',
    `--test-reporter=${join(root, 'scripts', 'test-times.mjs')}`, '--test-reporter-destination=stderr',
    ...files,
  ],
  { cwd: root, stdio: 'inherit', env: { ...process.env, BULWARK_TEST_TIMES_FILE: lastRunFile } },
);
child.on('exit', (code, signal) => {
  if (existsSync(lastRunFile)) {
    const merged = { ...readTimes(timesFile), ...readTimes(lastRunFile) };
    writeFileSync(timesFile, `${JSON.stringify(merged, null, 1)}\n`);
    rmSync(lastRunFile, { force: true });
  }
  process.exit(code ?? (signal ? 1 : 0));
});
