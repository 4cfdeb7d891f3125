/**
 * The same small app on node:http, Express 5 and Fastify 5, guarded by bulwark/http, on a free
 * loopback port: `/` answers 200 "ok", `/fail` 500, `/throw` throws Error('boom'), `/bad` is a 400
 * (thrown as an error with a 400 status where the framework maps those), `/slow` answers only when the
 * test calls `release()`. Plus a tiny HTTP client that can abort mid-request.
 */
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import { expressErrors, expressGuard, fastifyGuard, wrapHandler, type HttpGuard, type HttpGuardOptions } from '../src/http/index.js';

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

const expressApp: Framework = {
  name: 'Express 5',
  async start(guard) {
    let n = 0;
    const slow = new Slow();
    const app = express();
    app.use(expressGuard(guard));
    app.use((_req, _res, next) => {
      n++;
      next();
    });
    app.get('/', (_req, res) => void res.send('ok'));
    app.get('/fail', (_req, res) => void res.status(500).end());
    app.get('/throw', () => {
      throw new Error('boom');
    });
    app.get('/bad', () => {
      throw Object.assign(new Error('bad input'), { status: 400 });
    });
    app.get('/slow', async (_req, res) => {
      await slow.wait();
      res.send('late');
    });
    app.use(expressErrors());
    app.use((err: { status?: number }, _req: express.Request, res: express.Response, _next: express.NextFunction) =>
      void res.status(err.status ?? 500).end(),
    );
    const server = http.createServer(app);
    const url = await listenNode(server);
    return { url, handled: () => n, release: () => slow.release(), close: () => closeNode(server) };
  },
};

const fastifyApp: Framework = {
  name: 'Fastify 5',
  async start(guard) {
    let n = 0;
    const slow = new Slow();
    const app = Fastify();
    await app.register(fastifyGuard, guard instanceof Object && 'check' in guard ? { guard: guard as HttpGuard } : guard);
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

/** frameworks: the three adapters under test. */
export const frameworks: Framework[] = [nodeHttp, expressApp, fastifyApp];

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
