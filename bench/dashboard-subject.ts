/**
 * The processes of bench/dashboard.bench.ts, one role each (argv[2]); each prints one JSON line once ready
 * and answers `GET /cpu` with its process.cpuUsage() and memory (`/cpu?gc=1`: after a full GC, when started with --expose-gc):
 *   instances <n> <components>   n simulated instances in one process, each a dashboardHandler over its own
 *                                BulwarkMetrics of <components> components with moving counters, on ports of
 *                                its own; prints { ports }
 *   aggregator <port,port,…>     a FleetFeed over a MemoryRegistry holding those instances, served by a
 *                                dashboardHandler; prints { port }
 *   served <viewers-unused>      an HTTP service whose every request passes an HttpGuard (limiter, breaker),
 *                                tracked with ~20 components by a BulwarkMetrics whose dashboard it serves at
 *                                /dashboard; prints { port }
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import promClient from 'prom-client';
import { CircuitBreaker, SreBreaker } from '../src/breaker/index.js';
import { dashboardHandler, FleetFeed, STATUS_PATH_KEY } from '../src/dashboard/index.js';
import { HttpGuard, wrapHandler } from '../src/http/index.js';
import { KeyedLimiter, TokenLimiter } from '../src/limit/index.js';
import { BulwarkMetrics } from '../src/metrics/index.js';
import { Bulkhead } from '../src/policy/index.js';
import { MemoryRegistry } from '../src/registry/index.js';

const [role, arg1, arg2] = process.argv.slice(2);

function cpuRoute(req: IncomingMessage, res: ServerResponse): boolean {
  if (req.url !== '/cpu' && req.url !== '/cpu?gc=1') return false;
  const gc = (globalThis as { gc?: () => void }).gc;
  if (req.url === '/cpu?gc=1' && gc !== undefined) gc();
  const m = process.memoryUsage();
  res.end(JSON.stringify({ cpu: process.cpuUsage(), rss: m.rss, heapUsed: m.heapUsed, external: m.external }));
  return true;
}

async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<number> {
  const server = createServer(handler);
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

/** components makes `n` components of the usual kinds, with some calls counted. */
function components(n: number): object[] {
  const out: object[] = [];
  for (let i = 0; out.length < n; i++) {
    const b = new CircuitBreaker({ name: `breaker-${i}` });
    const l = new TokenLimiter({ rate: 1_000 });
    const k = new KeyedLimiter({ rate: 100 });
    const s = new SreBreaker({ name: `sre-${i}` });
    const h = new Bulkhead();
    for (let j = 0; j < 50; j++) {
      b.admit().success();
      l.allow();
      k.allow(`k${j}`);
    }
    out.push(b, l, k, s, h);
  }
  return out.slice(0, n);
}

if (role === 'instances') {
  const n = Number(arg1);
  const perInstance = Number(arg2);
  const ports: number[] = [];
  const limiters: TokenLimiter[] = [];
  for (let i = 0; i < n; i++) {
    const metrics = new BulwarkMetrics({ registry: new promClient.Registry() });
    const parts = components(perInstance);
    for (const c of parts) metrics.track(c);
    limiters.push(...parts.filter((c): c is TokenLimiter => c instanceof TokenLimiter));
    const h = dashboardHandler(metrics, { path: '/dashboard' });
    ports.push(await listen((req, res) => void (cpuRoute(req, res) || h(req, res))));
  }
  // the counters move: a few decisions per limiter per second
  setInterval(() => {
    for (const l of limiters) for (let j = 0; j < 5; j++) l.allow();
  }, 100);
  console.log(JSON.stringify({ ports }));
} else if (role === 'aggregator') {
  const registry = new MemoryRegistry();
  const ports = arg1!.split(',').map(Number);
  for (const [i, port] of ports.entries()) {
    await registry.register({ id: `i-${i}`, name: `svc-${i % 10}`, address: `127.0.0.1:${port}`, metadata: { [STATUS_PATH_KEY]: '/dashboard/events' } });
  }
  const feed = new FleetFeed(registry, { tickMs: 1_000, refreshMs: 2_000 });
  const h = dashboardHandler(feed, { path: '/' });
  const port = await listen((req, res) => void (cpuRoute(req, res) || (req.url === '/size' ? res.end(String(feed.size)) : h(req, res))));
  console.log(JSON.stringify({ port }));
} else if (role === 'served') {
  const metrics = new BulwarkMetrics({ registry: new promClient.Registry() });
  const guard = new HttpGuard({ limiter: new KeyedLimiter({ rate: 1e9 }), breaker: new CircuitBreaker({ name: 'api' }) });
  metrics.track(guard);
  for (const c of components(19)) metrics.track(c);
  const dashboard = dashboardHandler(metrics, { path: '/dashboard' });
  const api = wrapHandler(guard, (_req, res) => void res.end('ok'));
  const port = await listen((req, res) => {
    if (cpuRoute(req, res)) return;
    if (req.url!.startsWith('/dashboard')) return dashboard(req, res);
    api(req, res);
  });
  console.log(JSON.stringify({ port }));
}
