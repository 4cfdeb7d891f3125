/**
 * The HTTP side of ResilientClient: `client.fetch('http://payments/api/x', init)`.
 *
 * - The URL's host is a service name, resolved through the registry (NotFoundError when unknown); each
 *   attempt goes to the picked instance's address through that instance's undici keep-alive Pool.
 * - A 5xx answer or a network error fails the attempt (breakers, passive health, retry); any other
 *   answer, 4xx included, is a success — a 404 says nothing bad about the instance.
 * - Idempotent methods (GET, HEAD, OPTIONS, PUT, DELETE, TRACE; RFC 9110 §9.2.2) are retried on another
 *   instance; others only when `retry` asks for it.
 * - The response body is read inside the attempt (bounded by `maxResponseBytes`), so the timeout covers
 *   the whole exchange, a body that breaks off is retried like any failure, and the connection goes
 *   back to the pool at once. The answer is a WHATWG `Response`, as `fetch` gives.
 * - When every attempt answered 5xx and no fallback is set, the last 5xx answer is the call's answer,
 *   as with `fetch`; with a fallback, the fallback gets a `PeerError` carrying the `status`.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { InvalidResponseError } from '../core/errors.js';
import { showValue } from '../core/validate.js';
import type { ServiceInstance } from '../registry/types.js';
import { BodyTooLargeError, readCappedBody } from '../internal/capped-body.js';
import type { OriginPools } from '../internal/origin-pools.js';
import type { FetchInit } from './types.js';

export type { FetchInit } from './types.js';

/** Methods that may be sent twice without changing the outcome (RFC 9110 §9.2.2). */
const IDEMPOTENT: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);
/** Statuses whose response has no body (the Response constructor refuses one). */
const NULL_BODY: ReadonlySet<number> = new Set([101, 103, 204, 205, 304]);
const METHOD = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** FetchPlan is a request, parsed and checked once per call. */
export interface FetchPlan {
  readonly service: string;
  readonly protocol: 'http:' | 'https:';
  readonly path: string;
  readonly method: string;
  readonly headers: Record<string, string> | string[] | undefined;
  readonly body: string | Uint8Array | null;
  readonly retryByDefault: boolean;
}

/** planFetch parses `url` and `init`; bad input is a TypeError naming what was wrong. */
export function planFetch(url: string | URL, init: FetchInit | undefined): FetchPlan {
  let u: URL;
  try {
    u = typeof url === 'string' ? new URL(url) : url;
  } catch {
    throw new TypeError(`ResilientClient.fetch: url must be an absolute URL like http://payments/api, got ${showValue(url)}`);
  }
  if (!(u instanceof URL)) throw new TypeError(`ResilientClient.fetch: url must be a string or a URL, got ${showValue(url)}`);
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new TypeError(`ResilientClient.fetch: only http: and https: URLs, got ${u.protocol}`);
  if (u.port !== '' || u.username !== '' || u.password !== '') {
    throw new TypeError(`ResilientClient.fetch: the URL's host names a service (the registry knows its ports); leave port and credentials out, got ${u.host}`);
  }
  if (init !== undefined && (init === null || typeof init !== 'object'))
    throw new TypeError(`ResilientClient.fetch: init must be an object, got ${showValue(init)}`);
  const signal: unknown = init?.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal))
    throw new TypeError(`ResilientClient.fetch: init.signal must be an AbortSignal, got ${showValue(signal)}`);
  const method = (init?.method ?? 'GET').toUpperCase();
  if (!METHOD.test(method)) throw new TypeError(`ResilientClient.fetch: method must be an HTTP token, got ${showValue(init?.method)}`);
  const body = init?.body ?? null;
  if (body !== null && typeof body !== 'string' && !(body instanceof Uint8Array)) {
    throw new TypeError(`ResilientClient.fetch: body must be a string or a Uint8Array (a stream cannot be retried), got ${showValue(body)}`);
  }
  return {
    service: u.hostname,
    protocol: u.protocol,
    path: `${u.pathname}${u.search}`,
    method,
    headers: flattenHeaders(init?.headers),
    body,
    retryByDefault: IDEMPOTENT.has(method),
  };
}

function flattenHeaders(h: FetchInit['headers']): Record<string, string> | string[] | undefined {
  if (h === undefined) return undefined;
  if (Array.isArray(h)) {
    const flat: string[] = [];
    for (const pair of h) {
      if (!Array.isArray(pair) || pair.length !== 2) throw new TypeError('ResilientClient.fetch: headers must be an object or a list of [name, value] pairs');
      flat.push(String(pair[0]), String(pair[1]));
    }
    return flat;
  }
  if (h === null || typeof h !== 'object')
    throw new TypeError(`ResilientClient.fetch: headers must be an object or a list of [name, value] pairs, got ${showValue(h)}`);
  return h as Record<string, string>;
}

/** originOf is the origin of `instance` for `protocol`: `http://127.0.0.1:8080`. */
export function originOf(protocol: string, instance: ServiceInstance): string {
  return `${protocol}//${instance.address}`;
}

/**
 * fetchAttempt makes one request to `instance` and reads its body (at most `maxBytes`), answering a
 * Response. Network errors, an aborted signal and an oversized body reject.
 */
export async function fetchAttempt(pools: OriginPools, plan: FetchPlan, instance: ServiceInstance, signal: AbortSignal, maxBytes: number): Promise<Response> {
  const pool = pools.get(originOf(plan.protocol, instance));
  const res = await pool.request({
    path: plan.path,
    method: plan.method as 'GET',
    headers: plan.headers,
    body: plan.body,
    signal,
    idempotent: plan.retryByDefault,
  });
  let body: Uint8Array;
  try {
    body = await readCappedBody(res.body, maxBytes, res.headers['content-length']);
  } catch (err) {
    if (!(err instanceof BodyTooLargeError)) throw err;
    const size = err.declared === undefined ? 'a body' : `a body of ${err.declared} bytes,`;
    throw new InvalidResponseError(`${instance.address} answered ${size} above maxResponseBytes ${maxBytes}`);
  }
  const status = res.statusCode;
  const bytes = NULL_BODY.has(status) || plan.method === 'HEAD' ? null : body;
  return new Response(bytes, { status, statusText: res.statusText, headers: toHeaders(res.headers) });
}

/** failedStatus judges a response: a 5xx fails the attempt (answering the status), anything else succeeds. */
export function failedStatus(res: Response): number | false {
  return res.status >= 500 ? res.status : false;
}

function toHeaders(raw: IncomingHttpHeaders): Headers {
  const h = new Headers();
  for (const name in raw) {
    const v = raw[name];
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const x of v) h.append(name, x);
    else h.append(name, v);
  }
  return h;
}
