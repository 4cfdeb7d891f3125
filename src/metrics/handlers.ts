/**
 * The `/metrics` (and `/status`) handlers for node:http, Express and Fastify. None of them imports its
 * framework: they are plain functions of the framework's shapes.
 *
 * A BulwarkMetrics scrape is sent as the parts it was rendered in (its families' buffers), written to
 * the response one by one and never joined: a scrape of 10 000 breakers is ~5.5 MB, and a copy of that
 * size made in fresh memory each scrape cost more than rendering it (page faults and the copy: ~9 of a
 * 15 ms scrape). The parts are held until the response has finished or closed, so that a later scrape
 * does not write into bytes a slow client has not been sent yet (see ExpositionParts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable, finished } from 'node:stream';
import type { Registry, RegistryContentType } from 'prom-client';
import { EXPOSITION_PARTS, type BulwarkMetrics, type ExpositionParts } from './metrics.js';

/** Exposition is what a handler serves: a BulwarkMetrics or a prom-client Registry. */
export type Exposition = Pick<BulwarkMetrics, 'metrics' | 'contentType'> | Registry<RegistryContentType>;

/** Scrape is one exposition to send: its bytes in parts, and its content type. */
interface Scrape extends ExpositionParts {
  readonly type: string;
}

const NOTHING_HELD = (): void => {};

function exposition(owner: string, source: Exposition): () => Promise<Scrape> {
  if (source === null || typeof source !== 'object' || typeof (source as { metrics?: unknown }).metrics !== 'function') {
    throw new TypeError(`${owner}: source must be a BulwarkMetrics or a prom-client Registry`);
  }
  // A BulwarkMetrics answers bytes in parts: no string is made of a large exposition only to be encoded
  // again, and no copy of the whole.
  const parts = (source as Partial<Pick<BulwarkMetrics, typeof EXPOSITION_PARTS>>)[EXPOSITION_PARTS];
  if (typeof parts === 'function') {
    return async () => {
      const p = await parts.call(source);
      return { type: source.contentType, parts: p.parts, length: p.length, release: p.release };
    };
  }
  return async () => {
    const b = Buffer.from(await source.metrics(), 'utf8');
    return { type: source.contentType, parts: [b], length: b.length, release: NOTHING_HELD };
  };
}

/**
 * send answers a scrape on `res`: its parts written one by one (the socket corked, so they leave in
 * one gathered write), with their total as content-length; the parts are released once the response
 * has finished or closed (`finished` also calls back at once for a response already closed).
 */
function send(res: ServerResponse, s: Scrape, head: boolean): void {
  finished(res, s.release);
  res.statusCode = 200;
  res.setHeader('content-type', s.type);
  res.setHeader('cache-control', 'no-store');
  res.setHeader('content-length', s.length);
  if (head) {
    res.end();
    return;
  }
  res.cork();
  for (const p of s.parts) res.write(p);
  res.end();
}

function answer(res: ServerResponse, status: number, type: string, body: string | Buffer, head: boolean): void {
  res.statusCode = status;
  res.setHeader('content-type', type);
  res.setHeader('cache-control', 'no-store');
  res.end(head ? undefined : body);
}

/**
 * metricsHandler answers a node:http handler serving the text exposition (GET and HEAD; other methods
 * get 405). Mount it on the path you want; it does not look at the URL. A failed collection answers 500.
 */
export function metricsHandler(source: Exposition): (req: IncomingMessage, res: ServerResponse) => void {
  const get = exposition('metricsHandler', source);
  return (req, res) => {
    const m = req.method ?? 'GET';
    if (m !== 'GET' && m !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      answer(res, 405, 'text/plain; charset=utf-8', 'method not allowed\n', false);
      return;
    }
    get().then(
      (x) => send(res, x, m === 'HEAD'),
      (err: unknown) =>
        answer(res, 500, 'text/plain; charset=utf-8', `metrics collection failed: ${err instanceof Error ? err.message : String(err)}\n`, false),
    );
  };
}

/** statusHandler answers a node:http handler serving `metrics.snapshot()` as JSON (e.g. on `/status`). */
export function statusHandler(metrics: Pick<BulwarkMetrics, 'snapshot'>): (req: IncomingMessage, res: ServerResponse) => void {
  if (metrics === null || typeof metrics !== 'object' || typeof metrics.snapshot !== 'function') {
    throw new TypeError('statusHandler: metrics must be a BulwarkMetrics');
  }
  return (req, res) => {
    let body: string;
    try {
      body = `${JSON.stringify(metrics.snapshot())}\n`;
    } catch (err) {
      answer(res, 500, 'text/plain; charset=utf-8', `snapshot failed: ${err instanceof Error ? err.message : String(err)}\n`, false);
      return;
    }
    answer(res, 200, 'application/json; charset=utf-8', body, req.method === 'HEAD');
  };
}

/** ExpressHandler is a plain Express route handler. */
export type ExpressHandler = (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void;

/** expressMetrics answers an Express handler for `app.get('/metrics', expressMetrics(metrics))`; collection errors go to `next`. */
export function expressMetrics(source: Exposition): ExpressHandler {
  const get = exposition('expressMetrics', source);
  return (req, res, next) => {
    get().then((x) => send(res, x, req.method === 'HEAD'), next);
  };
}

/** FastifyMetricsHost is the part of a Fastify instance the plugin uses. */
export interface FastifyMetricsHost {
  get(path: string, handler: (request: unknown, reply: FastifyMetricsReply) => Promise<unknown>): unknown;
}

/** FastifyMetricsReply is the part of a Fastify reply the plugin uses. */
export interface FastifyMetricsReply {
  header(name: string, value: string): FastifyMetricsReply;
  type(contentType: string): FastifyMetricsReply;
  send(body: string | Buffer | Readable): FastifyMetricsReply;
  /** The response underneath (node:http's, or HTTP/2's): the scrape's parts are held until it has finished or closed. */
  readonly raw: NodeJS.WritableStream;
}

/** FastifyMetricsOptions configures fastifyMetrics. */
export interface FastifyMetricsOptions {
  /** The route's path. Defaults to '/metrics'. */
  path?: string;
}

/**
 * fastifyMetrics answers a Fastify plugin adding `GET <path>` (HEAD included, as Fastify does) that
 * serves the exposition: `fastify.register(fastifyMetrics(metrics))`.
 */
export function fastifyMetrics(
  source: Exposition,
  options?: FastifyMetricsOptions,
): (fastify: FastifyMetricsHost, opts: unknown, done: (err?: Error) => void) => void {
  const get = exposition('fastifyMetrics', source);
  const path = options?.path ?? '/metrics';
  if (typeof path !== 'string' || !path.startsWith('/')) throw new TypeError(`fastifyMetrics: path must start with "/", got ${JSON.stringify(path)}`);
  const plugin = (fastify: FastifyMetricsHost, _opts: unknown, done: (err?: Error) => void): void => {
    fastify.get(path, async (_req, reply) => {
      const x = await get();
      finished(reply.raw, x.release);
      // A stream of the parts: Fastify pipes it to the response part by part (a Buffer[] would be sent
      // as JSON). HEAD drains it and sends the headers only.
      return reply
        .header('cache-control', 'no-store')
        .header('content-length', String(x.length))
        .type(x.type)
        .send(Readable.from(x.parts, { objectMode: false }));
    });
    done();
  };
  // What fastify-plugin sets: the route is added to the scope the plugin is registered in.
  Object.assign(plugin, { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: 'bulwark-metrics' });
  return plugin;
}
