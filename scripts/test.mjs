#!/usr/bin/env node
// Runs every test (unit tests beside the code in src/, cross-module and real-server tests in test/)
// with node:test, TypeScript loaded through tsx. Arguments filter files by substring:
//   node scripts/test.mjs breaker registry
// A file gets 240 s: the docs test runs ~35 example programs, each a process of its own.
// --test-force-exit ends a file's process once its tests are done instead of waiting for timers a
// dependency leaves behind: etcd3's WatchManager sets a reconnect backoff timer (up to 30 s, not
// unref'd, never cleared on close) each time a watch stream errors, so test/registry-etcd.test.ts, whose
// tests stop and restart etcd, used to sit idle ~26 s after its last test (55 s → 29 s for that file).
// It hides nothing a test asserts: every close() is still awaited in the files' after() hooks.
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { spawn } from 'node:child_process';

const root = new URL('..', import.meta.url).pathname;
const filters = process.argv.slice(2);

function walk(dir, out) {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name.startsWith('.')) continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (name.endsWith('.test.ts')) out.push(relative(root, p));
  }
  return out;
}

const files = [...walk(join(root, 'src'), []), ...walk(join(root, 'test'), [])]
  .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
  .sort();
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
const child = spawn(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-force-exit', '--test-concurrency=2', '--test-timeout=240000', ...files],
  { cwd: root, stdio: 'inherit' },
);
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
