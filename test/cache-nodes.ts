/**
 * Test helper (not a test): start cache nodes on loopback, each a node:http server running an HttpPool's
 * handler, with one Group per node.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Group, HttpPool, type GroupOptions, type HttpPoolOptions } from '../src/cache/index.js';

/** CacheNode is one node of a test cluster. */
export interface CacheNode {
  url: string;
  server: Server;
  pool: HttpPool;
  group: Group;
  /** stop closes the server (dropping keep-alive connections) and the pool. */
  stop(): Promise<void>;
}

/** listen starts a node:http server on 127.0.0.1 and answers its URL. */
export async function listen(server: Server, port = 0): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** startNode starts one node; `group` gets `peers` filled in. */
export async function startNode(pool: Omit<HttpPoolOptions, 'self'>, group: Omit<GroupOptions, 'peers'>): Promise<CacheNode> {
  let handle: (req: Parameters<HttpPool['handler']>[0], res: Parameters<HttpPool['handler']>[1]) => unknown = (_q, s) => s.writeHead(503).end();
  const server = createServer((req, res) => void handle(req, res));
  const url = await listen(server);
  const p = new HttpPool({ ...pool, self: url });
  handle = p.handler;
  const g = new Group({ ...group, peers: p });
  let stopped: Promise<void> | undefined;
  return {
    url,
    server,
    pool: p,
    group: g,
    stop: () =>
      (stopped ??= (async () => {
        server.closeAllConnections();
        await new Promise<void>((r) => server.close(() => r()));
        await p.close();
      })()),
  };
}

/** startCluster starts `n` nodes and tells each about all of them. */
export async function startCluster(n: number, pool: Omit<HttpPoolOptions, 'self'>, group: (i: number) => Omit<GroupOptions, 'peers'>): Promise<CacheNode[]> {
  const nodes: CacheNode[] = [];
  for (let i = 0; i < n; i++) nodes.push(await startNode(pool, group(i)));
  for (const node of nodes) node.pool.setPeers(...nodes.map((x) => x.url));
  return nodes;
}
