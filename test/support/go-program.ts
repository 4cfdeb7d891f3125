/**
 * Go programs the interop tests build and run: `buildGo` compiles one source file in GOPATH mode against
 * Debian's Go source packages (/usr/share/gocode) into a temp dir; `startGo` runs the binary, reads its
 * stdout as lines and stops it by PID.
 *
 * When `go` or a needed package is missing, `buildGo` answers a skip reason — unless
 * BULWARK_REQUIRE_SERVERS=1, where it throws so the run fails instead of passing on a skip.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findBinary, requireServers, tempDir } from './servers.js';

/** GOPATH holding Debian's Go sources (golang-*-dev packages). */
export const GOPATH = process.env.BULWARK_GOPATH ?? '/usr/share/gocode';
/** A cold build takes ~12 s (groupcache) to ~50 s (the etcd client); the Go build cache (kept across runs) makes it ~2 s. */
const BUILD_TIMEOUT_MS = 240_000;

/** GoBuild is the compiled program, or why there is none. */
export type GoBuild = { binary: string; remove(): void } | { skip: string };

/** GoPackage is a source package a program needs: its import path and the Debian package that ships it. */
export interface GoPackage {
  importPath: string;
  debian: string;
}

/** buildGo compiles `source` into a temp dir (call once per test file). */
export async function buildGo(source: string, needs: readonly GoPackage[]): Promise<GoBuild> {
  const go = findBinary('go');
  if (go === undefined) return { skip: 'go is not installed (set BULWARK_REQUIRE_SERVERS=1 to fail instead)' };
  for (const p of needs) {
    if (!existsSync(join(GOPATH, 'src', p.importPath))) {
      const why = `${p.importPath} is not in ${GOPATH} (Debian: ${p.debian})`;
      if (requireServers) throw new Error(`${why}, and BULWARK_REQUIRE_SERVERS=1 requires it`);
      return { skip: why };
    }
  }
  const dir = tempDir('go-build');
  const binary = join(dir.path, 'program');
  const env = { ...process.env, GO111MODULE: 'off', GOPATH, GOCACHE: process.env.GOCACHE ?? join(tmpdir(), 'bulwark-go-build-cache'), GOFLAGS: '' };
  await new Promise<void>((resolve, reject) => {
    execFile(go, ['build', '-o', binary, source], { env, timeout: BUILD_TIMEOUT_MS }, (err, _out, stderr) =>
      err ? reject(new Error(`go build failed: ${stderr || err.message}`)) : resolve(),
    );
  });
  return { binary, remove: dir.remove };
}

/** GoProcess is one running Go program. */
export interface GoProcess {
  readonly child: ChildProcess;
  /** Every line it printed so far. */
  readonly lines: string[];
  /** expect resolves with the match of the first line (printed so far or later) matching `re`. */
  expect(re: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  /** last answers the match of the last line printed so far matching `re`. */
  last(re: RegExp): RegExpExecArray | undefined;
  /** stop kills it (SIGKILL by PID) and resolves when it has exited. */
  stop(): Promise<void>;
  /** exited resolves when the process has ended. */
  readonly exited: Promise<void>;
}

/** startGo runs `binary` with `args`; stderr goes to the test's. */
export function startGo(binary: string, args: readonly string[]): GoProcess {
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines: string[] = [];
  let partial = '';
  const waiters = new Set<{ re: RegExp; resolve: (m: RegExpExecArray) => void }>();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.stdout!.on('data', (b: Buffer) => {
    const parts = (partial + b.toString()).split('\n');
    partial = parts.pop()!;
    for (const line of parts) {
      lines.push(line);
      for (const w of [...waiters]) {
        const m = w.re.exec(line);
        if (m !== null) {
          waiters.delete(w);
          w.resolve(m);
        }
      }
    }
  });
  return {
    child,
    lines,
    exited,
    expect(re, timeoutMs = 15_000) {
      for (const line of lines) {
        const m = re.exec(line);
        if (m !== null) return Promise.resolve(m);
      }
      return new Promise((resolve, reject) => {
        const w = { re, resolve: (m: RegExpExecArray) => (clearTimeout(timer), resolve(m)) };
        const timer = setTimeout(() => (waiters.delete(w), reject(new Error(`Go program printed no line matching ${re} within ${timeoutMs} ms`))), timeoutMs);
        waiters.add(w);
        void exited.then(() => {
          if (waiters.delete(w)) {
            clearTimeout(timer);
            reject(new Error(`Go program exited before printing a line matching ${re}`));
          }
        });
      });
    },
    last(re) {
      for (let i = lines.length - 1; i >= 0; i--) {
        const m = re.exec(lines[i]!);
        if (m !== null) return m;
      }
      return undefined;
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!, 'SIGKILL');
      await exited;
    },
  };
}
