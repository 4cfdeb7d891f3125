/**
 * The demo's small HTTP services on loopback: each answers `GET /pay` (and anything else) after a
 * set latency, failing a set share of requests with 500, and answers `GET /health` with 200 at once.
 * The demo starts three — healthy, flaky (30 % failures) and slow (200 ms) — and the end-to-end test
 * starts the same three.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { systemClock, type Clock } from '../../core/index.js';

/** DemoServiceOptions describes how one demo service behaves. */
export interface DemoServiceOptions {
  /** The instance id, also echoed in each answer. */
  id: string;
  /** Share of requests answered with 500, in [0, 1]. Defaults to 0. */
  failureRate?: number;
  /** Base latency of an answer in milliseconds. Defaults to 2. */
  latencyMs?: number;
  /** Extra latency, uniform in [0, jitterMs). Defaults to 3. */
  jitterMs?: number;
  /** Uniform random numbers in [0, 1). Defaults to `Math.random`. */
  random?: () => number;
  /** The clock whose timers hold each answer for its latency. Defaults to `systemClock`. */
  clock?: Clock;
}

/** DemoService is one running demo service. */
export interface DemoService {
  readonly id: string;
  /** `127.0.0.1:<port>`, as registered in the registry. */
  readonly address: string;
  /** Requests answered on the business path (not /health). */
  readonly requests: number;
  /** Of those, answered with 500. */
  readonly failures: number;
  /** Whether it is listening (false once killed, until restored). */
  readonly alive: boolean;
  /** set changes how it answers from now on (the dashboard's "slow" and "failing" buttons). */
  set(behaviour: Pick<DemoServiceOptions, 'failureRate' | 'latencyMs' | 'jitterMs'>): void;
  /** kill stops listening and drops its connections, as a crashed process would: callers get refused connections. */
  kill(): Promise<void>;
  /** restore listens again on the same address. */
  restore(): Promise<void>;
  /** close stops the server and drops its keep-alive connections. */
  close(): Promise<void>;
}

/**
 * startDemoService starts one demo service on a free loopback port. Its options are the demo's own
 * (demoServiceSpecs, and the tests' clock and random), never a user's, so they are not checked here.
 */
export async function startDemoService(options: DemoServiceOptions): Promise<DemoService> {
  let failureRate = options.failureRate ?? 0;
  let latencyMs = options.latencyMs ?? 2;
  let jitterMs = options.jitterMs ?? 3;
  const random = options.random ?? Math.random;
  const clock = options.clock ?? systemClock;
  const id = options.id;
  const stats = { requests: 0, failures: 0 };
  const okBody = JSON.stringify({ instance: id, ok: true });
  const failBody = JSON.stringify({ instance: id, ok: false, error: 'injected failure' });

  const server: Server = createServer((req, res) => {
    if (req.url === '/health') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      return;
    }
    stats.requests++;
    const fail = failureRate > 0 && random() < failureRate;
    if (fail) stats.failures++;
    const wait = latencyMs + jitterMs * random();
    const timer = clock.setTimeout(() => {
      if (res.destroyed) return;
      res.writeHead(fail ? 500 : 200, { 'content-type': 'application/json' }).end(fail ? failBody : okBody);
    }, wait);
    res.on('close', () => clock.clearTimeout(timer));
    req.resume();
  });
  server.keepAliveTimeout = 10_000;
  const listen = (at: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(at, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  await listen(0);
  const { port } = server.address() as AddressInfo;
  let closed: Promise<void> | undefined;
  let alive = true;
  return {
    id,
    address: `127.0.0.1:${port}`,
    get alive() {
      return alive;
    },
    set(b) {
      if (b.failureRate !== undefined) failureRate = b.failureRate;
      if (b.latencyMs !== undefined) latencyMs = b.latencyMs;
      if (b.jitterMs !== undefined) jitterMs = b.jitterMs;
    },
    async kill() {
      if (!alive || closed !== undefined) return;
      alive = false;
      await stop();
    },
    async restore() {
      if (alive || closed !== undefined) return;
      await listen(port);
      alive = true;
    },
    get requests() {
      return stats.requests;
    },
    get failures() {
      return stats.failures;
    },
    close() {
      closed ??= alive ? stop() : Promise.resolve();
      return closed;
    },
  };
}

/** The three services of the demo: one healthy, one failing 30 % of requests, one 200 ms slow. */
export const demoServiceSpecs: readonly DemoServiceOptions[] = Object.freeze([
  { id: 'healthy', failureRate: 0, latencyMs: 2 },
  { id: 'flaky', failureRate: 0.3, latencyMs: 2 },
  { id: 'slow', failureRate: 0, latencyMs: 200 },
]);

/** startDemoServices starts the three demo services (with `random` and `clock` when given); on a failure it closes the ones already started. */
export async function startDemoServices(options: Pick<DemoServiceOptions, 'random' | 'clock'> = {}): Promise<DemoService[]> {
  const started: DemoService[] = [];
  try {
    for (const spec of demoServiceSpecs) started.push(await startDemoService({ ...spec, ...options }));
    return started;
  } catch (err) {
    await Promise.all(started.map((s) => s.close()));
    throw err;
  }
}
