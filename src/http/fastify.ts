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
import type { IncomingMessage, ServerResponse } from 'node:http';
import { toGuard, type HttpGuard, type HttpGuardOptions, type Verdict } from './guard.js';
import { noteError } from './pass.js';
import { JSON_TYPE, type Refusal } from './refusal.js';

/** FastifyGuardOptions are the plugin's options: an HttpGuard to share, or the options of a new one. */
export type FastifyGuardOptions = HttpGuardOptions | { guard: HttpGuard };

interface RequestLike {
  raw: IncomingMessage;
}
interface ReplyLike {
  raw: ServerResponse;
  code(status: number): ReplyLike;
  type(contentType: string): ReplyLike;
  send(payload?: unknown): ReplyLike;
}
type Done = (err?: Error) => void;

/** FastifyLike is the part of a Fastify instance the plugin uses. */
export interface FastifyLike {
  // Method syntax on purpose: Fastify's overloaded addHook must be assignable to it.
  addHook(name: string, hook: (...args: never[]) => unknown): unknown;
}

/** FastifyGuardPlugin is the plugin function with fastify-plugin's marks. */
export interface FastifyGuardPlugin {
  (fastify: FastifyLike, options: FastifyGuardOptions, done: Done): void;
}

function send(reply: ReplyLike, r: Refusal): void {
  reply.code(r.status).type(JSON_TYPE).send(r.body);
}

function plugin(fastify: FastifyLike, options: FastifyGuardOptions, done: Done): void {
  let g: HttpGuard;
  try {
    g = toGuard(options !== null && typeof options === 'object' && 'guard' in options ? options.guard : (options as HttpGuardOptions));
  } catch (err) {
    done(err as Error);
    return;
  }
  const after = (reply: ReplyLike, next: Done, v: Verdict): void => {
    if (v === undefined) next();
    else if (v !== null) send(reply, v);
  };
  fastify.addHook('onRequest', (request: RequestLike, reply: ReplyLike, next: Done): void => {
    const v = g.check(request.raw, reply.raw);
    if (v instanceof Promise) v.then((x) => after(reply, next, x), next);
    else after(reply, next, v);
  });
  fastify.addHook('onError', (_request: RequestLike, reply: ReplyLike, error: Error, next: Done): void => {
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
