/**
 * Test harness for real servers (etcd, redis-server): find the binary, pick free loopback ports, spawn
 * the process in a temp dir, wait until it answers, stop it by PID. Chaos tests kill, pause and restart.
 *
 * When a binary is missing, `findBinary` answers undefined and the test skips with the reason — unless
 * BULWARK_REQUIRE_SERVERS=1 (CI), where it throws so the run fails instead of passing on a skip.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const SEARCH = ['/usr/bin', '/usr/local/bin', '/usr/sbin', '/bin'];

/** requireServers is true when missing servers must fail the run (CI). */
export const requireServers = process.env.BULWARK_REQUIRE_SERVERS === '1';

/** findBinary returns the path of `name`, or undefined (or throws, when servers are required). */
export function findBinary(name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(':').filter(Boolean), ...SEARCH];
  for (const d of dirs) {
    const p = join(d, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  if (requireServers) throw new Error(`${name} is not installed, and BULWARK_REQUIRE_SERVERS=1 requires it`);
  return undefined;
}

/** skipReason is what to pass to node:test's `skip` when `binary` is missing (undefined when present). */
export function skipReason(binary: string | undefined, name: string): string | undefined {
  return binary === undefined ? `${name} is not installed (set BULWARK_REQUIRE_SERVERS=1 to fail instead)` : undefined;
}

/**
 * freePort answers a TCP port on 127.0.0.1 that is free now, for a server a test is about to start.
 *
 * It picks below the kernel's ephemeral range (ip_local_port_range), where outgoing connections take
 * their local ports: a port found free inside that range can be taken by any process's connect() before
 * the server binds it, and etcd then exits with "address already in use" (seen in CI with many tests
 * connecting at once). It also stays 10 000 below the range, so that a Redis Cluster node's bus port
 * (its port + 10 000) is outside it too. Within a process no port is handed out twice.
 */
export async function freePort(): Promise<number> {
  const low = 10_000;
  const high = ephemeralLow() - 10_000;
  if (high - low >= 1_000) {
    for (let i = 0; i < 200; i++) {
      const port = low + Math.floor(Math.random() * (high - low));
      if (handedOut.has(port) || !(await canListen(port))) continue;
      handedOut.add(port);
      return port;
    }
  }
  return anyPort(); // an unusual range: let the OS choose, as before
}

const handedOut = new Set<number>();

function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) ? low : 32_768;
  } catch {
    return 32_768;
  }
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

function anyPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** tempDir makes a fresh temp folder; `remove()` deletes it. */
export function tempDir(prefix: string): { path: string; remove: () => void } {
  const path = mkdtempSync(join(tmpdir(), `bulwark-${prefix}-`));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** canConnect tells whether something accepts TCP connections on 127.0.0.1:port. */
export function canConnect(port: number, timeoutMs = 200): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ host: '127.0.0.1', port });
    const done = (ok: boolean) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(timeoutMs, () => done(false));
    sock.once('connect', () => done(true));
    sock.once('error', () => done(false));
  });
}

/** waitFor polls `check` every 25 ms until it answers true or `timeoutMs` passes (then throws). */
export async function waitFor(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** ServerProcess is a spawned server that a test controls by PID. */
export class ServerProcess {
  child: ChildProcess | undefined;
  private output = '';

  constructor(
    readonly name: string,
    readonly binary: string,
    readonly args: string[],
    readonly cwd: string,
    /** Run the server as this uid (and gid), e.g. so that an iptables owner match tells its packets apart. Defaults to ours. */
    readonly uid?: number,
  ) {}

  /** start spawns the server; `ready` is polled until it answers true. */
  async start(ready: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
    this.output = '';
    const child = spawn(this.binary, this.args, {
      cwd: this.cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(this.uid === undefined ? {} : { uid: this.uid, gid: this.uid }),
    });
    this.child = child;
    const keep = (b: Buffer) => {
      this.output = (this.output + b.toString()).slice(-8_000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    let exited = false;
    child.once('exit', () => (exited = true));
    try {
      await waitFor(
        `${this.name} to start`,
        async () => {
          if (exited) throw new Error(`${this.name} exited at start:\n${this.output}`);
          return ready();
        },
        timeoutMs,
      );
    } catch (err) {
      await this.kill();
      throw err;
    }
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** signal sends `sig` to the server's PID (SIGSTOP / SIGCONT for a server that hangs). */
  signal(sig: NodeJS.Signals): void {
    if (this.child?.pid !== undefined && this.child.exitCode === null) process.kill(this.child.pid, sig);
  }

  /** kill stops the server with `sig` (SIGKILL: no clean shutdown) and waits for it to exit. */
  async kill(sig: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    try {
      process.kill(child.pid!, 'SIGCONT');
    } catch {
      // already gone
    }
    child.kill(sig);
    await exited;
  }

  /** logs is the tail of what the server printed, for failure messages. */
  get logs(): string {
    return this.output;
  }
}
