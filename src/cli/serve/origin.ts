/**
 * The origin of a `bulwark serve` node: the getter its groups load keys with, behind the guards a slow
 * or failing origin needs, in the order docs/policy.md recommends, outermost first:
 *
 *   limiter (token bucket, an admission step) → Bulkhead → SreBreaker → Timeout → request
 *
 * The limiter has no `execute()`: it is asked first, and a refusal spends nothing else. The bulkhead is
 * outside the breaker, so a call queued for a slot holds no breaker permit and a full bulkhead (this
 * node's overload, not the origin's) never counts against the origin. The breaker counts only the
 * origin's own failures (5xx, timeouts, connection errors), not 404s (an answer, `isFailure`), nor a
 * caller that left. The timeout is innermost, so it bounds the request and not the wait for a slot
 * (the group's load timeout bounds both).
 *
 * A URL template (`--origin 'http://origin/items/{key}'`) is fetched with undici: 200 → the body, 404 →
 * `NotFoundError` (the group caches it for --negative-ttl), anything else → `LoadError`. A getter
 * module (`--getter ./getter.js`) answers a value, or null / undefined (or throws an error with code
 * `ERR_NOT_FOUND`) for "not found".
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Agent, request } from 'undici';
import { SreBreaker } from '../../breaker/index.js';
import {
  BreakerOpenError,
  BulkheadRejectedError,
  BulwarkError,
  LoadError,
  NotFoundError,
  RateLimitedError,
  TimeoutError,
  isBulwarkError,
} from '../../core/index.js';
import { TokenLimiter } from '../../limit/index.js';
import { Bulkhead, Timeout } from '../../policy/index.js';
import type { Getter, GetterResult } from '../../cache/index.js';
import { BodyTooLargeError, readCappedBody } from '../../internal/capped-body.js';
import type { ServeConfig } from './config.js';

/** Load is the guarded load of one key of one group. */
export type Load = (group: string, key: string, signal: AbortSignal) => Promise<GetterResult>;

/** ModuleGetter is what a `--getter` module exports (as default, or as `getter`). */
type ModuleGetter = (key: string, options: { signal: AbortSignal; group: string }) => unknown;

/** OriginStats are the origin guards' counters. */
export interface OriginStats {
  requests: number;
  notFound: number;
  failures: number;
  rateLimited: number;
  bulkheadRejected: number;
  breakerRejected: number;
  breaker: ReturnType<SreBreaker['stats']>;
  bulkhead: ReturnType<Bulkhead['stats']>;
}

/** MAX_ORIGIN_BYTES is the largest origin answer read (the cache keeps values up to 1 MiB). */
const MAX_ORIGIN_BYTES = 1 << 20;

/** Origin loads keys for a node's groups through the guards. */
export class Origin {
  readonly breaker = new SreBreaker({ name: 'origin' });
  readonly bulkhead: Bulkhead;
  private readonly timeout: Timeout;
  private readonly limiter: TokenLimiter | undefined;
  private readonly agent: Agent | undefined;
  private readonly counters = { requests: 0, notFound: 0, failures: 0, rateLimited: 0, bulkheadRejected: 0, breakerRejected: 0 };

  private constructor(
    config: ServeConfig,
    private readonly fetchOne: (group: string, key: string, signal: AbortSignal) => Promise<GetterResult>,
    agent: Agent | undefined,
  ) {
    this.bulkhead = new Bulkhead({ maxConcurrent: config.originConcurrency, maxQueued: config.originQueue });
    this.timeout = new Timeout({ timeoutMs: config.originTimeoutMs });
    this.limiter = config.originRate > 0 ? new TokenLimiter({ rate: config.originRate }) : undefined;
    this.agent = agent;
  }

  /** create builds the origin of `config`: an undici agent for a URL template, or the imported getter module. */
  static async create(config: ServeConfig): Promise<Origin> {
    if (config.origin.kind === 'url') {
      const template = config.origin.template;
      const agent = new Agent({
        connections: config.originConcurrency,
        keepAliveTimeout: 30_000,
        headersTimeout: config.originTimeoutMs,
        bodyTimeout: config.originTimeoutMs,
        connect: { timeout: config.originTimeoutMs },
      });
      return new Origin(config, (group, key, signal) => fetchUrl(agent, template, group, key, signal), agent);
    }
    const getter = await importGetter(config.origin.path);
    return new Origin(config, (group, key, signal) => callModule(getter, group, key, signal), undefined);
  }

  /** getter answers the Getter of one group. */
  getter(group: string): Getter {
    return (key, { signal }) => this.load(group, key, signal);
  }

  /** load runs one origin request for `key` under the guards. */
  async load(group: string, key: string, signal: AbortSignal): Promise<GetterResult> {
    if (this.limiter !== undefined && !this.limiter.allow()) {
      this.counters.rateLimited++;
      throw new RateLimitedError(`origin rate limit (${this.limiter.rate}/s) reached`);
    }
    try {
      // wrap(bulkhead, breaker, timeout), nested by hand only to hand the breaker its isFailure.
      return await this.bulkhead.execute(
        (s1) =>
          this.breaker.execute((s2) => this.timeout.execute((s3) => this.request(group, key, s3), { signal: s2 }), { signal: s1, isFailure: isOriginFailure }),
        { signal },
      );
    } catch (err) {
      if (err instanceof NotFoundError) this.counters.notFound++;
      else if (isBulwarkError(err, BulkheadRejectedError.code)) this.counters.bulkheadRejected++;
      else if (isBulwarkError(err, BreakerOpenError.code)) this.counters.breakerRejected++;
      else if (!signal.aborted || err instanceof TimeoutError) this.counters.failures++;
      throw err;
    }
  }

  private request(group: string, key: string, signal: AbortSignal): Promise<GetterResult> {
    this.counters.requests++;
    return this.fetchOne(group, key, signal);
  }

  /** track hands the origin's guards to `metrics` (named origin, origin-bulkhead, origin-timeout, origin-limiter). */
  track(metrics: { track(component: object, options?: { name?: string }): unknown }): void {
    metrics.track(this.breaker, { name: 'origin' });
    metrics.track(this.bulkhead, { name: 'origin-bulkhead' });
    metrics.track(this.timeout, { name: 'origin-timeout' });
    if (this.limiter !== undefined) metrics.track(this.limiter, { name: 'origin-limiter' });
  }

  /** stats answers the guards' counters. */
  stats(): OriginStats {
    return { ...this.counters, breaker: this.breaker.stats(), bulkhead: this.bulkhead.stats() };
  }

  /** close closes the origin's connections. */
  async close(): Promise<void> {
    await this.agent?.close();
  }
}

/** isOriginFailure tells the errors that count against the origin: all but "not found", which is an answer. */
function isOriginFailure(err: unknown): boolean {
  return !(err instanceof NotFoundError);
}

/** fetchUrl fetches `key` from the URL template. */
async function fetchUrl(agent: Agent, template: string, group: string, key: string, signal: AbortSignal): Promise<GetterResult> {
  const url = template.replaceAll('{key}', encodeURIComponent(key)).replaceAll('{group}', encodeURIComponent(group));
  let res;
  try {
    res = await request(url, { dispatcher: agent, signal, method: 'GET' });
  } catch (err) {
    if (signal.aborted) throw signal.reason ?? err;
    throw new LoadError(`origin ${new URL(url).host}: ${(err as Error).message}`, { cause: err });
  }
  if (res.statusCode === 404) {
    await res.body.dump();
    throw new NotFoundError(`origin has no ${JSON.stringify(key.slice(0, 64))}`);
  }
  if (res.statusCode !== 200) {
    await res.body.dump();
    throw new LoadError(`origin answered ${res.statusCode} for ${JSON.stringify(key.slice(0, 64))}`);
  }
  try {
    return await readCappedBody(res.body, MAX_ORIGIN_BYTES, res.headers['content-length']);
  } catch (err) {
    if (err instanceof BodyTooLargeError)
      throw new LoadError(`origin answer over ${MAX_ORIGIN_BYTES} bytes${err.declared === undefined ? '' : ` (${err.declared})`}`);
    if (signal.aborted) throw signal.reason ?? err;
    throw new LoadError(`origin body: ${(err as Error).message}`, { cause: err });
  }
}

async function importGetter(path: string): Promise<ModuleGetter> {
  const mod = (await import(pathToFileURL(resolve(path)).href)) as { default?: unknown; getter?: unknown };
  const f = typeof mod.default === 'function' ? mod.default : mod.getter;
  if (typeof f !== 'function') throw new TypeError(`--getter ${path}: the module must export a function (default export, or one named getter)`);
  return f as ModuleGetter;
}

async function callModule(getter: ModuleGetter, group: string, key: string, signal: AbortSignal): Promise<GetterResult> {
  let r: unknown;
  try {
    r = await getter(key, { signal, group });
  } catch (err) {
    if (err instanceof BulwarkError) throw err;
    if ((err as { code?: unknown } | null)?.code === 'ERR_NOT_FOUND')
      throw new NotFoundError(`getter has no ${JSON.stringify(key.slice(0, 64))}`, { cause: err });
    throw new LoadError(`getter: ${(err as Error)?.message ?? String(err)}`, { cause: err });
  }
  if (r === null || r === undefined) throw new NotFoundError(`getter has no ${JSON.stringify(key.slice(0, 64))}`);
  return r as GetterResult;
}
