/**
 * expressGuard: the Express adapter (Express 4 and 5). Express is an optional peer dependency and
 * this file does not import it: the middleware is a plain `(req, res, next)` function.
 */
import type { ServerResponse } from 'node:http';
import { toGuard, type HttpGuard, type HttpGuardOptions } from './guard.js';
import type { ExpressErrorMiddleware, ExpressMiddleware, Verdict } from './types.js';
import { noteError } from './pass.js';
import { sendRefusal } from './refusal.js';

/**
 * expressGuard answers an Express middleware that runs `guard` (an HttpGuard, or its options): a
 * refused request is answered 429 / 503 here and `next` is not called. A handler error reaches
 * Express's error handler as usual; its 500 is what the breaker sees as the failure (add
 * `expressErrors()` after the routes to hand the breaker the error itself).
 */
export function expressGuard(guard: HttpGuard | HttpGuardOptions): ExpressMiddleware {
  const g = toGuard(guard);
  return function bulwarkGuard(req, res, next): void {
    const v = g.check(req, res);
    if (v instanceof Promise) v.then((x) => after(res, next, x), next);
    else after(res, next, v);
  };
}

function after(res: ServerResponse, next: (err?: unknown) => void, v: Verdict): void {
  if (v === undefined) next();
  else if (v !== null) sendRefusal(res, v);
}

/**
 * expressErrors answers an Express error middleware that hands a route's error to the breaker (as the
 * argument of its token's `failure(err)`) and passes it on unchanged. Add it after the routes and
 * before your own error handler; without it the breaker still sees the 500.
 */
export function expressErrors(): ExpressErrorMiddleware {
  return function bulwarkErrors(err, _req, res, next): void {
    noteError(res, err);
    next(err);
  };
}
