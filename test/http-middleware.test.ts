/**
 * The HTTP middleware on real loopback servers, once per framework (node:http, Express 4 and 5, Fastify 4 and 5):
 * 429 + RateLimit-* / Retry-After, 503 from the shedder and the breaker, keying, X-Forwarded-For,
 * fail-open, and the completion of the shedder's and breaker's tokens exactly once.
 * The shedder and breaker here are hand-written fakes of our own small interfaces (counting every
 * token call); test/http-guards.test.ts runs the real bulwark classes.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../src/core/clock.js';
import { BreakerOpenError, OverloadedError } from '../src/core/errors.js';
import { KeyedLimiter } from '../src/limit/keyed-limiter.js';
import { HttpGuard, fastifyGuard, type AdmissionToken, type HttpGuardOptions, type LimitDecision } from '../src/http/index.js';
import { fastifyMajors, frameworks, request, until, type Server } from './http-harness.js';

/** Tokens counts every completion; `calls` of a token must never exceed 1. */
class Tokens {
  readonly log: Array<{ id: number; outcome: 'success' | 'failure' | 'release'; err?: unknown }> = [];
  private next = 0;
  issued = 0;
  make(): AdmissionToken {
    const id = this.next++;
    this.issued++;
    return {
      success: () => void this.log.push({ id, outcome: 'success' }),
      failure: (err?: unknown) => void this.log.push({ id, outcome: 'failure', err }),
      release: () => void this.log.push({ id, outcome: 'release' }),
    };
  }
  outcomes(): string[] {
    return this.log.map((e) => e.outcome);
  }
  assertOnce(): void {
    const ids = this.log.map((e) => e.id);
    assert.equal(new Set(ids).size, ids.length, `a token was completed twice: ${JSON.stringify(ids)}`);
  }
}

class FakeShedder {
  overloaded = false;
  readonly tokens = new Tokens();
  admit(): AdmissionToken {
    if (this.overloaded) throw new OverloadedError();
    return this.tokens.make();
  }
}

class FakeBreaker {
  open = false;
  readonly tokens = new Tokens();
  admit(): AdmissionToken {
    if (this.open) throw new BreakerOpenError();
    return this.tokens.make();
  }
}

for (const fw of frameworks) {
  describe(`http middleware on ${fw.name}`, () => {
    const servers: Server[] = [];
    const start = async (g: HttpGuard | HttpGuardOptions): Promise<Server> => {
      const s = await fw.start(g);
      servers.push(s);
      return s;
    };
    after(async () => {
      for (const s of servers) await s.close();
    });

    it('answers 429 with Retry-After and RateLimit-* after the quota, and RateLimit-* on allowed responses', async () => {
      const clock = new ManualClock();
      const s = await start({ limiter: new KeyedLimiter({ rate: 1, burst: 3, clock }) });
      for (const remaining of [2, 1, 0]) {
        const r = await request(s.url);
        assert.equal(r.status, 200);
        assert.equal(r.body, 'ok');
        assert.equal(r.headers['ratelimit-limit'], '3');
        assert.equal(r.headers['ratelimit-remaining'], String(remaining));
        assert.ok(Number(r.headers['ratelimit-reset']) >= 1, `reset ${r.headers['ratelimit-reset']}`);
        assert.equal(r.headers['retry-after'], undefined);
      }
      const refused = await request(s.url);
      assert.equal(refused.status, 429);
      assert.equal(refused.headers['retry-after'], '1');
      assert.equal(refused.headers['ratelimit-limit'], '3');
      assert.equal(refused.headers['ratelimit-remaining'], '0');
      assert.equal(refused.headers['ratelimit-reset'], '3');
      assert.match(String(refused.headers['content-type']), /^application\/json/);
      assert.deepEqual(JSON.parse(refused.body), { error: { code: 'ERR_RATE_LIMITED', message: 'rate limited' } });
      assert.equal(s.handled(), 3);
      clock.advance(1000);
      assert.equal((await request(s.url)).status, 200);
      assert.equal((await request(s.url)).status, 429);
    });

    it('rounds Retry-After up to whole seconds and leaves it out when the request can never pass', async () => {
      const answers: LimitDecision[] = [
        { allowed: false, limit: 10, remaining: 0, retryAfterMs: 1001, resetMs: 2500 },
        { allowed: false, limit: 10, remaining: 0, retryAfterMs: 0.2, resetMs: 0 },
        { allowed: false, limit: 10, remaining: 0, retryAfterMs: Infinity, resetMs: 900 },
      ];
      const s = await start({ limiter: { decide: () => answers.shift()! } });
      const a = await request(s.url);
      assert.equal(a.status, 429);
      assert.equal(a.headers['retry-after'], '2');
      assert.equal(a.headers['ratelimit-reset'], '3');
      assert.equal((await request(s.url)).headers['retry-after'], '1');
      const never = await request(s.url);
      assert.equal(never.status, 429);
      assert.equal(never.headers['retry-after'], undefined);
      assert.equal(s.handled(), 0);
    });

    it('keys by a header (the IP when it is missing) and by a function', async () => {
      const clock = new ManualClock();
      const byHeader = await start({ limiter: new KeyedLimiter({ rate: 1, burst: 1, clock }), key: { header: 'X-Api-Key' } });
      assert.equal((await request(byHeader.url, { 'x-api-key': 'a' })).status, 200);
      assert.equal((await request(byHeader.url, { 'x-api-key': 'a' })).status, 429);
      assert.equal((await request(byHeader.url, { 'x-api-key': 'b' })).status, 200);
      assert.equal((await request(byHeader.url)).status, 200); // keyed by 127.0.0.1
      assert.equal((await request(byHeader.url)).status, 429);

      const seen: string[] = [];
      const limiter = new KeyedLimiter({ rate: 1, burst: 1, clock });
      const byFn = await start({
        limiter: { decide: (k: string) => (seen.push(k), limiter.decide(k)) },
        key: (req) => new URL(req.url ?? '/', 'http://x').searchParams.get('user'),
      });
      assert.equal((await request(`${byFn.url}?user=ann`)).status, 200);
      assert.equal((await request(`${byFn.url}?user=ann`)).status, 429);
      assert.equal((await request(`${byFn.url}?user=bob`)).status, 200);
      assert.equal((await request(byFn.url)).status, 200);
      assert.deepEqual(seen, ['ann', 'ann', 'bob', '127.0.0.1']);
    });

    it('reads X-Forwarded-For only with trustProxy, from the right', async () => {
      const clock = new ManualClock();
      const plain = await start({ limiter: new KeyedLimiter({ rate: 1, burst: 1, clock }) });
      assert.equal((await request(plain.url, { 'x-forwarded-for': '198.51.100.1' })).status, 200);
      assert.equal((await request(plain.url, { 'x-forwarded-for': '198.51.100.2' })).status, 429); // both are 127.0.0.1

      const seen: string[] = [];
      const limiter = new KeyedLimiter({ rate: 1, burst: 1, clock });
      const proxied = await start({ limiter: { decide: (k: string) => (seen.push(k), limiter.decide(k)) }, trustProxy: true });
      assert.equal((await request(proxied.url, { 'x-forwarded-for': '198.51.100.1' })).status, 200);
      assert.equal((await request(proxied.url, { 'x-forwarded-for': '198.51.100.2' })).status, 200);
      // A client forging the leftmost entry stays under its real address, the one the proxy appended.
      assert.equal((await request(proxied.url, { 'x-forwarded-for': '6.6.6.6, 198.51.100.1' })).status, 429);
      assert.deepEqual(seen, ['198.51.100.1', '198.51.100.2', '198.51.100.1']);
    });

    it('answers 503 with Retry-After while the shedder is overloaded, and releases its token on a 429', async () => {
      const shedder = new FakeShedder();
      const clock = new ManualClock();
      const g = new HttpGuard({ shedder, limiter: new KeyedLimiter({ rate: 1, burst: 1, clock }) });
      const s = await start(g);
      assert.equal((await request(s.url)).status, 200);
      assert.equal((await request(s.url)).status, 429);
      shedder.overloaded = true;
      const shed = await request(s.url);
      assert.equal(shed.status, 503);
      assert.equal(shed.headers['retry-after'], '1');
      assert.equal(shed.headers['ratelimit-limit'], undefined, 'the limiter is not asked for a shed request');
      assert.deepEqual(JSON.parse(shed.body), { error: { code: 'ERR_OVERLOADED', message: 'service overloaded' } });
      shedder.overloaded = false;
      clock.advance(1000);
      assert.equal((await request(s.url)).status, 200);
      await until(() => shedder.tokens.log.length === 3);
      assert.deepEqual(shedder.tokens.outcomes(), ['success', 'release', 'success'], 'a 429 releases the shed token');
      assert.equal(shedder.tokens.issued, 3);
      shedder.tokens.assertOnce();
      assert.deepEqual({ ...g.stats() }, { passed: 2, skipped: 0, limited: 1, shed: 1, broken: 0, failedOpen: 0, aborted: 0, faulted: 0 });
    });

    it('answers 503 while the breaker is open, counts 5xx and thrown errors as failures, and recovers', async () => {
      const breaker = new FakeBreaker();
      const s = await start({ breaker, breakerRetryAfterMs: 2500 });
      assert.equal((await request(s.url)).status, 200);
      assert.equal((await request(`${s.url}fail`)).status, 500);
      assert.equal((await request(`${s.url}throw`)).status, 500);
      assert.equal((await request(`${s.url}bad`)).status, 400);
      await until(() => breaker.tokens.log.length === 4);
      assert.deepEqual(breaker.tokens.outcomes(), ['success', 'failure', 'failure', 'success'], 'a 400 is the client fault');
      assert.equal((breaker.tokens.log[1]!.err as Error).message, 'response status 500');
      const thrown = breaker.tokens.log[2]!.err as Error;
      assert.equal(thrown.message, 'boom', 'the thrown error reaches the breaker');
      breaker.open = true;
      const open = await request(s.url);
      assert.equal(open.status, 503);
      assert.equal(open.headers['retry-after'], '3');
      assert.deepEqual(JSON.parse(open.body), { error: { code: 'ERR_BREAKER_OPEN', message: 'breaker is open' } });
      breaker.open = false;
      assert.equal((await request(s.url)).status, 200);
      await until(() => breaker.tokens.log.length === 5);
      assert.equal(breaker.tokens.issued, 5);
      breaker.tokens.assertOnce();
    });

    it('completes both tokens exactly once when the client goes away before the response', async () => {
      const shedder = new FakeShedder();
      const breaker = new FakeBreaker();
      const s = await start({ shedder, breaker });
      const ac = new AbortController();
      const aborted = request(`${s.url}slow`, {}, { signal: ac.signal });
      await until(() => s.handled() === 1); // the handler runs: now the client leaves
      ac.abort();
      await assert.rejects(aborted);
      await until(() => breaker.tokens.log.length === 1 && shedder.tokens.log.length === 1);
      assert.equal(breaker.tokens.log[0]!.outcome, 'failure');
      assert.equal((breaker.tokens.log[0]!.err as { code?: string }).code, 'ERR_ABORTED');
      assert.equal(shedder.tokens.log[0]!.outcome, 'failure');
      s.release(); // the handler answers late, on a closed connection
      assert.equal((await request(s.url)).status, 200);
      await until(() => breaker.tokens.log.length === 2);
      await new Promise((r) => setTimeout(r, 20));
      assert.equal(breaker.tokens.log.length, 2);
      assert.equal(shedder.tokens.log.length, 2);
      breaker.tokens.assertOnce();
      shedder.tokens.assertOnce();
    });

    it('lets requests through and reports the error when the limiter throws or rejects (fail open)', async () => {
      let garbage = false;
      const sync = new HttpGuard({
        limiter: {
          decide: () => {
            if (!garbage) throw new Error('limiter bug');
            return 'yes' as unknown as LimitDecision; // a broken limiter, not a decision
          },
        },
      });
      const async = new HttpGuard({ limiter: { takeDecision: () => Promise.reject(new Error('redis down')) } });
      const errors: string[] = [];
      for (const g of [sync, async]) g.onError((e) => errors.push(`${e.source}: ${(e.error as Error).message}`));
      const s = await start(sync);
      assert.equal((await request(s.url)).status, 200);
      garbage = true;
      assert.equal((await request(s.url)).status, 200);
      const a = await start(async);
      assert.equal((await request(a.url)).status, 200);
      assert.equal(errors[0], 'limiter: limiter bug');
      assert.match(errors[1]!, /^limiter: limiter answered "yes"/);
      assert.equal(errors[2], 'limiter: redis down');
      assert.equal(sync.stats().failedOpen, 2);
      assert.equal(async.stats().failedOpen, 1);
      assert.equal(s.handled() + a.handled(), 3);
    });

    it('waits for an async limiter, and skips the handler when the client left meanwhile', async () => {
      const clock = new ManualClock();
      const local = new KeyedLimiter({ rate: 1, burst: 1, clock });
      let gate: (() => void) | undefined;
      const shedder = new FakeShedder();
      const g = new HttpGuard({
        shedder,
        limiter: {
          takeDecision: async (k: string) => {
            if (gate === undefined) return local.decide(k);
            await new Promise<void>((r) => (gate = r));
            return local.decide(k);
          },
        },
      });
      const s = await start(g);
      const ok = await request(s.url);
      assert.equal(ok.status, 200);
      assert.equal(ok.headers['ratelimit-remaining'], '0');
      assert.equal((await request(s.url)).status, 429);

      gate = () => {};
      clock.advance(1000);
      const ac = new AbortController();
      const leaving = request(s.url, {}, { signal: ac.signal });
      await until(() => shedder.tokens.issued === 3); // inside the guard, waiting for the limiter
      ac.abort();
      await assert.rejects(leaving);
      await until(() => shedder.tokens.log.length === 3);
      gate();
      await until(() => g.stats().aborted === 1);
      assert.equal(s.handled(), 1, 'the handler never ran for the departed client');
      assert.deepEqual(shedder.tokens.outcomes(), ['success', 'release', 'release'], 'never handled: released, not failed');
      shedder.tokens.assertOnce();
    });
  });
}

for (const { name, fastify } of fastifyMajors) {
  describe(`http middleware: ${name} scopes`, () => {
    it('guards only the routes of the scope the plugin is registered in', async () => {
      const app = fastify();
      const limiter = new KeyedLimiter({ rate: 1, burst: 1, clock: new ManualClock() });
      await app.register(async (scope) => {
        await scope.register(fastifyGuard, { limiter });
        scope.get('/guarded', async () => 'guarded');
      });
      app.get('/open', async () => 'open');
      await app.listen({ port: 0, host: '127.0.0.1' });
      try {
        const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
        assert.equal((await request(`${url}/guarded`)).status, 200);
        assert.equal((await request(`${url}/guarded`)).status, 429);
        const open = await request(`${url}/open`);
        assert.equal(open.status, 200);
        assert.equal(open.headers['ratelimit-limit'], undefined);
      } finally {
        app.server.closeAllConnections();
        await app.close();
      }
    });

    it('fails registration with the TypeError of bad options', async () => {
      const app = fastify();
      await assert.rejects(async () => {
        await app.register(fastifyGuard, {});
        await app.ready();
      }, /at least one of limiter, shedder, breaker/);
      await app.close();
    });
  });
}

describe('http middleware: no framework is loaded by node:http users', () => {
  it('the bulwark/http module graph imports neither express nor fastify', async () => {
    const { readFileSync, readdirSync } = await import('node:fs');
    const dir = new URL('../src/http/', import.meta.url);
    for (const f of readdirSync(dir).filter((n) => n.endsWith('.ts') && !n.endsWith('.test.ts'))) {
      const src = readFileSync(new URL(f, dir), 'utf8');
      const runtimeImports = [...src.matchAll(/^import (?!type )[^;]*from '([^']+)'/gm)].map((m) => m[1]);
      for (const m of runtimeImports) assert.ok(!/^(express|fastify)/.test(m!), `${f} imports ${m} at run time`);
    }
  });
});
