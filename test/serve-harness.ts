/**
 * Test helper (not a test) for `bulwark serve` as users run it: each node a real process of the built CLI
 * (`node dist/cli/main.js serve …`, what the package's `bulwark` bin runs; scripts/test.mjs builds dist/
 * first when it is stale) on a free loopback port, stopped by PID; a small origin server that counts its
 * loads and can go down (503, or hang) and come back.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { freePort, waitFor } from './support/servers.js';

const root = fileURLToPath(new URL('..', import.meta.url));

/** CLI is the built `bulwark` command (package.json `bin`). */
const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));

/** bulwarkArgs answers node's arguments to run `bulwark <args>`, built. */
export function bulwarkArgs(args: readonly string[]): string[] {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run the tests with \`node scripts/test.mjs\` (or \`npm test\`), which builds dist/ first`);
  return [CLI, ...args];
}

/** ServeProc is one `bulwark serve` process. */
export interface ServeProc {
  readonly url: string;
  /** The loopback address it listens on (127.0.0.1 unless given). */
  readonly host: string;
  readonly port: number;
  /** The uid it runs as (undefined: the test's own), so that a packet filter can tell its packets apart. */
  readonly uid: number | undefined;
  readonly args: readonly string[];
  child: ChildProcess;
  /** stdout and stderr lines so far. */
  readonly lines: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** kill sends `sig` (default SIGKILL) to the PID and waits for the exit. */
  kill(sig?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** restart starts the same command again (same port) and waits until ready. */
  restart(): Promise<void>;
}

/** runBulwark runs `bulwark <args>` to its end and answers its exit code and output. */
export function runBulwark(args: string[], timeoutMs = 30_000, env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, bulwarkArgs(args), { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`bulwark ${args.join(' ')} did not exit within ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    // 'close', not 'exit': it comes once the child's output is read to its end (at 'exit' a loaded
    // machine may not have delivered the last line yet — the serve test saw exit 2 with an empty stderr).
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * startServe starts a node with `args` (plus --listen on a free port unless `port` is given) and waits for
 * /readyz. `host` is the loopback address to listen on (each node its own, for partition tests), `uid` the
 * user to run as.
 */
export async function startServe(args: string[], options: { port?: number; ready?: boolean; host?: string; uid?: number } = {}): Promise<ServeProc> {
  const port = options.port ?? (await freePort());
  const host = options.host ?? '127.0.0.1';
  const fullArgs = ['serve', '--listen', `${host}:${port}`, ...args];
  const proc: ServeProc = {
    url: `http://${host}:${port}`,
    host,
    port,
    uid: options.uid,
    args: fullArgs,
    child: undefined as unknown as ChildProcess,
    lines: [],
    exited: Promise.resolve({ code: null, signal: null }),
    async kill(sig = 'SIGKILL') {
      const c = proc.child;
      if (c.exitCode === null && c.signalCode === null) c.kill(sig);
      return proc.exited;
    },
    async restart() {
      spawnInto(proc);
      await waitReady(proc);
    },
  };
  spawnInto(proc);
  if (options.ready !== false) {
    try {
      await waitReady(proc);
    } catch (err) {
      await proc.kill('SIGKILL'); // a node that never got ready must not outlive the test
      throw new Error(`${(err as Error).message}; its output:\n${proc.lines.join('\n')}`);
    }
  }
  return proc;
}

/**
 * startNodes starts `count` nodes with `args` at once and waits until every one is ready; if one fails,
 * it stops the others before rethrowing, so that no node outlives a failed `before()`.
 */
export async function startNodes(count: number, args: () => string[]): Promise<ServeProc[]> {
  const started = await Promise.allSettled(Array.from({ length: count }, () => startServe(args())));
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  const nodes = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  if (failed !== undefined) {
    await stopAll(nodes);
    throw failed.reason;
  }
  return nodes;
}

function spawnInto(proc: ServeProc): void {
  const child = spawn(process.execPath, bulwarkArgs(proc.args), { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], uid: proc.uid });
  proc.child = child;
  let buf = '';
  const onData = (d: Buffer) => {
    buf += d.toString();
    const parts = buf.split('\n');
    buf = parts.pop()!;
    proc.lines.push(...parts);
    if (proc.lines.length > 500) proc.lines.splice(0, proc.lines.length - 500);
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  proc.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
}

/**
 * waitReady waits for /readyz (a deadline, not an expectation: a node is ready in 1–3 s, but on a machine
 * under a load of 20–30 its start-up alone has taken over 30 s).
 */
async function waitReady(proc: ServeProc): Promise<void> {
  let exited = false;
  void proc.exited.then(() => (exited = true));
  await waitFor(
    `bulwark serve on ${proc.port} to be ready`,
    async () => {
      if (exited) throw new Error(`bulwark serve exited at start:\n${proc.lines.join('\n')}`);
      try {
        return (await fetch(`${proc.url}/readyz`)).status === 200;
      } catch {
        return false;
      }
    },
    90_000,
  );
}

/** status reads a node's /status. */
export async function status(url: string): Promise<{
  membership: { members: string[] };
  groups: Record<string, Record<string, number>>;
  origin: Record<string, unknown> & { breaker: { dropRatio: number } };
}> {
  return (await (await fetch(`${url}/status`)).json()) as never;
}

/** waitMembers waits until every node in `nodes` sees exactly `want` as its ring. */
export async function waitMembers(nodes: readonly { url: string }[], want: readonly string[], timeoutMs = 20_000): Promise<void> {
  const sorted = [...want].sort().join(',');
  const seen = new Map<string, string>();
  try {
    await waitFor(
      `rings of ${nodes.map((n) => n.url).join(' ')} to be ${sorted}`,
      async () => {
        let all = true;
        for (const n of nodes) {
          try {
            const got = (await status(n.url)).membership.members.join(',');
            seen.set(n.url, got);
            if (got !== sorted) all = false;
          } catch (err) {
            seen.set(n.url, `no answer: ${(err as Error).message}`);
            all = false;
          }
        }
        return all;
      },
      timeoutMs,
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; last seen: ${[...seen].map(([u, m]) => `${u} → ${m}`).join('; ')}`);
  }
}

/** Origin is the test origin: `GET /items/<key>` answers `v<version>:<key>`, keys starting with `missing` 404. */
export interface TestOrigin {
  readonly url: string;
  /** Loads per key. */
  readonly loads: Map<string, number>;
  /** 'up' answers, 'error' answers 503, 'hang' never answers. */
  mode: 'up' | 'error' | 'hang';
  /** Part of every value; bump it to tell fresh values from stale ones. */
  version: number;
  /** Milliseconds before each answer. */
  delayMs: number;
  /** Bytes of each value (padded with '.'); 0 for just `v<version>:<key>`. */
  valueBytes: number;
  total(): number;
  close(): Promise<void>;
}

/** startOrigin starts the test origin on a free loopback port. */
export async function startOrigin(): Promise<TestOrigin> {
  const server: Server = createServer((req, res) => {
    const key = decodeURIComponent((req.url ?? '').replace(/^\/items\//, ''));
    origin.loads.set(key, (origin.loads.get(key) ?? 0) + 1);
    if (origin.mode === 'hang') return;
    const answer = () => {
      if (origin.mode === 'error') return void res.writeHead(503).end('down');
      if (key.startsWith('missing')) return void res.writeHead(404).end();
      let v = `v${origin.version}:${key}`;
      if (origin.valueBytes > v.length) v = v.padEnd(origin.valueBytes, '.');
      res.writeHead(200, { 'content-length': Buffer.byteLength(v) }).end(v);
    };
    if (origin.delayMs > 0) setTimeout(answer, origin.delayMs);
    else answer();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const origin: TestOrigin = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    loads: new Map(),
    mode: 'up',
    version: 1,
    delayMs: 0,
    valueBytes: 0,
    total: () => [...origin.loads.values()].reduce((a, b) => a + b, 0),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  return origin;
}

/** get asks a node for `key` of group `default`. */
export async function get(url: string, key: string, group = 'default'): Promise<{ status: number; body: string; source: string | null; error: string | null }> {
  const res = await fetch(`${url}/v1/groups/${encodeURIComponent(group)}/keys/${encodeURIComponent(key)}`);
  return { status: res.status, body: await res.text(), source: res.headers.get('x-bulwark-source'), error: res.headers.get('x-bulwark-error') };
}

/** stopAll SIGKILLs every node still running. */
export async function stopAll(nodes: readonly (ServeProc | undefined)[]): Promise<void> {
  await Promise.all(nodes.map((n) => n?.kill('SIGKILL')));
}

/** Traffic runs `concurrency` loops of gets over `keys` against `targets()` until stopped. */
export interface Traffic {
  ok: number;
  failed: string[];
  /** more resolves once `count` more requests (answered or failed) were made than when it was called; it throws after `timeoutMs`. */
  more(count: number, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * traffic starts client loops; with `retry`, a failed request (no answer, or 5xx) is tried on the next node.
 * Each loop pauses `pauseMs` (default 50) after each request: a steady, bounded load (16 loops: at most 320
 * requests a second) rather than busy loops that kept every node and both cores busy for as long as the
 * traffic ran (measured: 2 CPU-s of the leader-kill test's 16, for the same assertions).
 */
export function traffic(targets: () => readonly ServeProc[], keys: readonly string[], concurrency: number, retry: boolean, pauseMs = 50): Traffic {
  let running = true;
  const made = () => t.ok + t.failed.length;
  const t: Traffic = {
    ok: 0,
    failed: [],
    more: async (count, timeoutMs = 60_000) => {
      const from = made();
      await waitFor(`${count} more requests`, () => made() >= from + count || !running, timeoutMs);
    },
    stop: async () => {
      running = false;
      await loops;
    },
  };
  const one = async (i: number) => {
    let n = i;
    while (running) {
      const nodes = targets();
      const key = keys[n % keys.length]!;
      let error = '';
      for (let attempt = 0; attempt < (retry ? nodes.length : 1); attempt++) {
        const node = nodes[(n + attempt) % nodes.length]!;
        try {
          const r = await get(node.url, key);
          if (r.status === 200 && r.body.endsWith(`:${key}`)) {
            error = '';
            break;
          }
          error = `${node.port} ${key}: ${r.status} ${r.body.slice(0, 80)}`;
        } catch (err) {
          error = `${node.port} ${key}: ${(err as Error).message} ${String((err as { cause?: { code?: string } }).cause?.code ?? '')}`;
        }
      }
      if (error === '') t.ok++;
      else t.failed.push(error);
      n += concurrency;
      if (running) await new Promise((r) => setTimeout(r, pauseMs));
    }
  };
  const loops = Promise.all(Array.from({ length: concurrency }, (_, i) => one(i)));
  return t;
}
