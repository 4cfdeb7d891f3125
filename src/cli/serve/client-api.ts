/**
 * The client API of a `bulwark serve` node:
 *
 *   GET|HEAD /v1/groups/<group>/keys/<key>   200 the value (application/octet-stream), with
 *                                            `x-bulwark-source: main|hot|peer|origin|stale` and `age`
 *                                            (seconds; `x-bulwark-age-ms` in milliseconds) when known
 *   DELETE   /v1/groups/<group>/keys/<key>   204 once every node dropped it; 502 when some peer was not reached
 *   GET      /v1/registry                    the membership this node sees (what `bulwark registry ls` reads)
 *
 * The key is one percent-encoded path segment, at most 1 KiB of UTF-8 (414 beyond). Requests carry no
 * body (413). Errors are text with the error's code in `x-bulwark-error`: 400 bad key or path, 404
 * unknown group (`ERR_NO_GROUP`) or no such key (`ERR_NOT_FOUND`), 405, 502 origin or owner failed
 * (`ERR_LOAD_FAILED`, `ERR_PEER`), 503 the origin is guarded right now (`ERR_BREAKER_OPEN`,
 * `ERR_RATE_LIMITED`, `ERR_BULKHEAD_REJECTED`), 504 the load timed out (`ERR_TIMEOUT`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { MAX_KEY_BYTES } from '../../cache/index.js';
import { declaresBody } from '../../internal/declared-body.js';
import type { Answer, ServedGroup } from './served-group.js';

/** ClientApi is what the client API needs of its node. */
export interface ClientApi {
  readonly groups: ReadonlyMap<string, ServedGroup>;
  readonly config: { readonly service: string; readonly advertise: string };
  readonly pool: { members(): readonly string[] };
}

/** The key path, `/v1/groups/<group>/keys/<key>[?query]`: each a path segment (no `/`, `?` or `#`), the group's not empty. */
const GROUPS = '/v1/groups/';
const KEYS = '/keys/';
const SLASH = 0x2f;
const QUESTION = 0x3f;
const HASH = 0x23;
/** What a query may not hold (a regular expression's `.`: the former route, /(?:\?.*)?$/, refused them). */
const LINE_TERMINATOR = /[\n\r\u2028\u2029]/;

/** handleClient answers one client API request; it never throws, and settles once the answer is written. */
export function handleClient(node: ClientApi, req: IncomingMessage, res: ServerResponse): Promise<void> {
  // Not async: a cache hit costs no promise of its own here, only the group's answer and its then.
  try {
    const routed = route(node, req, res);
    return routed instanceof Promise ? routed.catch((err: unknown) => internalError(res, err)) : DONE;
  } catch (err) {
    internalError(res, err);
    return DONE;
  }
}

const DONE = Promise.resolve();

function internalError(res: ServerResponse, err: unknown): void {
  replyText(res, 500, `internal error: ${(err as Error)?.message ?? String(err)}`);
}

function route(node: ClientApi, req: IncomingMessage, res: ServerResponse): Promise<void> | void {
  const url = req.url ?? '/';
  if (declaresBody(req)) return replyText(res, 413, 'the client API takes no request body', { connection: 'close' });
  if (url === '/v1/registry' || url.startsWith('/v1/registry?')) {
    if (req.method !== 'GET') return replyText(res, 405, 'GET only', { allow: 'GET' });
    return replyJson(res, registryView(node));
  }
  // Parsed by hand, not by a regular expression: no match array per request (what it accepts is the same).
  const groupEnd = url.startsWith(GROUPS) ? segmentEnd(url, GROUPS.length) : 0;
  const keyStart = groupEnd + KEYS.length;
  const keyEnd = groupEnd > GROUPS.length && url.startsWith(KEYS, groupEnd) ? segmentEnd(url, keyStart) : -1;
  if (keyEnd < 0 || (keyEnd < url.length && (url.charCodeAt(keyEnd) !== QUESTION || LINE_TERMINATOR.test(url.slice(keyEnd)))))
    return replyText(res, 404, 'not found: the client API is /v1/groups/<group>/keys/<key>');
  let groupName: string;
  let key: string;
  try {
    groupName = decodeSegment(url.slice(GROUPS.length, groupEnd));
    key = decodeSegment(url.slice(keyStart, keyEnd));
  } catch {
    return replyText(res, 400, 'bad percent-encoding', { 'x-bulwark-error': 'ERR_BAD_REQUEST' });
  }
  const served = node.groups.get(groupName);
  if (served === undefined)
    return replyText(res, 404, `no group ${JSON.stringify(groupName.slice(0, 64))} on this node`, { 'x-bulwark-error': 'ERR_NO_GROUP' });
  if (key.length === 0) return replyText(res, 400, 'a key must not be empty', { 'x-bulwark-error': 'ERR_BAD_KEY' });
  // UTF-8 takes at most 3 bytes per UTF-16 unit: a key that short cannot be over the bound, and is not measured.
  if (key.length > MAX_KEY_BYTES / 3 && Buffer.byteLength(key) > MAX_KEY_BYTES)
    return replyText(res, 414, `a key must be at most ${MAX_KEY_BYTES} bytes of UTF-8`, { 'x-bulwark-error': 'ERR_BAD_KEY' });
  const method = req.method;
  if (method === 'DELETE') {
    return served.remove(key).then(
      () => {
        res.writeHead(204);
        res.end();
      },
      (err: unknown) => replyError(res, err),
    );
  }
  if (method !== 'GET' && method !== 'HEAD') return replyText(res, 405, 'GET, HEAD or DELETE', { allow: 'GET, HEAD, DELETE' });
  // A value this node holds is answered now, in the request's tick: no promise, no microtask.
  const held = served.getCached(key);
  if (held !== undefined) return replyAnswer(res, method === 'HEAD', held);
  // No signal: a load goes on if its client leaves (bounded by --load-timeout), and its value is cached
  // for the next asker.
  return served.get(key, undefined).then(
    (answer) => replyAnswer(res, method === 'HEAD', answer),
    (err: unknown) => replyError(res, err),
  );
}

/** segmentEnd answers where the path segment starting at `from` ends: the index of its `/`, `?` or `#`, or the URL's length. */
function segmentEnd(url: string, from: number): number {
  for (let i = from; i < url.length; i++) {
    const c = url.charCodeAt(i);
    if (c === SLASH || c === QUESTION || c === HASH) return i;
  }
  return url.length;
}

/** decodeSegment decodes a percent-encoded segment (throws URIError as decodeURIComponent does); one without `%` is itself. */
function decodeSegment(segment: string): string {
  return segment.includes('%') ? decodeURIComponent(segment) : segment;
}

/**
 * DecimalMemo answers an integer's decimal text, keeping the last one made: a hot key's answers repeat
 * their content-length (and, within a second, their age in seconds), so most answers make no text. One
 * entry, not a table of texts: what a hit costs in place is mostly the memory it touches (each line or
 * page a request reaches that the kernel and node:http did not keep warm), and a table of 64 Ki texts
 * put each length's text on a page of its own.
 */
class DecimalMemo {
  private n = -1;
  private text = '-1';

  /** of answers `n` in decimal. */
  of(n: number): string {
    if (n !== this.n) {
      this.n = n;
      this.text = String(n);
    }
    return this.text;
  }
}

const LENGTH_TEXT = new DecimalMemo();
const AGE_TEXT = new DecimalMemo();

/**
 * The headers of a 200, without and with an age: filled in and handed to writeHead, which reads them
 * before it returns (node:http keeps no reference), so one array of each serves every answer.
 */
const ANSWER_HEADERS = ['content-type', 'application/octet-stream', 'content-length', '', 'x-bulwark-source', ''];
const AGED_ANSWER_HEADERS = [...ANSWER_HEADERS, 'age', '', 'x-bulwark-age-ms', ''];

/** replyAnswer writes a value with its source and age. */
function replyAnswer(res: ServerResponse, head: boolean, answer: Answer): void {
  if (res.writableEnded || res.destroyed) return;
  // The cache holds values as one-byte strings: written as latin1 they need no Buffer copy here.
  const data = answer.value.binary();
  const ageMs = answer.ageMs;
  const headers = ageMs === undefined ? ANSWER_HEADERS : AGED_ANSWER_HEADERS;
  headers[3] = LENGTH_TEXT.of(data.length);
  headers[5] = answer.source;
  if (ageMs !== undefined) {
    headers[7] = AGE_TEXT.of(Math.floor(ageMs / 1000));
    headers[9] = String(Math.round(ageMs));
  }
  res.writeHead(200, headers);
  if (head) res.end();
  else res.end(data, 'latin1');
}

/** registryView is the membership this node sees, in the shape `bulwark registry ls --node` prints. */
function registryView(node: ClientApi): { services: { name: string; instances: { id: string; address: string; url: string }[] }[] } {
  const instances = node.pool.members().map((url) => {
    const u = new URL(url);
    const port = u.port || (u.protocol === 'https:' ? '443' : '80');
    return { id: `${u.hostname.replace(/[^A-Za-z0-9._:-]/g, '')}-${port}`, address: `${u.hostname}:${port}`, url };
  });
  return { services: [{ name: node.config.service, instances }] };
}

const STATUS_BY_CODE: Record<string, number> = {
  ERR_NOT_FOUND: 404,
  ERR_BREAKER_OPEN: 503,
  ERR_RATE_LIMITED: 503,
  ERR_BULKHEAD_REJECTED: 503,
  ERR_CLOSED: 503,
  ERR_ABORTED: 503,
  ERR_TIMEOUT: 504,
  ERR_LOAD_FAILED: 502,
  ERR_PEER: 502,
};

function replyError(res: ServerResponse, err: unknown): void {
  if (err instanceof TypeError) return replyText(res, 400, err.message, { 'x-bulwark-error': 'ERR_BAD_KEY' });
  const code = typeof (err as { code?: unknown } | null)?.code === 'string' ? (err as { code: string }).code : 'ERR_INTERNAL';
  const status = STATUS_BY_CODE[code] ?? 500;
  const extra: Record<string, string> = { 'x-bulwark-error': code };
  if (status === 503) extra['retry-after'] = '1';
  replyText(res, status, (err as Error)?.message ?? String(err), extra);
}

/** replyText answers a short text body (cut at 512 bytes). */
export function replyText(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.writableEnded) return;
  const body = Buffer.from(message.slice(0, 512), 'utf8');
  res.writeHead(status, { ...headers, 'content-type': 'text/plain; charset=utf-8', 'content-length': body.byteLength });
  res.end(body);
}

function replyJson(res: ServerResponse, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store' });
  res.end(body);
}
