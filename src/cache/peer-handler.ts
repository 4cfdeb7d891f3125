/**
 * The server side of the peer protocol (proto/cache.proto): parse and check a peer's request, serve it
 * from the named group locally — never forwarded — and answer protobuf.
 *
 * Statuses: 200 (a value, a not-found answer, or a remove), 400 (bad path, percent-encoding, key, a
 * query or a request body), 401 (unsigned or badly signed, when a secret is set), 404 (outside the base
 * path, or unknown group), 405 (not GET/DELETE), 500 (a bug), 502 (the getter failed here), 503 (the
 * pool is closed), 504 (the getter timed out here).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AbortedError, TimeoutError } from '../core/errors.js';
import { encodeGetResponse, encodeRemoveResponse } from './codec.js';
import { keyProblem } from './key.js';
import type { GroupServer } from './peers.js';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, verify } from './signing.js';

/** HandlerConfig is what the handler needs from its pool. */
export interface HandlerConfig {
  readonly basePath: string;
  readonly secret: string | Uint8Array | undefined;
  readonly groups: ReadonlyMap<string, GroupServer>;
  readonly wallClock: () => number;
  readonly closed: () => boolean;
}

/** PEER_STATUSES lists every status the handler answers. */
export const PEER_STATUSES = Object.freeze([200, 400, 401, 404, 405, 500, 502, 503, 504]);

const PROTOBUF = 'application/x-protobuf';

/** servePeer answers one peer request; it never throws and settles once the response is written. */
export async function servePeer(config: HandlerConfig, req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    await route(config, req, res);
  } catch (err) {
    reply(res, 500, `internal error: ${err instanceof Error ? err.message : String(err)}`);
  }
}

async function route(config: HandlerConfig, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = typeof req.url === 'string' ? req.url : '';
  const method = typeof req.method === 'string' ? req.method : '';
  if (!url.startsWith(config.basePath)) return reply(res, 404, 'not a cache peer path');
  if (config.closed()) return reply(res, 503, 'pool closed');
  if (config.secret !== undefined) {
    const headers = req.headers ?? {};
    const why = verify(config.secret, method, url, headers[TIMESTAMP_HEADER], headers[SIGNATURE_HEADER], config.wallClock());
    if (why !== undefined) return reply(res, 401, why);
  }
  if (method !== 'GET' && method !== 'DELETE') {
    res.setHeader('allow', 'GET, DELETE');
    return reply(res, 405, 'method not allowed');
  }
  if (hasBody(req)) return reply(res, 400, 'peer requests carry no body', true);
  const rest = url.slice(config.basePath.length);
  if (rest.includes('?') || rest.includes('#')) return reply(res, 400, 'peer paths take no query');
  const slash = rest.indexOf('/');
  if (slash <= 0) return reply(res, 400, `want ${config.basePath}<group>/<key>`);
  let group: string;
  let key: string;
  try {
    group = decodeURIComponent(rest.slice(0, slash));
    key = decodeURIComponent(rest.slice(slash + 1));
  } catch {
    return reply(res, 400, 'bad percent-encoding');
  }
  const problem = keyProblem(key);
  if (problem !== undefined) return reply(res, 400, problem);
  const target = config.groups.get(group);
  if (target === undefined) return reply(res, 404, 'no such group');
  if (method === 'DELETE') return replyBody(res, encodeRemoveResponse(target.serveRemove(key)));

  // No signal: a load started for a peer goes on if the peer leaves (its result is cached for the next
  // asker), bounded by the group's getter timeout; and a cache hit allocates no AbortController.
  try {
    replyBody(res, encodeGetResponse(await target.serveGet(key)));
  } catch (err) {
    if (err instanceof TimeoutError) reply(res, 504, err.message);
    else if (err instanceof AbortedError) reply(res, 503, err.message);
    else if (err instanceof TypeError) reply(res, 400, err.message);
    else reply(res, 502, err instanceof Error ? err.message : String(err));
  }
}

function hasBody(req: IncomingMessage): boolean {
  const h = req.headers ?? {};
  const len = h['content-length'];
  return h['transfer-encoding'] !== undefined || (len !== undefined && len !== '0');
}

function replyBody(res: ServerResponse, body: Uint8Array): void {
  if (res.headersSent || res.writableEnded) return;
  res.writeHead(200, ['content-type', PROTOBUF, 'content-length', String(body.byteLength)]);
  res.end(body);
}

function reply(res: ServerResponse, status: number, message: string, close = false): void {
  if (res.headersSent || res.writableEnded) return;
  const body = Buffer.from(message.slice(0, 512), 'utf8');
  res.statusCode = status;
  res.setHeader('content-type', 'text/plain; charset=utf-8');
  res.setHeader('content-length', body.byteLength);
  if (close) res.setHeader('connection', 'close');
  res.end(body);
}
