/**
 * wrapHandler: the node:http adapter. It wraps a request handler so that every request passes the
 * guard first; a refused request is answered 429 / 503 and never reaches the handler.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpGuard, toGuard, type HttpGuardOptions } from './guard.js';
import type { NodeHandler, Verdict } from './types.js';
import { noteError } from './pass.js';
import { sendRefusal } from './refusal.js';

/**
 * wrapHandler answers a request listener that runs `guard` (an HttpGuard, or its options) before
 * `handler`. When the handler throws or its promise rejects, the error counts as the breaker's
 * failure, is reported on `guard.onError` (source `'handler'`), and the response is answered 500
 * with no body — or destroyed, when its headers were already sent — so that no request hangs.
 */
export function wrapHandler<Req extends IncomingMessage, Res extends ServerResponse>(
  guard: HttpGuard | HttpGuardOptions,
  handler: NodeHandler<Req, Res>,
): (req: Req, res: Res) => void {
  const g = toGuard(guard);
  if (typeof handler !== 'function') throw new TypeError(`wrapHandler: handler must be a function, got ${typeof handler}`);
  const after = (req: Req, res: Res, v: Verdict): void => {
    if (v === undefined) run(g, handler, req, res);
    else if (v !== null) sendRefusal(res, v);
  };
  return function guarded(req: Req, res: Res): void {
    const v = g.check(req, res);
    if (v instanceof Promise) {
      v.then(
        (x) => after(req, res, x),
        (err: unknown) => fail(g, res, err),
      );
    } else after(req, res, v);
  };
}

function run<Req extends IncomingMessage, Res extends ServerResponse>(g: HttpGuard, handler: NodeHandler<Req, Res>, req: Req, res: Res): void {
  try {
    const r = handler(req, res);
    if (r instanceof Promise) r.then(undefined, (err: unknown) => fail(g, res, err));
  } catch (err) {
    fail(g, res, err);
  }
}

function fail(g: HttpGuard, res: ServerResponse, err: unknown): void {
  noteError(res, err);
  g.report('handler', err);
  if (res.destroyed) return;
  if (!res.headersSent) {
    res.statusCode = 500;
    res.setHeader('content-length', 0);
    res.end();
  } else res.destroy();
}
