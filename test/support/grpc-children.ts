/**
 * Spawns grpc-server-child.ts processes and waits for their `ready <address>` line.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { tsNodeArgs } from './ts-node.js';

const script = fileURLToPath(new URL('./grpc-server-child.ts', import.meta.url));

/** GreeterChild is a running child greeter server. */
export interface GreeterChild {
  readonly id: string;
  readonly address: string;
  readonly child: ChildProcess;
  /** Everything it printed so far. */
  output(): string;
  /** exited resolves when the process has ended. */
  readonly exited: Promise<void>;
}

/** spawnGreeter starts a child greeter registered in etcd as `id`; rejects if it is not ready within `timeoutMs`. */
export function spawnGreeter(endpoint: string, prefix: string, id: string, extra: string[] = [], timeoutMs = 20_000): Promise<GreeterChild> {
  const child = spawn(process.execPath, tsNodeArgs(script, endpoint, prefix, id, ...extra), { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`greeter ${id} not ready within ${timeoutMs} ms: ${out}`));
    }, timeoutMs);
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /ready (\S+)/.exec(out);
      if (m !== null) {
        clearTimeout(timer);
        resolve({ id, address: m[1]!, child, output: () => out, exited });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`greeter ${id} exited with ${code}: ${out}`));
    });
  });
}
