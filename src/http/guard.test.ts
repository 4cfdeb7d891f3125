import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { BreakerOpenError, OverloadedError, RateLimitedError } from '../core/errors.js';
import { HttpGuard, type HttpGuardOptions } from './guard.js';
import { BREAKER_OPEN, LIMITED, OVERLOADED, seconds } from './refusal.js';
import { ManualClock } from '../core/clock.js';
import type { AdmissionToken, LimitDecision } from '../core/admission.js';
import { KeyedLimiter } from '../limit/keyed-limiter.js';
import type { HttpAsyncLimiter } from './types.js';

/** A response stand-in: headers, status, and 'close' emitted by the test. */
class FakeRes extends EventEmitter {
  headers: Record<string, unknown> = {};
  statusCode = 200;
  writableFinished = false;
  destroyed = false;
  setHeader(name: string, value: unknown): this {
    this.headers[name.toLowerCase()] = value;
    return this;
  }
  finish(status: number): void {
    this.statusCode = status;
    this.writableFinished = true;
    this.emit('close');
  }
}

function req(headers: Record<string, string> = {}, remoteAddress = '10.1.2.3'): IncomingMessage {
  return { headers, socket: { remoteAddress }, url: '/' } as unknown as IncomingMessage;
}

const asRes = (r: FakeRes) => r as unknown as ServerResponse;

function tokens(log: string[], name: string) {
  return {
    admit(): AdmissionToken {
      log.push(`${name}.admit`);
      return {
        success: () => void log.push(`${name}.success`),
        failure: () => void log.push(`${name}.failure`),
        release: () => void log.push(`${name}.release`),
      };
    },
  };
}

const allowAll: LimitDecision = { allowed: true, limit: 10, remaining: 9, retryAfterMs: 0, resetMs: 100 };

describe('HttpGuard', () => {
  it('checks shedder, then limiter, then breaker, and completes tokens when the response closes', () => {
    const log: string[] = [];
    const g = new HttpGuard({
      shedder: tokens(log, 'shed'),
      breaker: tokens(log, 'breaker'),
      limiter: { decide: (k) => (log.push(`limit(${k})`), allowAll) },
    });
    const res = new FakeRes();
    assert.equal(g.check(req(), asRes(res)), undefined);
    assert.deepEqual(log, ['shed.admit', 'limit(10.1.2.3)', 'breaker.admit']);
    res.finish(200);
    res.emit('close');
    assert.deepEqual(log.slice(3), ['breaker.success', 'shed.success']);
  });

  it('refuses in order and asks nothing past the refusal', () => {
    const log: string[] = [];
    let overloaded = true;
    let overQuota = true;
    const g = new HttpGuard({
      shedder: {
        admit: () => {
          if (overloaded) throw new OverloadedError();
          return tokens(log, 'shed').admit();
        },
      },
      limiter: { decide: () => (log.push('limit'), { ...allowAll, allowed: !overQuota }) },
      breaker: {
        admit: () => {
          log.push('breaker');
          throw new BreakerOpenError();
        },
      },
    });
    assert.equal(g.check(req(), asRes(new FakeRes())), OVERLOADED);
    assert.deepEqual(log, [], 'a shed request asks neither the limiter nor the breaker');

    overloaded = false;
    const limited = new FakeRes();
    assert.equal(g.check(req(), asRes(limited)), LIMITED);
    assert.deepEqual(log, ['shed.admit', 'limit', 'shed.release'], 'a 429 releases the shed token and never asks the breaker');
    limited.finish(429);
    assert.equal(log.length, 3, 'the close after a release completes nothing');

    overQuota = false;
    log.length = 0;
    const broken = new FakeRes();
    assert.equal(g.check(req(), asRes(broken)), BREAKER_OPEN);
    assert.deepEqual(log, ['shed.admit', 'limit', 'breaker', 'shed.release']);
    broken.finish(503);
    assert.equal(log.length, 4);
    assert.deepEqual(g.stats(), { passed: 0, skipped: 0, limited: 1, shed: 1, broken: 1, failedOpen: 0, aborted: 0, faulted: 0 });
  });

  it('answers the breaker refusal with the Retry-After the error carries', () => {
    const err = Object.assign(new BreakerOpenError(), { retryAfterMs: 4200 });
    const g = new HttpGuard({
      breaker: {
        admit: () => {
          throw err;
        },
      },
    });
    const res = new FakeRes();
    assert.equal(g.check(req(), asRes(res)), BREAKER_OPEN);
    assert.equal(res.headers['retry-after'], 5);
  });

  it('fails open when a shedder or breaker throws something that is not a BulwarkError', () => {
    const events: string[] = [];
    const g = new HttpGuard({
      shedder: {
        admit: () => {
          throw new TypeError('bug in shedder');
        },
      },
      breaker: {
        admit: () => {
          throw new RangeError('bug in breaker');
        },
      },
    });
    g.onError((e) => events.push(`${e.source}:${(e.error as Error).message}`));
    assert.equal(g.check(req(), asRes(new FakeRes())), undefined);
    assert.deepEqual(events, ['shedder:bug in shedder', 'breaker:bug in breaker']);
    assert.equal(g.stats().failedOpen, 2);
    assert.equal(g.stats().passed, 1);
  });

  it('fails open when the key function throws, and keys by IP when it answers nothing', () => {
    const keys: string[] = [];
    let mode: 'throw' | 'empty' = 'throw';
    const g = new HttpGuard({
      limiter: { decide: (k) => (keys.push(k), allowAll) },
      key: () => {
        if (mode === 'throw') throw new Error('no user');
        return '';
      },
    });
    const errors: string[] = [];
    g.onError((e) => errors.push(e.source));
    assert.equal(g.check(req(), asRes(new FakeRes())), undefined);
    mode = 'empty';
    assert.equal(g.check(req(), asRes(new FakeRes())), undefined);
    assert.deepEqual(errors, ['key']);
    assert.deepEqual(keys, ['10.1.2.3']);
  });

  it('lets requests that skip() picks bypass every check, and checks the rest', () => {
    const log: string[] = [];
    const g = new HttpGuard({
      shedder: tokens(log, 'shed'),
      skip: (r) => {
        if (r.url === '/boom') throw new Error('skip bug');
        return r.url === '/healthz';
      },
    });
    const errors: string[] = [];
    g.onError((e) => errors.push(e.source));
    const health = { ...req(), url: '/healthz' } as IncomingMessage;
    assert.equal(g.check(health, asRes(new FakeRes())), undefined);
    assert.deepEqual(log, []);
    assert.equal(g.check(req(), asRes(new FakeRes())), undefined);
    assert.equal(g.check({ ...req(), url: '/boom' } as IncomingMessage, asRes(new FakeRes())), undefined);
    assert.deepEqual(log, ['shed.admit', 'shed.admit'], 'a skip() that throws does not skip');
    assert.deepEqual(errors, ['skip']);
    assert.equal(g.stats().skipped, 1);
    assert.equal(g.stats().passed, 2);
  });

  it('completes the tokens of two guards on one response (an app-wide one and a route one), each once', () => {
    const log: string[] = [];
    const outer = new HttpGuard({ breaker: tokens(log, 'outer') });
    const inner = new HttpGuard({ shedder: tokens(log, 'inner.shed'), breaker: tokens(log, 'inner') });
    const res = new FakeRes();
    assert.equal(outer.check(req(), asRes(res)), undefined);
    assert.equal(inner.check(req(), asRes(res)), undefined);
    assert.equal(res.listenerCount('close'), 1);
    res.finish(500);
    res.emit('close');
    assert.deepEqual(log, ['outer.admit', 'inner.shed.admit', 'inner.admit', 'outer.failure', 'inner.failure', 'inner.shed.success']);
  });

  it('reports a token that throws on completion instead of throwing into the close listener', () => {
    const g = new HttpGuard({
      breaker: {
        admit: () => ({
          success: () => {
            throw new Error('token bug');
          },
          failure: () => undefined,
          release: () => undefined,
        }),
      },
    });
    const sources: string[] = [];
    g.onError((e) => sources.push(e.source));
    const res = new FakeRes();
    g.check(req(), asRes(res));
    res.finish(200);
    assert.deepEqual(sources, ['breaker']);
  });

  it('emits one process warning per source when nobody listens for errors', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error & { code?: string }) => void (w.code === 'BULWARK_HTTP_GUARD' && warnings.push(w.message));
    process.on('warning', onWarning);
    try {
      const g = new HttpGuard({
        limiter: {
          decide: () => {
            throw new Error('down');
          },
        },
      });
      for (let i = 0; i < 3; i++) g.check(req(), asRes(new FakeRes()));
      await new Promise((r) => setImmediate(r));
      assert.equal(warnings.length, 1);
      assert.match(warnings[0]!, /limiter failed \(down\)/);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('emits a reject event with status, code, Retry-After and key', () => {
    const g = new HttpGuard({ limiter: { decide: () => ({ allowed: false, limit: 5, remaining: 0, retryAfterMs: 2500, resetMs: 9000 }) } });
    const seen: unknown[] = [];
    g.onReject((e) => seen.push(e));
    const res = new FakeRes();
    assert.equal(g.check(req(), asRes(res)), LIMITED);
    assert.deepEqual(seen, [{ status: 429, code: RateLimitedError.code, retryAfterMs: 2500, key: '10.1.2.3' }]);
    assert.deepEqual(res.headers, { 'ratelimit-limit': 5, 'ratelimit-remaining': 0, 'ratelimit-reset': 9, 'retry-after': 3 });
  });

  it('leaves out header values that are not finite numbers, and all of them with rateLimitHeaders: false', () => {
    const d: LimitDecision = { allowed: true, limit: Infinity, remaining: NaN, retryAfterMs: 0, resetMs: -1 };
    const res = new FakeRes();
    new HttpGuard({ limiter: { decide: () => d } }).check(req(), asRes(res));
    assert.deepEqual(res.headers, {});
    const quiet = new FakeRes();
    new HttpGuard({ limiter: { decide: () => allowAll }, rateLimitHeaders: false }).check(req(), asRes(quiet));
    assert.deepEqual(quiet.headers, {});
  });

  it('bounds header keys: a 10 KiB API key reaches the limiter as a short hash', () => {
    const keys: string[] = [];
    const g = new HttpGuard({ limiter: { decide: (k) => (keys.push(k), allowAll) }, key: { header: 'X-Api-Key' } });
    g.check(req({ 'x-api-key': 'a'.repeat(10_240) }), asRes(new FakeRes()));
    assert.match(keys[0]!, /^sha256:/);
    assert.ok(keys[0]!.length < 64);
  });

  describe('the limiter seam: decide(key) or takeDecision(key), settled at construction', () => {
    it('answers synchronously with a decide() limiter: the real KeyedLimiter, no promise made', () => {
      const limiter = new KeyedLimiter({ rate: 1, burst: 2, clock: new ManualClock() });
      const g = new HttpGuard({ limiter });
      const verdicts = [0, 1, 2].map(() => g.check(req(), asRes(new FakeRes())));
      assert.deepEqual(verdicts, [undefined, undefined, LIMITED]);
      assert.deepEqual(g.stats(), { passed: 2, skipped: 0, limited: 1, shed: 0, broken: 0, failedOpen: 0, aborted: 0, faulted: 0 });
    });

    it('waits for a takeDecision() limiter, asked with the key first', async () => {
      const asked: unknown[][] = [];
      const limiter: HttpAsyncLimiter = {
        takeDecision: async (...args) => (asked.push(args), { ...allowAll, allowed: asked.length < 2 }),
      };
      const g = new HttpGuard({ limiter });
      const first = g.check(req(), asRes(new FakeRes()));
      assert.ok(first instanceof Promise, 'an asynchronous limiter makes check() answer a promise');
      assert.equal(await first, undefined);
      const res = new FakeRes();
      assert.equal(await g.check(req(), asRes(res)), LIMITED);
      assert.deepEqual(asked, [['10.1.2.3'], ['10.1.2.3']]);
      assert.equal(res.headers['ratelimit-remaining'], 9);
    });

    it('takes a Redis-shaped limiter as it is (take, takeDecision, close), without an adapter', async () => {
      const calls: string[] = [];
      class RedisShaped {
        take(key: string, n = 1): Promise<boolean> {
          calls.push(`take(${key},${n})`);
          return Promise.resolve(true);
        }
        takeDecision(key: string, n = 1): Promise<LimitDecision> {
          calls.push(`takeDecision(${key},${n})`);
          return Promise.resolve(allowAll);
        }
        async close(): Promise<void> {}
      }
      const g = new HttpGuard({ limiter: new RedisShaped() });
      assert.equal(await g.check(req(), asRes(new FakeRes())), undefined);
      assert.deepEqual(calls, ['takeDecision(10.1.2.3,1)']);
    });

    it('uses decide() when a limiter has both methods', () => {
      const calls: string[] = [];
      const g = new HttpGuard({
        limiter: {
          decide: () => (calls.push('decide'), allowAll),
          takeDecision: () => (calls.push('takeDecision'), Promise.resolve(allowAll)),
        },
      });
      assert.equal(g.check(req(), asRes(new FakeRes())), undefined);
      assert.deepEqual(calls, ['decide']);
    });

    it('fails open, naming takeDecision, when decide() answers a promise, and never leaves its rejection unhandled', async () => {
      const unhandled: unknown[] = [];
      const onUnhandled = (e: unknown) => void unhandled.push(e);
      process.on('unhandledRejection', onUnhandled);
      try {
        const g = new HttpGuard({ limiter: { decide: () => Promise.reject(new Error('redis down')) as never } });
        const errors: string[] = [];
        g.onError((e) => errors.push(`${e.source}: ${(e.error as Error).message}`));
        assert.equal(g.check(req(), asRes(new FakeRes())), undefined, 'still synchronous: the request goes on');
        await new Promise((r) => setImmediate(r));
        assert.deepEqual(errors, ['limiter: limiter.decide() answered a promise: an asynchronous limiter answers takeDecision(key)']);
        assert.deepEqual(unhandled, []);
        assert.equal(g.stats().failedOpen, 1);
      } finally {
        process.off('unhandledRejection', onUnhandled);
      }
    });

    it('fails open when takeDecision() throws instead of rejecting', async () => {
      const g = new HttpGuard({
        limiter: {
          takeDecision: () => {
            throw new Error('not connected');
          },
        },
      });
      const errors: string[] = [];
      g.onError((e) => errors.push((e.error as Error).message));
      assert.equal(g.check(req(), asRes(new FakeRes())), undefined);
      assert.deepEqual(errors, ['not connected']);
    });
  });

  const bad: Array<[string, HttpGuardOptions, RegExp]> = [
    ['no guard at all', {}, /at least one of limiter, shedder, breaker/],
    ['a limiter without decide or takeDecision', { limiter: { allow: () => true } as never }, /limiter must have a decide\(\) or a takeDecision\(\) method/],
    ['a limiter that is a number', { limiter: 5 as never }, /limiter must have a decide\(\) or a takeDecision\(\) method, got 5/],
    ['a shedder without admit', { shedder: { allow: () => true } as never }, /shedder must have an admit\(\) method/],
    ['a breaker without admit', { breaker: { allow: () => true } as never }, /breaker must have an admit\(\) method/],
    [
      'a header key without a name',
      { breaker: { admit: () => ({ success() {}, failure() {}, release() {} }) }, key: { header: 'bad header' } },
      /key must be 'ip'/,
    ],
    ['a key that is a number', { breaker: { admit: () => ({ success() {}, failure() {}, release() {} }) }, key: 7 as never }, /key must be 'ip'/],
    [
      'trustProxy -1',
      { breaker: { admit: () => ({ success() {}, failure() {}, release() {} }) }, trustProxy: -1 },
      /trustProxy must be an integer in \[0, 32\], got -1/,
    ],
    ['trustProxy 1.5', { breaker: { admit: () => ({ success() {}, failure() {}, release() {} }) }, trustProxy: 1.5 }, /trustProxy/],
    ['shedRetryAfterMs NaN', { breaker: { admit: () => ({ success() {}, failure() {}, release() {} }) }, shedRetryAfterMs: NaN }, /shedRetryAfterMs/],
    [
      'skip that is not a function',
      { breaker: { admit: () => ({ success() {}, failure() {}, release() {} }) }, skip: true as never },
      /skip must be a function/,
    ],
    [
      'rateLimitHeaders "yes"',
      { breaker: { admit: () => ({ success() {}, failure() {}, release() {} }) }, rateLimitHeaders: 'yes' as never },
      /rateLimitHeaders must be a boolean/,
    ],
  ];
  for (const [what, o, msg] of bad) {
    it(`rejects ${what} at construction, naming the option`, () => {
      assert.throws(
        () => new HttpGuard(o),
        (e: Error) => (e instanceof TypeError || e instanceof RangeError) && msg.test(e.message),
      );
    });
  }
});

describe('seconds', () => {
  const table: Array<[number, number]> = [
    [0, 0],
    [1, 1],
    [999, 1],
    [1000, 1],
    [1001, 2],
    [59_999.5, 60],
    [Infinity, -1],
    [NaN, -1],
    [-5, -1],
  ];
  for (const [ms, s] of table) it(`${ms} ms is ${s} s`, () => assert.equal(seconds(ms), s));
});
