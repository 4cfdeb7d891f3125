/**
 * Real golang/groupcache peers for the interop tests: `buildGoPeer` compiles test/support/groupcache-peer.go
 * once (go-program.ts: GOPATH mode against the Debian golang-github-golang-groupcache-dev sources) into a temp dir;
 * `startGoPeer` runs one on a free loopback port, hands it the peer list, and stops it by PID.
 *
 * When `go` or the groupcache sources are missing, `buildGoPeer` answers a skip reason — unless
 * BULWARK_REQUIRE_SERVERS=1, where it throws so the run fails instead of passing on a skip.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { buildGo, type GoBuild } from './go-program.js';

const SOURCE = fileURLToPath(new URL('./groupcache-peer.go', import.meta.url));

/** GoPeerBuild is the compiled peer, or why there is none. */
export type GoPeerBuild = GoBuild;

/** buildGoPeer compiles the Go peer into a temp dir (call once per test file). */
export function buildGoPeer(): Promise<GoPeerBuild> {
  return buildGo(SOURCE, [{ importPath: 'github.com/golang/groupcache', debian: 'golang-github-golang-groupcache-dev' }]);
}

/** GoPeer is one running Go groupcache node. */
export interface GoPeer {
  /** Its base URL, as it names itself on the ring. */
  url: string;
  /** setPeers gives it the peer list (itself included) and resolves once it has set it. */
  setPeers(urls: readonly string[]): Promise<void>;
  /** stop kills it (SIGKILL by PID) and resolves when it has exited. */
  stop(): Promise<void>;
}

/** startGoPeer starts a Go node whose group "items" loads from `origin` (`GET origin?key=…`). */
export async function startGoPeer(binary: string, origin: string): Promise<GoPeer> {
  const child: ChildProcess = spawn(binary, ['-origin', origin], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  const waiters: { re: RegExp; resolve: (m: RegExpExecArray) => void }[] = [];
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.stdout!.on('data', (b: Buffer) => {
    out += b.toString();
    for (const w of [...waiters]) {
      const m = w.re.exec(out);
      if (m) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(m);
      }
    }
  });
  const expect = (re: RegExp, what: string) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const m = re.exec(out);
      if (m) return resolve(m);
      const timer = setTimeout(() => reject(new Error(`Go peer did not print ${what} within 10 s`)), 10_000);
      waiters.push({ re, resolve: (x) => (clearTimeout(timer), resolve(x)) });
      void exited.then(() => reject(new Error(`Go peer exited before printing ${what}`)));
    });
  const url = (await expect(/LISTENING (\S+)\n/, 'LISTENING'))[1]!;
  return {
    url,
    async setPeers(urls) {
      child.stdin!.write(`${urls.join(',')}\n`);
      await expect(/READY\n/, 'READY');
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!, 'SIGKILL');
      await exited;
    },
  };
}
