/**
 * HttpGuard is the one core every adapter (node:http, Express, Fastify) shares: it decides whether a
 * request goes on, answers the refusal when it does not, and completes the shedder's and breaker's
 * tokens when the response is over.
 *
 * Order of the checks, and why:
 * 1. **Shedder.** Overload threatens every request in the process, and its check is the cheapest
 *    (no key, no lookup, no network): when the process is drowning, a refusal must cost the least
 *    work possible. It also keeps an overloaded process from paying a Redis round trip per request.
 * 2. **Limiter.** A per-client quota. It runs before the breaker so that the breaker's token is taken
 *    only for requests that will reach the handler: the breaker's statistics then describe the
 *    handler alone, and a half-open breaker never spends a probe on a request the limiter refuses.
 *    The price: a request the breaker then refuses has used one unit of its client's quota.
 * 3. **Breaker.** Taken last, completed by the handler's outcome: a response status ≥ 500 (a thrown
 *    error becomes one) or a connection closed before the response finished count as failures.
 *
 * A shedder token is completed with `success()` when the response finished with any status but 503,
 * `failure()` when it was a 503 or the client went away mid-handler, and `release()` when the request
 * was never handled (refused by a later check, or the client left while an asynchronous limiter
 * decided): as go-zero's shedding handler, only work actually done feeds the shedder's figures.
 *
 * The limiter is synchronous (`decide(key)`, an in-process limiter) or asynchronous (`takeDecision(key)`,
 * a Redis limiter); which one is settled at construction, so the synchronous path never makes or tests
 * for a promise and `check` answers a promise only with an asynchronous limiter.
 *
 * 4. **Fault** (`fault`, `setFault`: an operator's rehearsal, Envoy's fault filter). Last, after every
 *    admission: a request it delays waits, then goes on; one it fails is answered with the fault's
 *    status and `{ error: { code: 'ERR_FAULT_INJECTED', … } }` and completes the tokens as if the
 *    handler had answered it, so the breaker counts a 5xx as a failure and the rehearsal exercises it.
 *    A delay makes `check` answer a promise (as an asynchronous limiter does); a client that goes
 *    away during it is counted `aborted` and its tokens released.
 *
 * Fail open: a key function or limiter that throws (or rejects, or answers no decision), and a shedder
 * or breaker that throws anything but a BulwarkError (their refusal), let the request through and are
 * reported on `onError` — a broken protection must not take the service down with it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AdmissionToken, LimitDecision } from '../core/admission.js';
import { BulwarkError, FaultInjectedError, InvalidResponseError } from '../core/errors.js';
import { FaultInjector } from '../policy/fault.js';
import type { FaultOptions } from '../policy/types.js';
import { httpRefusedChannel } from '../core/diagnostics.js';
import { Emitter, type Disposer, type Listener } from '../core/events.js';
import { finite, fn, integer, options as optionsOf, showValue, within, type OptionKeys } from '../core/validate.js';
import { neverAborted } from '../core/guard.js';
import { boundKey, clientAddress } from './client-key.js';
import { Pass } from './pass.js';
import { BREAKER_OPEN, LIMITED, OVERLOADED, refusal, setRateLimitHeaders, setRetryAfter } from './refusal.js';
import type {
  GuardErrorEvent,
  GuardErrorSource,
  GuardRejectEvent,
  HttpAsyncLimiter,
  HttpBreaker,
  HttpGuardStats,
  HttpLimiter,
  HttpShedder,
  HttpSyncLimiter,
  KeyFn,
  KeyOption,
  Refusal,
  Verdict,
} from './types.js';
import type { MetricsDescription } from '../core/metrics-description.js';

/** HttpGuardOptions configures an HttpGuard; give at least one of limiter, shedder, breaker. */
export interface HttpGuardOptions {
  /**
   * A limit per key: synchronous (`decide(key)`, e.g. `KeyedLimiter`) or asynchronous
   * (`takeDecision(key)`, e.g. the Redis limiters); refusals answer 429. Defaults to none.
   */
  limiter?: HttpLimiter | undefined;
  /** What the limiter is keyed by: `'ip'`, `{ header }` or a function. Defaults to `'ip'`. */
  key?: KeyOption | undefined;
  /**
   * How many proxies in front of the server append to `X-Forwarded-For`: the client address is the
   * entry that many places from the right. `true` means 1. Set it only when clients cannot reach the
   * server except through those proxies. Defaults to false (the socket's peer address).
   */
  trustProxy?: boolean | number | undefined;
  /** Protects the process (`admit()` → token, or throws OverloadedError); refusals answer 503. Defaults to none. */
  shedder?: HttpShedder | undefined;
  /** A server-side breaker (`admit()` → token, or throws BreakerOpenError); refusals answer 503. Defaults to none. */
  breaker?: HttpBreaker | undefined;
  /** `Retry-After` of a shed request, unless the error carries `retryAfterMs`. Defaults to 1000 (go-zero's cool-off). */
  shedRetryAfterMs?: number | undefined;
  /** `Retry-After` of a request the breaker refused, unless the error carries `retryAfterMs`. Defaults to 1000. */
  breakerRetryAfterMs?: number | undefined;
  /** Whether allowed and limited responses carry the `RateLimit-*` headers. Defaults to true. */
  rateLimitHeaders?: boolean | undefined;
  /**
   * Requests for which it answers true bypass every check (health checks, metrics scrapes: a shed
   * liveness probe gets a busy pod restarted). Defaults to none.
   */
  skip?: ((req: IncomingMessage) => boolean) | undefined;
  /** A fault injected into the requests that pass (see `FaultInjector`: delay, abort with a status, ttlMs); `setFault` changes it live. Defaults to none. */
  fault?: FaultOptions | undefined;
}

/** httpGuardDefaults are the defaults of HttpGuardOptions. */
export const httpGuardDefaults = Object.freeze({
  key: 'ip' as KeyOption,
  trustProxy: false as boolean | number,
  shedRetryAfterMs: 1000,
  breakerRetryAfterMs: 1000,
  rateLimitHeaders: true,
});

const OWNER = 'HttpGuard';
type Counters = { -readonly [K in keyof HttpGuardStats]: HttpGuardStats[K] };
const MAX_PROXY_HOPS = 32;
function isThenable(v: unknown): v is PromiseLike<unknown> {
  return v !== null && typeof v === 'object' && typeof (v as { then?: unknown }).then === 'function';
}

function hasMethod(v: unknown, name: string): boolean {
  return v !== null && (typeof v === 'object' || typeof v === 'function') && typeof (v as Record<string, unknown>)[name] === 'function';
}

function isSyncLimiter(v: unknown): v is HttpSyncLimiter {
  return hasMethod(v, 'decide');
}

function isAsyncLimiter(v: unknown): v is HttpAsyncLimiter {
  return hasMethod(v, 'takeDecision');
}

function carriedRetryAfter(err: unknown, fallback: number): number {
  const ms = (err as { retryAfterMs?: unknown }).retryAfterMs;
  return typeof ms === 'number' && ms >= 0 && ms !== Infinity ? ms : fallback;
}

/** The keys of HttpGuardOptions, all of them: any other is refused (see `options`). */
const HTTP_GUARD_KEYS = {
  limiter: true,
  key: true,
  trustProxy: true,
  shedder: true,
  breaker: true,
  shedRetryAfterMs: true,
  breakerRetryAfterMs: true,
  rateLimitHeaders: true,
  skip: true,
  fault: true,
} as const satisfies OptionKeys<HttpGuardOptions>;

/**
 * HttpGuard decides, per request, between the handler, a 429 and a 503. It is the TokenSink of its passes
 * (`new Pass(this)` checks that), without an `implements` clause: its `complete` and `report` are internal (stripped),
 * and a published declaration claiming an interface whose methods were stripped does not compile.
 */
export class HttpGuard {
  /** The limiter when it answers synchronously (`decide`); at most one of the two is set. */
  private readonly syncLimiter: HttpSyncLimiter | undefined;
  /** The limiter when it answers with a promise (`takeDecision`). */
  private readonly asyncLimiter: HttpAsyncLimiter | undefined;
  private readonly shedder: HttpShedder | undefined;
  private readonly breaker: HttpBreaker | undefined;
  private readonly keyFn: KeyFn | undefined;
  private readonly keyHeader: string | undefined;
  private readonly hops: number;
  private readonly shedRetryAfterMs: number;
  private readonly breakerRetryAfterMs: number;
  private readonly headers: boolean;
  private readonly skip: ((req: IncomingMessage) => boolean) | undefined;
  private readonly errors = new Emitter<GuardErrorEvent>();
  private readonly rejects = new Emitter<GuardRejectEvent>();
  private readonly warned = new Set<GuardErrorSource>();
  private readonly counts: Counters = { passed: 0, skipped: 0, limited: 0, shed: 0, broken: 0, failedOpen: 0, aborted: 0, faulted: 0 };
  /** The fault injected into passing requests, or undefined. */
  private injector: FaultInjector | undefined;
  /** The refusal of the injector's aborts (built once per configuration). */
  private faultRefusal: Refusal | undefined;

  constructor(options: HttpGuardOptions) {
    const o = optionsOf(OWNER, options, HTTP_GUARD_KEYS);
    const limiter: unknown = o.limiter;
    if (limiter !== undefined && limiter !== null) {
      if (isSyncLimiter(limiter)) this.syncLimiter = limiter;
      else if (isAsyncLimiter(limiter)) this.asyncLimiter = limiter;
      else throw new TypeError(`${OWNER}: limiter must have a decide() or a takeDecision() method, got ${showValue(limiter)}`);
    }
    this.shedder = seam(o.shedder, 'shedder', 'admit');
    this.breaker = seam(o.breaker, 'breaker', 'admit');
    if (!this.syncLimiter && !this.asyncLimiter && !this.shedder && !this.breaker && o.fault === undefined) {
      throw new TypeError(`${OWNER}: give at least one of limiter, shedder, breaker, fault, got none`);
    }
    const key = o.key ?? httpGuardDefaults.key;
    if (typeof key === 'function') this.keyFn = key;
    else if (key !== 'ip') {
      const h = typeof key === 'object' && key !== null ? (key as { header?: unknown }).header : undefined;
      if (typeof h !== 'string' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(h)) {
        throw new TypeError(`${OWNER}: key must be 'ip', { header: <header name> } or a function, got ${showValue(key)}`);
      }
      this.keyHeader = h.toLowerCase();
    }
    const tp = o.trustProxy ?? httpGuardDefaults.trustProxy;
    this.hops = typeof tp === 'boolean' ? (tp ? 1 : 0) : integer(OWNER, 'trustProxy', tp, 0, MAX_PROXY_HOPS);
    this.shedRetryAfterMs = finite(OWNER, 'shedRetryAfterMs', o.shedRetryAfterMs ?? httpGuardDefaults.shedRetryAfterMs, 0);
    this.breakerRetryAfterMs = finite(OWNER, 'breakerRetryAfterMs', o.breakerRetryAfterMs ?? httpGuardDefaults.breakerRetryAfterMs, 0);
    const rh = o.rateLimitHeaders ?? httpGuardDefaults.rateLimitHeaders;
    if (typeof rh !== 'boolean') throw new TypeError(`${OWNER}: rateLimitHeaders must be a boolean, got ${showValue(rh)}`);
    this.headers = rh;
    this.skip = o.skip === undefined ? undefined : fn<(req: IncomingMessage) => boolean>(OWNER, 'skip', o.skip);
    if (o.fault !== undefined) this.setFault(o.fault); // last: its injector holds a timer
  }

  /**
   * setFault replaces the fault injected into the requests that pass with one made from `options`
   * (its ttl counting from now), or removes it (`undefined`). Bad options throw a TypeError or
   * RangeError naming them (`HttpGuard: fault.abort.status must be …`) and change nothing.
   */
  setFault(options: FaultOptions | undefined): void {
    const next = options === undefined ? undefined : within(OWNER, 'fault', 'FaultInjector', () => new FaultInjector(options));
    void this.injector?.close();
    this.injector = next;
    this.faultRefusal = undefined;
  }

  /** close stops the fault's expiry timer (the only timer the guard holds); the guard still checks requests, without a fault. Idempotent. */
  close(): Promise<void> {
    this.setFault(undefined);
    return Promise.resolve();
  }

  /** [Symbol.asyncDispose] closes the guard (`await using guard = new HttpGuard(…)`). */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** fault answers the injector of the fault set now (its stats, options and metrics), or undefined. */
  get fault(): FaultInjector | undefined {
    return this.injector;
  }

  /** onError subscribes to failures inside the guard (it failed open) or of a wrapped handler. */
  onError(listener: Listener<GuardErrorEvent>): Disposer {
    return this.errors.on(listener);
  }

  /** onReject subscribes to refused requests (429 and 503). */
  onReject(listener: Listener<GuardRejectEvent>): Disposer {
    return this.rejects.on(listener);
  }

  /**
   * describeMetrics answers the guard's family (`http_guard_requests_total` by result: passed, skipped,
   * limited, shed, broken, failed_open, aborted), read from its stats at scrape time.
   */
  describeMetrics(): MetricsDescription {
    const results: [string, keyof HttpGuardStats][] = [
      ['passed', 'passed'],
      ['skipped', 'skipped'],
      ['limited', 'limited'],
      ['shed', 'shed'],
      ['broken', 'broken'],
      ['failed_open', 'failedOpen'],
      ['aborted', 'aborted'],
      ['faulted', 'faulted'],
    ];
    return {
      kind: 'HttpGuard',
      families: [
        {
          name: 'http_guard_requests_total',
          type: 'counter',
          help: 'Requests an HttpGuard handled, by result: passed, skipped, limited (429), shed (503), broken (503), failed_open, aborted or faulted (an injected abort).',
          labelNames: ['result'],
        },
      ],
      collect: (emit) => {
        const s = this.stats();
        for (const [label, field] of results) emit('http_guard_requests_total', { result: label }, s[field] as number);
      },
    };
  }

  /** stats answers a snapshot of the counters. */
  stats(): HttpGuardStats {
    return { ...this.counts };
  }

  /** keyOf answers the limiter key of `req` (bounded to 256 characters; longer ones are hashed). */
  keyOf(req: IncomingMessage): string {
    if (this.keyFn !== undefined) {
      const k = this.keyFn(req);
      if (typeof k === 'string' && k !== '') return boundKey(k);
    } else if (this.keyHeader !== undefined) {
      const v = req.headers[this.keyHeader];
      const k = typeof v === 'string' ? v : Array.isArray(v) ? v.join(', ') : '';
      if (k !== '') return boundKey(k);
    }
    return clientAddress(req, this.hops);
  }

  /**
   * check runs the shedder, the limiter and the breaker (in that order) for `req`, sets the
   * `RateLimit-*` / `Retry-After` headers on `res`, and arranges for the tokens to be completed when
   * `res` closes. See Verdict for what to do with the answer; it is a promise only with an async limiter.
   */
  check(req: IncomingMessage, res: ServerResponse): Verdict | Promise<Verdict> {
    if (this.skip !== undefined && this.skipped(req)) return undefined;
    let pass: Pass | undefined;
    if (this.shedder !== undefined) {
      let token: AdmissionToken | undefined;
      try {
        token = this.shedder.admit();
      } catch (err) {
        if (err instanceof BulwarkError) return this.refuse(res, OVERLOADED, carriedRetryAfter(err, this.shedRetryAfterMs), undefined);
        this.failOpen('shedder', err);
      }
      if (token !== undefined) {
        pass = new Pass(this);
        pass.shed = token;
        pass.attach(res);
      }
    }
    if (this.syncLimiter !== undefined) {
      const key = this.keyOrNothing(req);
      if (key !== undefined) {
        let d: LimitDecision | undefined;
        try {
          d = this.syncLimiter.decide(key);
        } catch (err) {
          this.failOpen('limiter', err);
        }
        if (d !== undefined && this.decided(d, res, pass, key)) return LIMITED;
      }
    } else if (this.asyncLimiter !== undefined) {
      const key = this.keyOrNothing(req);
      if (key !== undefined) {
        let p: Promise<LimitDecision> | undefined;
        try {
          p = this.asyncLimiter.takeDecision(key);
        } catch (err) {
          this.failOpen('limiter', err);
        }
        if (p !== undefined) return this.settle(p, res, pass, key);
      }
    }
    return this.admit(res, pass);
  }

  /** keyOrNothing answers the key, or undefined when the key function threw (reported; the request goes on). */
  private keyOrNothing(req: IncomingMessage): string | undefined {
    try {
      return this.keyOf(req);
    } catch (err) {
      this.failOpen('key', err);
      return undefined;
    }
  }

  private skipped(req: IncomingMessage): boolean {
    let skip = false;
    try {
      skip = this.skip!(req) === true;
    } catch (err) {
      this.report('skip', err);
    }
    if (skip) this.counts.skipped++;
    return skip;
  }

  private async settle(p: Promise<LimitDecision>, res: ServerResponse, pass: Pass | undefined, key: string): Promise<Verdict> {
    let d: LimitDecision | undefined;
    try {
      d = await p;
    } catch (err) {
      this.failOpen('limiter', err);
    }
    if (res.destroyed || pass?.done === true) {
      pass?.release();
      this.counts.aborted++;
      return null;
    }
    if (d !== undefined && this.decided(d, res, pass, key)) return LIMITED;
    return this.admit(res, pass);
  }

  /** decided applies a limiter decision; true when the request is refused (429). */
  private decided(d: LimitDecision, res: ServerResponse, pass: Pass | undefined, key: string): boolean {
    let allowed: unknown;
    let retryAfterMs = 0;
    try {
      allowed = d !== null && typeof d === 'object' ? d.allowed : undefined;
      if (typeof allowed !== 'boolean') throw notADecision(d);
      if (this.headers) setRateLimitHeaders(res, d);
      if (!allowed) retryAfterMs = d.retryAfterMs;
    } catch (err) {
      this.failOpen('limiter', err);
      return false;
    }
    if (allowed) return false;
    pass?.release();
    this.refuse(res, LIMITED, retryAfterMs, key);
    return true;
  }

  private admit(res: ServerResponse, pass: Pass | undefined): Verdict | Promise<Verdict> {
    if (this.breaker !== undefined) {
      let token: AdmissionToken | undefined;
      try {
        token = this.breaker.admit();
      } catch (err) {
        if (err instanceof BulwarkError) {
          pass?.release();
          return this.refuse(res, BREAKER_OPEN, carriedRetryAfter(err, this.breakerRetryAfterMs), undefined);
        }
        this.failOpen('breaker', err);
      }
      if (token !== undefined) {
        if (pass === undefined) {
          pass = new Pass(this);
          pass.attach(res);
        }
        pass.breaker = token;
      }
    }
    const fault = this.injector;
    if (fault !== undefined && fault.active) return this.injectFault(fault, res, pass);
    if (pass !== undefined) pass.admitted = true;
    this.counts.passed++;
    return undefined;
  }

  /** injectFault applies the fault to an admitted request: its delay (a promise), then its abort or the handler. */
  private injectFault(fault: FaultInjector, res: ServerResponse, pass: Pass | undefined): Verdict | Promise<Verdict> {
    const ms = fault.drawDelay();
    if (ms < 0) return this.faultAbort(fault, pass);
    return fault.wait(ms, neverAborted).then(() => {
      if (res.destroyed || pass?.done === true) {
        pass?.release();
        this.counts.aborted++;
        return null;
      }
      return this.faultAbort(fault, pass);
    });
  }

  /** faultAbort draws the fault's abort: its refusal (the tokens complete on its status), else on to the handler. */
  private faultAbort(fault: FaultInjector, pass: Pass | undefined): Verdict {
    const err = fault.drawAbort();
    if (pass !== undefined) pass.admitted = true; // answered as the handler would have: the tokens judge the status
    if (err === undefined) {
      this.counts.passed++;
      return undefined;
    }
    const r = this.refusalOf(err);
    this.counts.faulted++;
    if (this.rejects.hasListeners || httpRefusedChannel.hasSubscribers) {
      const event: GuardRejectEvent = { status: r.status, code: r.code, retryAfterMs: undefined, key: undefined };
      if (httpRefusedChannel.hasSubscribers) httpRefusedChannel.publish(event);
      this.rejects.emit(event);
    }
    return r;
  }

  /** refusalOf answers the refusal of an injected abort, built once per fault configuration. */
  private refusalOf(err: FaultInjectedError): Refusal {
    const known = this.faultRefusal;
    if (known !== undefined && known.status === err.status && known.message === err.message) return known;
    return (this.faultRefusal = refusal(err.status ?? 503, FaultInjectedError.code, err.message));
  }

  private refuse(res: ServerResponse, r: Refusal, retryAfterMs: number, key: string | undefined): Refusal {
    const sent = setRetryAfter(res, retryAfterMs);
    if (r === LIMITED) this.counts.limited++;
    else if (r === OVERLOADED) this.counts.shed++;
    else this.counts.broken++;
    if (this.rejects.hasListeners || httpRefusedChannel.hasSubscribers) {
      const event: GuardRejectEvent = { status: r.status, code: r.code, retryAfterMs: sent ? retryAfterMs : undefined, key };
      if (httpRefusedChannel.hasSubscribers) httpRefusedChannel.publish(event);
      this.rejects.emit(event);
    }
    return r;
  }

  /**
   * complete ends one token: `true` → success(), `false` → failure(why), `undefined` → release() (the
   * request was never handled). A token that throws is reported, never thrown into a 'close' listener.
   * @internal
   */
  complete(source: 'shedder' | 'breaker', token: AdmissionToken, ok: boolean | undefined, why: unknown): void {
    try {
      if (ok === undefined) token.release();
      else if (ok) token.success();
      else token.failure(why);
    } catch (err) {
      this.report(source, err);
    }
  }

  private failOpen(source: GuardErrorSource, err: unknown): void {
    this.counts.failedOpen++;
    this.report(source, err);
  }

  /** report emits an error event; with nobody listening, the first of each source becomes a process warning. @internal */
  report(source: GuardErrorSource, error: unknown): void {
    if (this.errors.hasListeners) {
      this.errors.emit({ source, error });
      return;
    }
    if (this.warned.has(source)) return;
    this.warned.add(source);
    const what = error instanceof Error ? error.message : String(error);
    process.emitWarning(`bulwark/http: ${source} failed (${what}); subscribe with guard.onError() to see every failure`, {
      code: 'BULWARK_HTTP_GUARD',
    });
  }
}

function seam<T>(value: T | undefined, name: string, method: string): T | undefined {
  if (value === undefined || value === null) return undefined;
  if (!hasMethod(value, method)) throw new TypeError(`${OWNER}: ${name} must have an ${method}() method, got ${showValue(value)}`);
  return value;
}

/** notADecision is the error of a limiter answer that is not a LimitDecision (a promise from decide() included). */
function notADecision(d: unknown): InvalidResponseError {
  if (isThenable(d)) {
    // Whatever it settles to, nobody waits for it: keep its rejection from going unhandled.
    Promise.resolve(d).catch(() => undefined);
    return new InvalidResponseError('limiter.decide() answered a promise: an asynchronous limiter answers takeDecision(key)');
  }
  return new InvalidResponseError(`limiter answered ${showValue(d)}, not a decision`);
}

/** toGuard answers `g` when it is an HttpGuard, else a new HttpGuard of those options. */
export function toGuard(g: HttpGuard | HttpGuardOptions): HttpGuard {
  return g instanceof HttpGuard ? g : new HttpGuard(g);
}
