/**
 * declaresBody tells whether a request says it carries a body: a `transfer-encoding`, or a
 * `content-length` other than `0`. `bulwark serve`'s client API refuses such a request (413), the
 * cache's peer handler answers it with its connection closed, and the node closes the socket of one
 * answered before its body arrived.
 *
 * Internal: not exported from the package.
 */
import type { IncomingMessage } from 'node:http';

/** declaresBody answers true when `req` has a transfer-encoding or a content-length that is not `0`. */
export function declaresBody(req: Pick<IncomingMessage, 'headers'>): boolean {
  const headers = req.headers ?? {};
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}
