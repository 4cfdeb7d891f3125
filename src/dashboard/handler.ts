/**
 * dashboardHandler: the dashboard of one process (or of a fleet, given a FleetFeed) as a node:http
 * handler that also works as Express middleware, and `fastifyDashboard`, its Fastify plugin. Under its
 * path it answers the page (`<path>/`), the live stream (`<path>/events`, server-sent events), the last
 * frame as JSON (`<path>/status.json`) and the kept points (`<path>/history.json`); anything else is
 * passed to `next` (Express) or answered 404.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { integer, options as checkOptions, type OptionKeys } from '../core/validate.js';
import { checkScope } from '../rules/rule-key.js';
import { controlAccess, readAccess, type Denied } from './access.js';
import { actionsJson, runAction, type DashboardActions } from './actions.js';
import { control, readJson, type DashboardControls } from './controls.js';
import { BOOT_MARK, PAGE } from './page.js';
import { ProcessFeed, type FeedSource } from './process-feed.js';
import type { Feed, ProcessFeedOptions } from './types.js';
import { Viewers } from './viewers.js';

const OWNER = 'dashboardHandler';

/**
 * The most bytes of data embedded in the page (its last frame, then its history if it still fits): the
 * page and its data stay under 300 KB. What does not fit comes with the stream (a large fleet's frame).
 */
const MAX_EMBEDDED_BYTES = 256 * 1024;

/** DashboardOptions configures a dashboard handler. */
export interface DashboardOptions extends ProcessFeedOptions {
  /** The path the dashboard is served under (the page at `<path>/`). Defaults to '/dashboard'. */
  path?: string;
  /**
   * The token a request from beyond loopback must carry (`Authorization: Bearer <token>` or
   * `?token=<token>`). Without it, only loopback requests are answered. Defaults to none.
   */
  token?: string;
  /** The most live streams open at once; past it a stream is answered 503. Defaults to 100. */
  maxViewers?: number;
  /** The page's title. Defaults to 'bulwark'. */
  title?: string;
  /**
   * Turns the controls on: they write rules to this rules store (isolate or reset a breaker, change a
   * limit, shift weights, start a fault rehearsal). Beyond loopback they need the token; a request from
   * another origin is refused. Defaults to none: the dashboard is read-only.
   */
  controls?: DashboardControls;
  /**
   * Buttons that act on this process itself (`<path>/actions.json` lists them, a POST to
   * `<path>/actions/<id>` presses one), shown apart from the rule controls: the demo kills and restores
   * its instances with them. The controls' protections apply (same origin, JSON, token beyond loopback).
   * Defaults to none.
   */
  actions?: DashboardActions;
}

const KEYS = {
  path: true,
  token: true,
  maxViewers: true,
  title: true,
  controls: true,
  actions: true,
  tickMs: true,
  historyMs: true,
  latencyWindowMs: true,
  clock: true,
} as const satisfies OptionKeys<DashboardOptions>;

const CONTROLS_KEYS = { store: true, scope: true } as const satisfies OptionKeys<DashboardControls>;

/** dashboardDefaults are the handler's defaults (the feed's are processFeedDefaults). */
export const dashboardDefaults = Object.freeze({ path: '/dashboard', maxViewers: 100, title: 'bulwark' });

/**
 * DashboardHandler is a node:http request handler (and an Express middleware: `app.use(handler)`) with
 * the feed it serves; `close()` ends the streams and the feed's timer.
 */
export interface DashboardHandler {
  (req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void): void;
  /** The path it serves under, without a trailing slash. */
  readonly path: string;
  readonly feed: Feed;
  /** viewers answers the number of live streams open. */
  viewers(): number;
  close(): Promise<void>;
}

function isFeed(x: object): x is Feed {
  return typeof (x as Feed).onTick === 'function' && typeof (x as Feed).latest === 'function' && typeof (x as Feed).history === 'function';
}

function reply(res: ServerResponse, status: number, type: string, body: string | Buffer, head = false): void {
  res.statusCode = status;
  res.setHeader('content-type', type);
  res.setHeader('cache-control', 'no-store');
  res.setHeader('x-content-type-options', 'nosniff');
  res.end(head ? undefined : body);
}

function deny(res: ServerResponse, d: Denied): void {
  reply(res, d.status, 'application/json; charset=utf-8', `${JSON.stringify({ error: d.message })}\n`);
}

/**
 * dashboardHandler answers the dashboard of `metrics` (a BulwarkMetrics; its snapshot is taken once a
 * tick, whatever the number of viewers) or of a feed (a FleetFeed), served under `options.path`.
 */
export function dashboardHandler(metrics: FeedSource | Feed, options?: DashboardOptions): DashboardHandler {
  if (metrics === null || typeof metrics !== 'object')
    throw new TypeError(`${OWNER}: metrics must be a BulwarkMetrics or a dashboard feed, got ${String(metrics)}`);
  const o = checkOptions(OWNER, options, KEYS);
  const path = o.path ?? dashboardDefaults.path;
  if (typeof path !== 'string' || !/^\/[A-Za-z0-9._~\-/]*$/.test(path) || path.includes('//')) {
    throw new TypeError(`${OWNER}: path must be an absolute URL path ("/dashboard"), got ${JSON.stringify(path)}`);
  }
  const base = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  const root = base === '/' ? '' : base;
  const token = o.token;
  if (token !== undefined && (typeof token !== 'string' || token.length < 8)) throw new TypeError(`${OWNER}: token must be a string of at least 8 characters`);
  const maxViewers = integer(OWNER, 'maxViewers', o.maxViewers ?? dashboardDefaults.maxViewers, 1, 100_000);
  const title = o.title ?? dashboardDefaults.title;
  if (typeof title !== 'string') throw new TypeError(`${OWNER}: title must be a string`);
  const own = !isFeed(metrics);
  const feed: Feed = isFeed(metrics)
    ? metrics
    : new ProcessFeed(metrics, {
        ...(o.tickMs === undefined ? {} : { tickMs: o.tickMs }),
        ...(o.historyMs === undefined ? {} : { historyMs: o.historyMs }),
        ...(o.latencyWindowMs === undefined ? {} : { latencyWindowMs: o.latencyWindowMs }),
        ...(o.clock === undefined ? {} : { clock: o.clock }),
      });
  const controls = o.controls === undefined ? undefined : (checkOptions(`${OWNER}: controls`, o.controls, CONTROLS_KEYS) as DashboardControls);
  if (controls !== undefined) {
    if (controls === null || typeof controls !== 'object' || controls.store === null || typeof controls.store?.put !== 'function')
      throw new TypeError(`${OWNER}: controls.store must be a RuleStore`);
    if (controls.scope !== undefined) {
      try {
        checkScope(controls.scope);
      } catch (err) {
        throw new TypeError(`${OWNER}: controls.${(err as Error).message}`);
      }
    }
    if (feed.mode === 'process' && controls.scope === undefined)
      throw new TypeError(`${OWNER}: controls.scope is required for a process's dashboard (the service or instance its rules are for)`);
  }
  const actions = o.actions;
  if (actions !== undefined && (actions === null || typeof actions !== 'object' || typeof actions.list !== 'function' || typeof actions.run !== 'function')) {
    throw new TypeError(`${OWNER}: actions must be an object with list() and run(id)`);
  }
  const hello = JSON.stringify({
    mode: feed.mode,
    tickMs: feed.tickMs,
    title,
    controls: controls !== undefined,
    scope: controls?.scope ?? null,
    actions: actions !== undefined,
  });
  const viewers = new Viewers(feed, () => hello, maxViewers);
  const [pageHead, pageTail] = PAGE.replace('<title>bulwark</title>', `<title>${escapeHtml(title)}</title>`).split(BOOT_MARK) as [string, string];
  // The page with the feed's last frame and history in it, made at most once per tick however many pages open.
  let page: { latest: string | undefined; history: string; bytes: Buffer } | undefined;
  const pageNow = (): Buffer => {
    const latest = feed.latest();
    const history = feed.history();
    const made = page;
    if (made !== undefined && made.latest === latest && made.history === history) return made.bytes;
    let boot = `{"hello":${hello}`;
    if (latest !== undefined && hello.length + latest.length < MAX_EMBEDDED_BYTES) {
      boot += `,"frame":${latest}`;
      if (boot.length + history.length < MAX_EMBEDDED_BYTES) boot += `,"history":${history}`;
    }
    // JSON's only '<' are in strings, where \u003c reads the same: nothing in it can end the script element.
    const data = `<script type="application/json" id="boot">${boot.replace(/</g, '\\u003c')}}</script>`;
    page = { latest, history, bytes: Buffer.from(pageHead + data + pageTail, 'utf8') };
    return page.bytes;
  };

  const handler = (req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void): void => {
    const raw = (req as { originalUrl?: string }).originalUrl ?? req.url ?? '/';
    const q = raw.indexOf('?');
    const pathname = q < 0 ? raw : raw.slice(0, q);
    const query = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
    if (pathname !== root && !pathname.startsWith(`${root}/`)) {
      if (next !== undefined) next();
      else reply(res, 404, 'text/plain; charset=utf-8', 'not found\n');
      return;
    }
    const sub = pathname.slice(root.length);
    const method = req.method ?? 'GET';
    if (sub === '/controls/rules' && (method === 'GET' || method === 'HEAD')) {
      const d =
        controls === undefined ? { status: 403, message: 'the dashboard is read-only: it was started without controls' } : readAccess(req, query, token);
      if (d !== undefined) return deny(res, d);
      controls!.store.list().then(
        (l) => reply(res, 200, 'application/json; charset=utf-8', `${JSON.stringify(l)}\n`, method === 'HEAD'),
        (err: unknown) => deny(res, { status: 503, message: `the rules store did not answer: ${err instanceof Error ? err.message : String(err)}` }),
      );
      return;
    }
    if (sub.startsWith('/actions/')) {
      const d = controlAccess(req, query, token, actions !== undefined);
      if (d !== undefined) return deny(res, d);
      req.resume();
      let id: string;
      try {
        id = decodeURIComponent(sub.slice('/actions/'.length));
      } catch {
        id = '';
      }
      runAction(actions!, id).then((a) => reply(res, a.status, 'application/json; charset=utf-8', `${JSON.stringify(a.body)}\n`));
      return;
    }
    if (sub.startsWith('/controls/')) {
      const d = controlAccess(req, query, token, controls !== undefined);
      if (d !== undefined) return deny(res, d);
      readJson(req, 80 * 1024)
        .then((body) => control(controls!, sub.slice('/controls/'.length), body))
        .then(
          (a) => reply(res, a.status, 'application/json; charset=utf-8', `${JSON.stringify(a.body)}\n`),
          (err: unknown) => {
            const status = (err as { status?: number }).status ?? 503;
            deny(res, {
              status,
              message: status === 503 ? `the rules store did not answer: ${err instanceof Error ? err.message : String(err)}` : (err as Error).message,
            });
          },
        );
      return;
    }
    if (method !== 'GET' && method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      reply(res, 405, 'text/plain; charset=utf-8', 'method not allowed\n');
      return;
    }
    const d = readAccess(req, query, token);
    if (d !== undefined) {
      deny(res, d);
      return;
    }
    const head = method === 'HEAD';
    switch (sub) {
      case '':
        res.statusCode = 308;
        res.setHeader('location', `${root}/${q < 0 ? '' : raw.slice(q)}`);
        res.end();
        return;
      case '/':
        res.setHeader(
          'content-security-policy',
          "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        );
        res.setHeader('referrer-policy', 'no-referrer');
        reply(res, 200, 'text/html; charset=utf-8', pageNow(), head);
        return;
      case '/events':
        if (head) reply(res, 200, 'text/event-stream; charset=utf-8', '', true);
        else if (!viewers.add(res)) reply(res, 503, 'text/plain; charset=utf-8', `too many viewers (${viewers.max})\n`);
        return;
      case '/status.json': {
        const latest = feed.latest();
        if (latest === undefined) reply(res, 503, 'text/plain; charset=utf-8', 'no frame yet\n');
        else reply(res, 200, 'application/json; charset=utf-8', `${latest}\n`, head);
        return;
      }
      case '/actions.json':
        if (actions === undefined) reply(res, 404, 'text/plain; charset=utf-8', 'no actions\n');
        else reply(res, 200, 'application/json; charset=utf-8', `${actionsJson(actions)}\n`, head);
        return;
      case '/history.json':
        reply(res, 200, 'application/json; charset=utf-8', `${feed.history()}\n`, head);
        return;
      default:
        reply(res, 404, 'text/plain; charset=utf-8', 'not found\n');
    }
  };
  let closing: Promise<void> | undefined;
  return Object.assign(handler, {
    path: root === '' ? '/' : root,
    feed,
    viewers: () => viewers.size,
    close: (): Promise<void> => {
      closing ??= (async () => {
        viewers.close();
        if (own) await feed.close();
      })();
      return closing;
    },
  });
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** FastifyDashboardHost is the part of a Fastify instance the plugin uses. */
export interface FastifyDashboardHost {
  route(options: {
    method: string[];
    url: string;
    onRequest: (request: { raw: IncomingMessage }, reply: FastifyDashboardReply, done: () => void) => void;
    handler: () => Promise<void>;
  }): unknown;
  addHook(name: 'onClose', hook: (instance: unknown, done: () => void) => void): unknown;
}

/** FastifyDashboardReply is the part of a Fastify reply the plugin uses. */
export interface FastifyDashboardReply {
  readonly raw: ServerResponse;
  hijack(): unknown;
}

/**
 * fastifyDashboard answers a Fastify plugin serving the dashboard under `options.path`:
 * `app.register(fastifyDashboard(metrics, { path: '/dashboard' }))`. The request is handed over before
 * Fastify parses a body; the handler is closed with the Fastify instance.
 */
export function fastifyDashboard(
  metrics: FeedSource | Feed,
  options?: DashboardOptions,
): ((fastify: FastifyDashboardHost, opts: unknown, done: (err?: Error) => void) => void) & { handler: DashboardHandler } {
  const h = dashboardHandler(metrics, options);
  const plugin = (fastify: FastifyDashboardHost, _opts: unknown, done: (err?: Error) => void): void => {
    const onRequest = (request: { raw: IncomingMessage }, reply: FastifyDashboardReply): void => {
      reply.hijack();
      h(request.raw, reply.raw);
    };
    const route = { method: ['GET', 'HEAD', 'POST'], onRequest, handler: async (): Promise<void> => {} };
    fastify.route({ ...route, url: h.path });
    fastify.route({ ...route, url: `${h.path === '/' ? '' : h.path}/*` });
    fastify.addHook('onClose', (_i, next) => void h.close().then(next, next));
    done();
  };
  Object.assign(plugin, { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: 'bulwark-dashboard', handler: h });
  return plugin as typeof plugin & { handler: DashboardHandler };
}
