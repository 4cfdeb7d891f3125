/**
 * Which client a request comes from, and the limiter key that names it.
 *
 * The client address is the socket's peer unless `trustProxy` says how many proxies stand in front of
 * the server. Then it is read from `X-Forwarded-For` counting from the RIGHT: each proxy appends the
 * address it received the request from, so the entry `hops` places from the end was written by the
 * outermost trusted proxy and is the only one a client cannot forge. (Taking the leftmost entry, as
 * Express's `trust proxy = true` does, lets any client pick its own key and escape its limit.)
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';

/** MAX_KEY_LENGTH bounds a key handed to the limiter; longer keys are replaced by their SHA-256. */
export const MAX_KEY_LENGTH = 256;

/** UNKNOWN_ADDRESS is the key of a request whose socket has no peer address any more. */
export const UNKNOWN_ADDRESS = 'unknown';

/** socketAddress is the peer address of the request's socket, IPv4-mapped IPv6 written as IPv4. */
export function socketAddress(req: IncomingMessage): string {
  const a = req.socket?.remoteAddress;
  if (a === undefined || a === '') return UNKNOWN_ADDRESS;
  return unmapV4(a);
}

function unmapV4(a: string): string {
  // "::ffff:10.0.0.1" is the same client as "10.0.0.1" on a dual-stack socket: one key, not two.
  return a.length > 7 && a.charCodeAt(0) === 58 /* : */ && a.startsWith('::ffff:') && a.includes('.', 7) ? a.slice(7) : a;
}

/**
 * clientAddress answers the client's address: with `hops` = 0 the socket peer; with `hops` ≥ 1 the
 * X-Forwarded-For entry `hops` places from the right (the leftmost one when the list is shorter).
 * An entry that is not an IP address (after dropping a port) falls back to the socket peer.
 */
export function clientAddress(req: IncomingMessage, hops: number): string {
  if (hops === 0) return socketAddress(req);
  const xff = req.headers['x-forwarded-for'];
  if (typeof xff !== 'string' || xff === '') return socketAddress(req);
  // Walk commas from the right without splitting the whole (attacker-sized) header.
  let end = xff.length;
  let start = xff.lastIndexOf(',', end - 1) + 1;
  for (let i = 1; i < hops && start > 0; i++) {
    end = start - 1;
    start = xff.lastIndexOf(',', end - 1) + 1;
  }
  const entry = normalizeEntry(xff.slice(start, end).trim());
  return entry ?? socketAddress(req);
}

function normalizeEntry(e: string): string | undefined {
  if (e.length === 0 || e.length > 64) return undefined;
  if (isIP(e) !== 0) return unmapV4(e);
  // Some proxies append a port: "203.0.113.7:41234" or "[2001:db8::1]:41234".
  if (e.charCodeAt(0) === 91 /* [ */) {
    const close = e.indexOf(']');
    const inner = close > 0 ? e.slice(1, close) : '';
    return isIP(inner) === 6 ? unmapV4(inner) : undefined;
  }
  const colon = e.lastIndexOf(':');
  if (colon > 0 && e.indexOf(':') === colon) {
    const host = e.slice(0, colon);
    return isIP(host) === 4 ? host : undefined;
  }
  return undefined;
}

/**
 * boundKey returns `key` when it is at most MAX_KEY_LENGTH characters, else `sha256:<base64url>` of it,
 * so that a client sending a huge header can neither grow the limiter's memory nor make it throw
 * (and so fail open).
 */
export function boundKey(key: string): string {
  if (key.length <= MAX_KEY_LENGTH) return key;
  return `sha256:${createHash('sha256').update(key).digest('base64url')}`;
}
