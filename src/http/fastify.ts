/**
 * fastifyGuard: the Fastify plugin (Fastify 4 and 5). Fastify is an optional peer dependency and this
 * file does not import it. The plugin carries the marks `fastify-plugin` would set
 * (`Symbol.for('skip-override')` and friends), so its hooks apply to the scope it is registered in:
 * register it on the root instance to guard every route, or inside a plugin to guard only that
 * plugin's routes.
 *
 * Hooks: `onRequest` runs the guard (before body parsing: a refused request costs no parsing);
 * `onError` records a handler's error so the breaker sees it. Tokens are completed when the raw
 * response closes, which also covers clients that go away (Fastify's `onResponse` does not run then).
 */
import { toGuard, type HttpGuard, type HttpGuardOptions } from './guard.js';
import { noteError } from './pass.js';
import { JSON_TYPE } from './refusal.js';
import type { FastifyDone, FastifyGuardOptions, FastifyGuardPlugin, FastifyLike, FastifyReplyLike, FastifyRequestLike, Refusal, Verdict } from './types.js';

function send(reply: FastifyReplyLike, r: Refusal): void {
  reply.code(r.status).type(JSON_TYPE).send(r.body);
}

function plugin(fastify: FastifyLike, options: FastifyGuardOptions, done: FastifyDone): void {
  let g: HttpGuard;
  try {
    g = toGuard(options !== null && typeof options === 'object' && 'guard' in options ? options.guard : (options as HttpGuardOptions));
  } catch (err) {
    done(err as Error);
    return;
  }
  const after = (reply: FastifyReplyLike, next: FastifyDone, v: Verdict): void => {
    if (v === undefined) next();
    else if (v !== null) send(reply, v);
  };
  fastify.addHook('onRequest', (request: FastifyRequestLike, reply: FastifyReplyLike, next: FastifyDone): void => {
    const v = g.check(request.raw, reply.raw);
    if (v instanceof Promise) v.then((x) => after(reply, next, x), next);
    else after(reply, next, v);
  });
  fastify.addHook('onError', (_request: FastifyRequestLike, reply: FastifyReplyLike, error: Error, next: FastifyDone): void => {
    noteError(reply.raw, error);
    next();
  });
  done();
}

/**
 * fastifyGuard is the Fastify plugin: `app.register(fastifyGuard, { limiter, shedder, breaker })`, or
 * `{ guard }` to share an HttpGuard (and its events and stats) between scopes.
 */
export const fastifyGuard: FastifyGuardPlugin = Object.assign(plugin, {
  [Symbol.for('skip-override')]: true,
  [Symbol.for('fastify.display-name')]: 'bulwark-http-guard',
  [Symbol.for('plugin-meta')]: { name: 'bulwark-http-guard', fastify: '>=4' },
});
