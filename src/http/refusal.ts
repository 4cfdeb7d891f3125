/**
 * What a refused request is answered with, and the header arithmetic. The bodies are built once: a
 * refusal under overload must not cost a JSON.stringify per request. Header names are written in
 * lower case (field names are case-insensitive, RFC 9110 §5.1, and HTTP/2 requires lower case): node
 * lower-cases every name it is given, and a name already in lower case makes the three `RateLimit-*`
 * headers ~40 % cheaper to set.
 */
import type { ServerResponse } from 'node:http';
import { BreakerOpenError, OverloadedError, RateLimitedError } from '../core/errors.js';
import type { LimitDecision } from '../core/admission.js';
import type { Refusal, RejectCode } from './types.js';

/** JSON_TYPE is the content type of every refusal body. */
export const JSON_TYPE = 'application/json; charset=utf-8';

/** refusal builds a Refusal: its status, and the body `{ error: { code, message } }`. */
export function refusal(status: number, code: RejectCode, message: string): Refusal {
  return Object.freeze({ status, code, message, body: Buffer.from(JSON.stringify({ error: { code, message } })) });
}

/** The three refusals, one per coded error. */
export const LIMITED = refusal(429, RateLimitedError.code, new RateLimitedError().message);
export const OVERLOADED = refusal(503, OverloadedError.code, new OverloadedError().message);
export const BREAKER_OPEN = refusal(503, BreakerOpenError.code, new BreakerOpenError().message);

/** seconds rounds milliseconds up to whole seconds (HTTP's delta-seconds), or -1 when not finite. */
export function seconds(ms: number): number {
  if (!(ms >= 0) || ms === Infinity) return -1;
  return Math.ceil(ms / 1000);
}

/** wholeCount floors a count to a non-negative integer, or -1 when not finite. */
function wholeCount(n: number): number {
  if (!(n >= 0) || n === Infinity) return -1;
  return Math.floor(n);
}

/**
 * setRateLimitHeaders writes `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset` (seconds
 * until the budget is whole) as in draft-ietf-httpapi-ratelimit-headers (up to -06, which defines these
 * three fields). A number that is not finite is left out rather than written as garbage.
 */
export function setRateLimitHeaders(res: ServerResponse, d: LimitDecision): void {
  const limit = wholeCount(d.limit);
  if (limit >= 0) res.setHeader('ratelimit-limit', limit);
  const remaining = wholeCount(d.remaining);
  if (remaining >= 0) res.setHeader('ratelimit-remaining', limit >= 0 ? Math.min(remaining, limit) : remaining);
  const reset = seconds(d.resetMs);
  if (reset >= 0) res.setHeader('ratelimit-reset', reset);
}

/**
 * setRetryAfter writes `Retry-After` in whole seconds, rounded up and at least 1 (a refused client told
 * "0" would come straight back). Nothing is written for a wait that is not finite (`Infinity`: the
 * request can never pass, retrying will not help) and the function answers false.
 */
export function setRetryAfter(res: ServerResponse, ms: number): boolean {
  const s = seconds(ms);
  if (s < 0) return false;
  res.setHeader('retry-after', s < 1 ? 1 : s);
  return true;
}

/** sendRefusal answers `r` on a plain node:http response (node:http and Express). */
export function sendRefusal(res: ServerResponse, r: Refusal): void {
  if (res.headersSent || res.destroyed) return;
  res.statusCode = r.status;
  res.setHeader('content-type', JSON_TYPE);
  res.setHeader('content-length', r.body.length);
  res.end(r.body);
}
