/**
 * The same small app on node:http, Express 4 and 5, and Fastify 4 and 5 (npm aliases `express4` and
 * `fastify4` in devDependencies), guarded by bulwark/http, on a free
 * loopback port: `/` answers 200 "ok", `/fail` 500, `/throw` throws Error('boom'), `/bad` is a 400
 * (thrown as an error with a 400 status where the framework maps those), `/slow` answers only when the
 * test calls `release()`. Plus a tiny HTTP client that can abort mid-request.
 */
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import express4 from 'express4';
import express5 from 'express';
import Fastify4 from 'fastify4';
import Fastify5 from 'fastify';
import { HttpGuard, expressErrors, expressGuard, fastifyGuard, wrapHandler, type FastifyGuardOptions, type HttpGuardOptions } from '../src/http/index.js';

/** Server is one running guarded app. */
export interface Server {
  /** url ends with '/'. */
  url: string;
  /** handled counts handler runs (every route). */
  handled(): number;
  /** release lets the pending `/slow` requests answer. */
  release(): void;
  close(): Promise<void>;
}

/** Framework starts the app on one framework. */
export interface Framework {
  name: string;
  start(guard: HttpGuard | HttpGuardOptions): Promise<Server>;
}

class Slow {
  private waiting: Array<() => void> = [];
  wait(): Promise<void> {
    return new Promise((r) => this.waiting.push(r));
  }
  release(): void {
    for (const r of this.waiting.splice(0)) r();
  }
}

function urlOf(addr: AddressInfo | string | null): string {
  if (addr === null || typeof addr === 'string') throw new Error(`unexpected address ${String(addr)}`);
  return `http://127.0.0.1:${addr.port}/`;
}

async function listenNode(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return urlOf(server.address());
}

async function closeNode(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

const nodeHttp: Framework = {
  name: 'node:http',
  async start(guard) {
    let n = 0;
    const slow = new Slow();
    const server = http.createServer(
      wrapHandler(guard, async (req: IncomingMessage, res: ServerResponse) => {
        n++;
        const path = (req.url ?? '/').split('?')[0];
        if (path === '/fail') {
          res.statusCode = 500;
          res.end();
        } else if (path === '/throw') {
          throw new Error('boom');
        } else if (path === '/bad') {
          res.statusCode = 400;
          res.end();
        } else if (path === '/slow') {
          await slow.wait();
          res.end('late');
        } else res.end('ok');
      }),
    );
    const url = await listenNode(server);
    return { url, handled: () => n, release: () => slow.release(), close: () => closeNode(server) };
  },
};

type Next = (err?: unknown) => void;
type Route = (req: IncomingMessage, res: ServerResponse, next: Next) => unknown;
type ErrorRoute = (err: { status?: number }, req: IncomingMessage, res: ServerResponse, next: Next) => unknown;

/** ExpressApp is the part of an Express application (4 or 5) the test app uses. */
interface ExpressApp {
  (req: IncomingMessage, res: ServerResponse): void;
  use(handler: Route): unknown;
  use(handler: ErrorRoute): unknown;
  get(path: string, handler: Route): unknown;
}

/** expressApp is the test app on one Express major (`express` is that major's default export). */
function expressApp(name: string, express: () => ExpressApp): Framework {
  return {
    name,
    async start(guard) {
      let n = 0;
      const slow = new Slow();
      const app = express();
      app.use(expressGuard(guard));
      app.use((_req, _res, next) => {
        n++;
        next();
      });
      app.get('/', (_req, res) => void res.end('ok'));
      app.get('/fail', (_req, res) => {
        res.statusCode = 500;
        res.end();
      });
      app.get('/throw', () => {
        throw new Error('boom');
      });
      app.get('/bad', () => {
        throw Object.assign(new Error('bad input'), { status: 400 });
      });
      // Express 4 does not catch a rejected promise: the route answers from a callback it never rejects.
      app.get('/slow', (_req, res) => void slow.wait().then(() => res.end('late')));
      app.use(expressErrors());
      app.use((err: { status?: number }, _req: IncomingMessage, res: ServerResponse, _next: Next) => {
        res.statusCode = err.status ?? 500;
        res.end();
      });
      const server = http.createServer(app);
      const url = await listenNode(server);
      return { url, handled: () => n, release: () => slow.release(), close: () => closeNode(server) };
    },
  };
}

/** FastifyApp is the part of a Fastify instance (4 or 5) the tests use. */
export interface FastifyApp {
  register(plugin: typeof fastifyGuard, options: FastifyGuardOptions): PromiseLike<unknown>;
  register(plugin: (scope: FastifyApp) => Promise<void>): PromiseLike<unknown>;
  ready(): PromiseLike<unknown>;
  addHook(name: 'preHandler', hook: (req: unknown, reply: unknown, done: () => void) => void): unknown;
  get(path: string, handler: (req: unknown, reply: FastifyReply) => Promise<unknown>): unknown;
  listen(options: { port: number; host: string }): Promise<string>;
  readonly server: http.Server;
  close(): PromiseLike<unknown>;
}
interface FastifyReply {
  code(status: number): { send(): unknown };
}

/** fastifyApp is the test app on one Fastify major (`fastify` is that major's factory). */
function fastifyApp(name: string, fastify: () => FastifyApp): Framework {
  return {
    name,
    async start(guard) {
      let n = 0;
      const slow = new Slow();
      const app = fastify();
      await app.register(fastifyGuard, guard instanceof HttpGuard ? { guard } : guard);
      app.addHook('preHandler', (_req, _reply, done) => {
        n++;
        done();
      });
      app.get('/', async () => 'ok');
      app.get('/fail', async (_req, reply) => reply.code(500).send());
      app.get('/throw', async () => {
        throw new Error('boom');
      });
      app.get('/bad', async () => {
        throw Object.assign(new Error('bad input'), { statusCode: 400 });
      });
      app.get('/slow', async () => {
        await slow.wait();
        return 'late';
      });
      await app.listen({ port: 0, host: '127.0.0.1' });
      const url = urlOf(app.server.address());
      return {
        url,
        handled: () => n,
        release: () => slow.release(),
        close: async () => {
          app.server.closeAllConnections();
          await app.close();
        },
      };
    },
  };
}

/** fastifyMajors: each Fastify major's factory, for the tests of the plugin's scoping. */
export const fastifyMajors: Array<{ name: string; fastify: () => FastifyApp }> = [
  { name: 'Fastify 4', fastify: () => Fastify4() },
  { name: 'Fastify 5', fastify: () => Fastify5() },
];

/** frameworks: node:http and both majors of Express and Fastify (the peer ranges say ≥ 4). */
export const frameworks: Framework[] = [
  nodeHttp,
  expressApp('Express 4', express4),
  expressApp('Express 5', express5),
  ...fastifyMajors.map(({ name, fastify }) => fastifyApp(name, fastify)),
];

/** Reply is what `request` answers. */
export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** request GETs `url` on a fresh connection; when `signal` aborts it destroys the connection (and rejects). */
export function request(url: string, headers: Record<string, string> = {}, opts: { signal?: AbortSignal } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error(`no answer from ${url} in 10 s`)));
    opts.signal?.addEventListener('abort', () => req.destroy(new Error('aborted by the test')), { once: true });
  });
}

/** until polls `cond` every 5 ms and rejects after `timeoutMs` (generous: the machine is shared). */
export async function until(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
