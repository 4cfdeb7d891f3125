/**
 * Who may read the dashboard and who may use its controls. A request that reaches the server on a
 * loopback address reads freely; one from beyond loopback needs the token, on status endpoints and
 * controls alike. Controls are refused unless the handler was given them, and a control request must
 * come from the page's own origin (the browser's `Origin` and `Sec-Fetch-Site` headers) with a JSON body,
 * so that no other site can make a browser press them.
 */
import { timingSafeEqual, createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** Refusal is an HTTP status and a message for the person who was refused. */
export interface Denied {
  readonly status: number;
  readonly message: string;
}

/** isLoopback tells whether `address` (as a socket reports it) is 127.0.0.0/8 or ::1. */
export function isLoopback(address: string | undefined): boolean {
  if (address === undefined) return false;
  const a = address.startsWith('::ffff:') ? address.slice(7) : address;
  return a === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(a);
}

/** tokenOf answers the token a request carries: `Authorization: Bearer …`, else the `token` query parameter. */
export function tokenOf(req: IncomingMessage, query: URLSearchParams): string | undefined {
  const auth = req.headers.authorization;
  if (typeof auth === 'string' && auth.startsWith('Bearer ')) return auth.slice(7).trim();
  return query.get('token') ?? undefined;
}

function same(a: string, b: string): boolean {
  // Digests of equal length: the comparison takes the same time whatever the token's length.
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());
}

/** readAccess answers why a read is refused, or undefined when it may go on. */
export function readAccess(req: IncomingMessage, query: URLSearchParams, token: string | undefined): Denied | undefined {
  if (isLoopback(req.socket.localAddress)) return undefined;
  if (token === undefined) return { status: 403, message: 'the dashboard answers beyond loopback only when it was given a token' };
  const given = tokenOf(req, query);
  if (given === undefined || !same(given, token)) return { status: 401, message: 'a token is needed: Authorization: Bearer <token>, or ?token=<token>' };
  return undefined;
}

/** controlAccess answers why a control request is refused, or undefined when it may go on. */
export function controlAccess(req: IncomingMessage, query: URLSearchParams, token: string | undefined, controlsOn: boolean): Denied | undefined {
  if (!controlsOn) return { status: 403, message: 'the dashboard is read-only: it was started without controls' };
  if (req.method !== 'POST') return { status: 405, message: 'controls take POST' };
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none')
    return { status: 403, message: `a control request from another site is refused (Sec-Fetch-Site: ${String(site)})` };
  const origin = req.headers.origin;
  if (origin !== undefined) {
    let host: string | undefined;
    try {
      host = new URL(origin).host;
    } catch {
      host = undefined;
    }
    if (host === undefined || host !== req.headers.host) return { status: 403, message: `a control request from another origin is refused (${origin})` };
  }
  const type = req.headers['content-type'];
  if (typeof type !== 'string' || !/^application\/json\b/i.test(type))
    return { status: 415, message: 'controls take a JSON body (content-type: application/json)' };
  return readAccess(req, query, token);
}
