/**
 * Starts a real redis-server (Debian `redis-server`) on a free loopback port, without persistence,
 * in a temp folder. `kill()` / `restart()` for chaos tests; `pause()` / `resume()` (SIGSTOP / SIGCONT)
 * for a Redis that accepts connections but never answers.
 */
import { canConnect, findBinary, freePort, ServerProcess, tempDir, waitFor } from './servers.js';

/** redisBinary is the redis-server path, or undefined when Redis is not installed (see servers.ts). */
export const redisBinary = findBinary('redis-server');

/** RedisServer is a running redis-server a test owns. */
export interface RedisServer {
  readonly host: string;
  readonly port: number;
  /** e.g. `redis://127.0.0.1:6390` */
  readonly url: string;
  readonly process: ServerProcess;
  kill(): Promise<void>;
  restart(): Promise<void>;
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}

/** startRedis starts redis-server and waits until it accepts connections. */
export async function startRedis(): Promise<RedisServer> {
  if (redisBinary === undefined) throw new Error('redis-server is not installed');
  const dir = tempDir('redis');
  const port = await freePort();
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir.path, '--loglevel', 'warning'];
  const proc = new ServerProcess('redis-server', redisBinary, args, dir.path);
  const ready = () => canConnect(port);
  await proc.start(ready);
  return {
    host: '127.0.0.1',
    port,
    url: `redis://127.0.0.1:${port}`,
    process: proc,
    kill: () => proc.kill('SIGKILL'),
    restart: () => proc.start(ready),
    pause: () => proc.signal('SIGSTOP'),
    resume: () => proc.signal('SIGCONT'),
    stop: async () => {
      await proc.kill('SIGKILL');
      dir.remove();
    },
  };
}

/** onRedis waits until a Redis limiter decides on Redis (a limiter made from a URL connects first). */
export async function onRedis(limiter: { readonly mode: string }, timeoutMs = 10_000): Promise<void> {
  await waitFor('the limiter to reach Redis', () => limiter.mode === 'redis', timeoutMs);
}
