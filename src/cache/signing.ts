/**
 * Request signing between cache peers: HMAC-SHA256 over the method, the path, a timestamp and the
 * request body, sent in two headers. Covering the body means a captured signed request cannot have its
 * group or key swapped. A receiver accepts a timestamp within ±30 s of its own wall clock (the peers'
 * clocks are different machines', so this one clock is `Date.now`, not the monotonic one).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** The header that carries the signing time, in milliseconds since the Unix epoch. */
export const TIMESTAMP_HEADER = 'x-bulwark-timestamp';
/** The header that carries the signature, lowercase hex. */
export const SIGNATURE_HEADER = 'x-bulwark-signature';
/** MAX_SKEW_MS is how far a request's timestamp may be from the receiver's clock. */
export const MAX_SKEW_MS = 30_000;

const EMPTY = new Uint8Array(0);

/**
 * sign computes the hex HMAC-SHA256 under `secret` of `method \n path \n timestamp \n` followed by the
 * body's bytes. Method, path and timestamp cannot hold a newline, so the body starts after the third.
 */
export function sign(secret: string | Uint8Array, method: string, path: string, timestamp: string, body: Uint8Array = EMPTY): string {
  return createHmac('sha256', secret).update(`${method}\n${path}\n${timestamp}\n`).update(body).digest('hex');
}

/** headerProblem answers why the signature headers cannot be valid (before the body is read), else undefined. */
export function headerProblem(timestamp: unknown, signature: unknown, now: number): string | undefined {
  if (typeof timestamp !== 'string' || typeof signature !== 'string') return 'request is not signed';
  if (!/^\d{1,16}$/.test(timestamp)) return 'bad timestamp';
  if (Math.abs(now - Number(timestamp)) > MAX_SKEW_MS) return 'timestamp outside ±30 s';
  if (!/^[0-9a-f]{64}$/.test(signature)) return 'bad signature';
  return undefined;
}

/** verify answers undefined when the signature headers are valid for this request and body, else the reason. */
export function verify(
  secret: string | Uint8Array,
  method: string,
  path: string,
  timestamp: unknown,
  signature: unknown,
  now: number,
  body: Uint8Array = EMPTY,
): string | undefined {
  const problem = headerProblem(timestamp, signature, now);
  if (problem !== undefined) return problem;
  const want = Buffer.from(sign(secret, method, path, timestamp as string, body), 'hex');
  return timingSafeEqual(want, Buffer.from(signature as string, 'hex')) ? undefined : 'bad signature';
}
