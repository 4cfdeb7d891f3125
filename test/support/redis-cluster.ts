/**
 * Starts a real Redis Cluster on loopback: `masters` redis-server processes with `--cluster-enabled yes`
 * (and as many replicas with `replicas: 1`), each in its own temp folder, joined with
 * `redis-cli --cluster create … --cluster-yes`, and waits until every node reports `cluster_state:ok`.
 * Nodes are stopped by PID; `kill(i)` SIGKILLs one (for failover tests).
 */
import { spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import { canConnect, findBinary, freePort, ServerProcess, tempDir, waitFor } from './servers.js';
import { redisBinary } from './redis.js';

/** redisCliBinary is the redis-cli path, or undefined when it is not installed. */
export const redisCliBinary = findBinary('redis-cli');

/** ClusterNode is one redis-server of the cluster. */
export interface ClusterNode {
  /** The loopback address it listens on and sends from (127.0.0.1 unless `address` was given). */
  readonly host: string;
  readonly port: number;
  readonly process: ServerProcess;
}

/** RedisCluster is a running cluster a test owns. */
export interface RedisCluster {
  readonly nodes: readonly ClusterNode[];
  /** Seed addresses for an ioredis Cluster client. */
  readonly seeds: { host: string; port: number }[];
  /** masterPorts answers the ports of the nodes that are masters now (as a live node sees it). */
  masterPorts(): Promise<number[]>;
  /** kill SIGKILLs the node on `port`. */
  kill(port: number): Promise<void>;
  stop(): Promise<void>;
}

function run(binary: string, args: string[], timeoutMs = 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b));
    child.stderr.on('data', (b: Buffer) => (out += b));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`${binary} ${args.join(' ')} exited ${code}:\n${out}`));
    });
  });
}

async function command(port: number, host: string, ...args: string[]): Promise<string> {
  const c = new Redis({ host, port, maxRetriesPerRequest: 0, lazyConnect: true, retryStrategy: () => null });
  c.on('error', () => {});
  try {
    await c.connect();
    return String(await c.call(args[0]!, ...args.slice(1)));
  } catch {
    return '';
  } finally {
    c.disconnect();
  }
}

const clusterInfo = (n: { port: number; host: string }) => command(n.port, n.host, 'CLUSTER', 'INFO');

/**
 * startRedisCluster starts and joins the cluster; `nodeTimeoutMs` is how soon a dead master is failed over.
 * `address(i)` gives node i a loopback address of its own, which it listens on and sends its cluster bus
 * and replication traffic from (`bind-source-addr`), so that a packet filter can cut one node off from the
 * others while clients (from 127.0.0.1) still reach it. (Protected mode is off for those: Redis counts
 * only 127.0.0.1 as loopback and would refuse its replicas; each node still listens on loopback only.)
 */
export async function startRedisCluster(
  options: { masters?: number; replicas?: 0 | 1; nodeTimeoutMs?: number; address?: (i: number) => string } = {},
): Promise<RedisCluster> {
  if (redisBinary === undefined || redisCliBinary === undefined) throw new Error('redis-server and redis-cli are required');
  const masters = options.masters ?? 3;
  const replicas = options.replicas ?? 0;
  const count = masters * (1 + replicas);
  const dirs: { path: string; remove: () => void }[] = [];
  const nodes: ClusterNode[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const dir = tempDir('redis-cluster');
      dirs.push(dir);
      const port = await freePort();
      const host = options.address?.(i) ?? '127.0.0.1';
      const args = [
        '--port',
        String(port),
        '--bind',
        host,
        ...(host === '127.0.0.1' ? [] : ['--bind-source-addr', host, '--protected-mode', 'no']),
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir.path,
        '--loglevel',
        'warning',
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        `nodes-${port}.conf`,
        '--cluster-node-timeout',
        String(options.nodeTimeoutMs ?? 1_000),
      ];
      const proc = new ServerProcess(`redis-server (cluster) ${port}`, redisBinary, args, dir.path);
      await proc.start(async () => (host === '127.0.0.1' ? canConnect(port) : (await command(port, host, 'PING')) === 'PONG'));
      nodes.push({ host, port, process: proc });
    }
    await run(redisCliBinary, ['--cluster', 'create', ...nodes.map((n) => `${n.host}:${n.port}`), '--cluster-replicas', String(replicas), '--cluster-yes']);
    for (const n of nodes) await waitFor(`node ${n.port} to see the cluster ok`, async () => (await clusterInfo(n)).includes('cluster_state:ok'), 30_000);
    // A replica can take over only once it has synced with its master.
    for (const n of nodes) {
      await waitFor(
        `node ${n.port} to be a master or a synced replica`,
        async () => {
          const info = await command(n.port, n.host, 'INFO', 'replication');
          return info.includes('role:master') || info.includes('master_link_status:up');
        },
        30_000,
      );
    }
  } catch (err) {
    for (const n of nodes) await n.process.kill();
    for (const d of dirs) d.remove();
    throw err;
  }
  const alive = () => nodes.filter((n) => n.process.child?.exitCode === null && n.process.child.signalCode === null);
  return {
    nodes,
    seeds: nodes.map((n) => ({ host: n.host, port: n.port })),
    masterPorts: async () => {
      for (const n of alive()) {
        const c = new Redis({ host: n.host, port: n.port, maxRetriesPerRequest: 0, retryStrategy: () => null });
        c.on('error', () => {});
        try {
          const text = (await c.call('CLUSTER', 'NODES')) as string;
          return text
            .split('\n')
            .filter((l) => /\bmaster\b/.test(l) && !/\bfail\b/.test(l) && /\s\d+-\d+/.test(l))
            .map((l) => Number(/:(\d+)@/.exec(l)![1]));
        } catch {
          // ask the next node
        } finally {
          c.disconnect();
        }
      }
      return [];
    },
    kill: async (port) => {
      await nodes.find((n) => n.port === port)?.process.kill();
    },
    stop: async () => {
      for (const n of nodes) await n.process.kill();
      for (const d of dirs) d.remove();
    },
  };
}
