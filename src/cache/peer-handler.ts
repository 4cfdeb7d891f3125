/**
 * The server side of the peer protocol (proto/cache.proto): read and check a peer's request, serve it
 * from the named group locally — never forwarded — and answer protobuf.
 *
 * Two forms. Peers send `POST {basePath}` (GetRequest body) and `DELETE {basePath}` (RemoveRequest
 * body). For reading a node by hand, `GET {basePath}{group}/{key}` (percent-encoded, no body) answers
 * the same GetResponse. With a secret, both must be signed; the signature covers the body.
 *
 * In groupcache mode (HttpPool `protocol: 'groupcache'`) the GET form is golang/groupcache's: the path
 * is decoded as Go's `url.QueryUnescape` does (`+` is a space), "not found" is a 404 carrying the
 * `x-bulwark-not-found` header (Go's client has no not-found answer and loads locally on any non-200),
 * and every answer carries `x-bulwark-node`, so that bulwark peers know each other from Go peers.
 *
 * A request body must arrive within `bodyTimeoutMs` (on the pool's clock): a peer that declares
 * `Content-Length: 100`, sends 5 bytes and stays open gets 408 and its connection is closed, instead
 * of being held until the server's `requestTimeout` (300 s in Node). After a stall of this process the
 * deadline waits one more timer turn (core DeadlineTimer), so that a body that arrived meanwhile is read.
 *
 * Statuses: 200 (a value, a not-found answer, or a remove), 400 (malformed protobuf, bad path or
 * percent-encoding, bad key, a query, a body on the GET form), 401 (unsigned or badly signed, when a
 * secret is set), 404 (outside the base path, unknown group, or — groupcache mode — not found), 405 (a
 * method the path does not take), 408 (the body did not arrive in time), 413 (a request body over
 * MAX_REQUEST_BYTES), 500 (a bug), 502 (the getter failed here), 503 (the pool is closed), 504 (the
 * getter timed out here).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Clock } from '../core/clock.js';
import { DeadlineTimer } from '../core/deadline-timer.js';
import { AbortedError, TimeoutError } from '../core/errors.js';
import { declaresBody } from '../internal/declared-body.js';
import { decodePeerRequest, encodeGetResponse, encodeRemoveResponse, type GetResponse, type PeerMode } from './codec.js';
import { NODE_HEADER, NOT_FOUND_HEADER } from './http-peer.js';
import { keyProblem } from './key.js';
import type { GroupServer } from './peers.js';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, headerProblem, verify } from './signing.js';

/** HandlerConfig is what the handler needs from its pool. */
export interface HandlerConfig {
  readonly protocol: 'bulwark' | 'groupcache';
  readonly basePath: string;
  /** How long a request body may take to arrive, in ms. */
  readonly bodyTimeoutMs: number;
  readonly secret: string | Uint8Array | undefined;
  readonly groups: ReadonlyMap<string, GroupServer>;
  /** Wall time for checking request signatures; the body deadline's timer. */
  readonly clock: Clock;
  readonly closed: () => boolean;
}

/** PEER_STATUSES lists every status the handler answers. */
export const PEER_STATUSES = Object.freeze([200, 400, 401, 404, 405, 408, 413, 500, 502, 503, 504]);

/**
 * MAX_REQUEST_BYTES bounds a request body: a group name (≤ 255 bytes) and a key (≤ 1 KiB of UTF-8) with
 * their framing fit several times over; a larger body gets 413 and the connection is closed.
 */
export const MAX_REQUEST_BYTES = 4_096;

const PROTOBUF = 'application/x-protobuf';

/** servePeer answers one peer request; it never throws and settles once the response is written. */
export async function servePeer(config: HandlerConfig, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (config.protocol === 'groupcache') res.setHeader(NODE_HEADER, '1');
  try {
    await route(config, req, res);
  } catch (err) {
    reply(res, 500, `internal error: ${err instanceof Error ? err.message : String(err)}`, true);
  }
}

/** route picks the form; not async itself, so that a peer's request costs one promise less. */
function route(config: HandlerConfig, req: IncomingMessage, res: ServerResponse): Promise<void> | void {
  const url = typeof req.url === 'string' ? req.url : '';
  if (!url.startsWith(config.basePath)) return reply(res, 404, 'not a cache peer path', declaresBody(req));
  if (config.closed()) return reply(res, 503, 'pool closed', declaresBody(req));
  if (url.length === config.basePath.length) return serveBodyForm(config, req, res, url);
  const c = url.charCodeAt(config.basePath.length);
  if (c === 0x3f || c === 0x23) return reply(res, 400, 'peer paths take no query', declaresBody(req));
  return servePathForm(config, req, res, url);
}

/** serveBodyForm answers `POST|DELETE {basePath}` with a GetRequest / RemoveRequest body. */
async function serveBodyForm(config: HandlerConfig, req: IncomingMessage, res: ServerResponse, url: string): Promise<void> {
  const method = req.method;
  if (method !== 'POST' && method !== 'DELETE') {
    res.setHeader('allow', 'POST, DELETE');
    return reply(res, 405, `${config.basePath} takes POST (get) or DELETE (remove) with a protobuf body`, declaresBody(req));
  }
  const headers = req.headers ?? {};
  const secret = config.secret;
  const now = secret === undefined ? 0 : config.clock.now();
  if (secret !== undefined) {
    const why = headerProblem(headers[TIMESTAMP_HEADER], headers[SIGNATURE_HEADER], now);
    if (why !== undefined) return reply(res, 401, why, declaresBody(req));
  }
  const declared = headers['content-length'];
  if (declared !== undefined && !(Number(declared) <= MAX_REQUEST_BYTES)) return reply(res, 413, `request body over ${MAX_REQUEST_BYTES} bytes`, true);
  let body: Uint8Array | undefined;
  try {
    body = await readBody(req, MAX_REQUEST_BYTES, config);
  } catch (err) {
    if (err === BODY_TIMEOUT) {
      reply(res, 408, `request body did not arrive within ${config.bodyTimeoutMs} ms`, true);
      // The peer still owes body bytes: drop the connection rather than wait for them.
      res.once('finish', () => req.socket?.destroy());
      return;
    }
    return reply(res, 400, 'request body ended early or was already read', true);
  }
  if (body === undefined) return reply(res, 413, `request body over ${MAX_REQUEST_BYTES} bytes`, true);
  if (secret !== undefined) {
    const why = verify(secret, method, url, headers[TIMESTAMP_HEADER], headers[SIGNATURE_HEADER], now, body);
    if (why !== undefined) return reply(res, 401, why);
  }
  let request;
  try {
    request = decodePeerRequest(body);
  } catch {
    return reply(res, 400, 'malformed protobuf request');
  }
  return serve(config, res, method === 'DELETE', request.group, request.key, request.mode);
}

/** servePathForm answers `GET {basePath}{group}/{key}`, the form for reading a node by hand. */
async function servePathForm(config: HandlerConfig, req: IncomingMessage, res: ServerResponse, url: string): Promise<void> {
  const method = req.method;
  if (method !== 'GET') {
    res.setHeader('allow', 'GET');
    return reply(res, 405, `${config.basePath}<group>/<key> takes GET only`, declaresBody(req));
  }
  if (config.secret !== undefined) {
    const headers = req.headers ?? {};
    const why = verify(config.secret, method, url, headers[TIMESTAMP_HEADER], headers[SIGNATURE_HEADER], config.clock.now());
    if (why !== undefined) return reply(res, 401, why, declaresBody(req));
  }
  if (declaresBody(req)) return reply(res, 400, 'a GET carries no body', true);
  const rest = url.slice(config.basePath.length);
  if (rest.includes('?') || rest.includes('#')) return reply(res, 400, 'peer paths take no query');
  const slash = rest.indexOf('/');
  if (slash <= 0) return reply(res, 400, `want ${config.basePath}<group>/<key>`);
  let group: string;
  let key: string;
  const decode = config.protocol === 'groupcache' ? queryUnescape : decodeURIComponent;
  try {
    group = decode(rest.slice(0, slash));
    key = decode(rest.slice(slash + 1));
  } catch {
    return reply(res, 400, 'bad percent-encoding');
  }
  return serve(config, res, false, group, key, 'normal');
}

/** queryUnescape is Go's `url.QueryUnescape` for UTF-8 text: `+` is a space, %XX a byte. */
function queryUnescape(s: string): string {
  return decodeURIComponent(s.includes('+') ? s.replace(/\+/g, ' ') : s);
}

async function serve(config: HandlerConfig, res: ServerResponse, remove: boolean, group: string, key: string, mode: PeerMode): Promise<void> {
  const problem = keyProblem(key);
  if (problem !== undefined) return reply(res, 400, problem);
  const target = config.groups.get(group);
  if (target === undefined) return reply(res, 404, 'no such group');
  if (remove) return replyBody(res, encodeRemoveResponse(target.serveRemove(key)));

  // No signal: a load started for a peer goes on if the peer leaves (its result is cached for the next
  // asker), bounded by the group's getter timeout; and a cache hit allocates no AbortController.
  try {
    const answer = await target.serveGet(key, undefined, mode);
    if (answer.notFound && config.protocol === 'groupcache') return replyNotFound(res, answer);
    replyBody(res, encodeGetResponse(answer));
  } catch (err) {
    if (err instanceof TimeoutError) reply(res, 504, err.message);
    else if (err instanceof AbortedError) reply(res, 503, err.message);
    else if (err instanceof TypeError) reply(res, 400, err.message);
    else reply(res, 502, err instanceof Error ? err.message : String(err));
  }
}

/** BODY_TIMEOUT is what readBody rejects with when the body did not arrive in time. */
const BODY_TIMEOUT = new Error('request body timed out');

/** readBody reads the request body within the body deadline; undefined when it exceeds `limit` (the rest is left unread). */
function readBody(req: IncomingMessage, limit: number, config: HandlerConfig): Promise<Uint8Array | undefined> {
  // A body some middleware already consumed would never end again: refuse it rather than wait.
  if (req.readableEnded || req.destroyed) return Promise.reject(new Error('request body already read'));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    // A DeadlineTimer: after a stall of this process, a body that arrived meanwhile is read, not refused.
    const timer = new DeadlineTimer(config.clock, config.bodyTimeoutMs, () => {
      done();
      reject(BODY_TIMEOUT);
    }).unref();
    const done = () => {
      timer.cancel();
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer | string) => {
      const b = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      total += b.byteLength;
      if (total > limit) {
        done();
        resolve(undefined);
      } else chunks.push(b);
    };
    const onEnd = () => {
      done();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total));
    };
    const onError = (err: unknown) => {
      done();
      reject(err);
    };
    const onClose = () => {
      done();
      reject(new Error('request closed before its body ended'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

/** replyNotFound is groupcache mode's "not found": a 404 Go reads as a failure, bulwark peers by its header. */
function replyNotFound(res: ServerResponse, answer: GetResponse): void {
  if (res.headersSent || res.writableEnded) return;
  res.setHeader(NOT_FOUND_HEADER, String(Math.max(0, Math.floor(answer.ttlMs))));
  reply(res, 404, 'not found');
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
