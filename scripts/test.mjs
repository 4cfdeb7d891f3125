#!/usr/bin/env node
// Runs every test (unit tests beside the code in src/, cross-module and real-server tests in test/)
// with node:test, TypeScript loaded through tsx. Arguments filter files by substring:
//   node scripts/test.mjs breaker registry
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
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { spawn } from 'node:child_process';

const root = new URL('..', import.meta.url).pathname;
const filters = process.argv.slice(2);
const concurrency = Number(process.env.BULWARK_TEST_CONCURRENCY ?? 2);
if (!Number.isInteger(concurrency) || concurrency < 1) {
  console.error(`BULWARK_TEST_CONCURRENCY must be a whole number ≥ 1, got ${process.env.BULWARK_TEST_CONCURRENCY}`);
  process.exit(2);
}
const timesFile = join(root, '.tmp', 'test-times.json');
const lastRunFile = join(root, '.tmp', `test-times.${process.pid}.json`);

function walk(dir, out) {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name.startsWith('.')) continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (name.endsWith('.test.ts')) out.push(relative(root, p));
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

const times = readTimes(timesFile);
const expected = (f) => times[join(root, f)] ?? (f.startsWith('test/') ? Infinity : 0);
const files = [...walk(join(root, 'src'), []), ...walk(join(root, 'test'), [])]
  .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
  .sort()
  .sort((a, b) => expected(b) - expected(a));
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
mkdirSync(join(root, '.tmp'), { recursive: true });
// The visible reporter is node's default: spec on a terminal, TAP otherwise.
const visible = process.stdout.isTTY ? 'spec' : 'tap';
const child = spawn(
  process.execPath,
  [
    '--import', 'tsx', '--import', join(root, 'scripts', 'test-assert.mjs'), '--test', '--test-force-exit', `--test-concurrency=${concurrency}`, '--test-timeout=240000',
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
