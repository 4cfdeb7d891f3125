/**
 * RedisTokenLimiter's batching against a real redis-server: single-token decisions of one tick go to
 * Redis as one script call that admits as many as the bucket holds, and the callers get exactly what
 * the same number of calls in a row would have got.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { InvalidResponseError } from '../src/core/errors.js';
import { RedisTokenLimiter, type LimitDecision } from '../src/limit/index.js';
import { TOKEN_SCRIPT } from '../src/limit/redis-scripts.js';
import { onRedis, redisBinary } from './support/redis.js';
import { lyingClient, scriptCalls, useRedis } from './support/use-redis.js';
import { skipReason } from './support/servers.js';

const skip = skipReason(redisBinary, 'redis-server');
process.on('warning', () => {}); // the rescue's warnings are expected here

describe('RedisTokenLimiter batching on a real Redis', { skip }, () => {
  const fx = useRedis();

  it('the script admits as many of a batch as the bucket holds: 5 tokens, batch of 8 → 5', async () => {
    // rate 0.1/s: a token per 10 s, no refill during the test.
    const reply = (await fx.admin.eval(TOKEN_SCRIPT, 1, 's:partial', '10000', '5', '8', '1')) as number[];
    assert.equal(reply[0], 5, `admitted ${String(reply)}`);
    assert.equal(reply[1], 0, 'remaining for the first refused');
    assert.ok(reply[2]! > 9_000 && reply[2]! <= 10_000, `retryAfterMs ${reply[2]}`);
    assert.ok(reply[3]! > 49_000 && reply[3]! <= 50_000, `resetMs ${reply[3]}`);
    assert.equal(reply[4], 0, 'a fresh bucket starts at now');
    const again = (await fx.admin.eval(TOKEN_SCRIPT, 1, 's:partial', '10000', '5', '3', '1')) as number[];
    assert.equal(again[0], 0, 'an empty bucket admits none');
    const single = (await fx.admin.eval(TOKEN_SCRIPT, 1, 's:partial', '10000', '5', '1')) as number[];
    assert.equal(single[0], 0, 'the plain call sees the same empty bucket');
  });

  it("the script's answer-only mode ('a', what allow() sends) decides exactly as the full reply does", async () => {
    // rate 0.1/s: a token per 10 s, no refill during the test; n = 2, 1, 3, 1, 1, 9 (> burst) against burst 5.
    for (const n of ['2', '1', '3', '1', '1', '9']) {
      const full = (await fx.admin.eval(TOKEN_SCRIPT, 1, 's:full', '10000', '5', n)) as number[];
      const only = await fx.admin.eval(TOKEN_SCRIPT, 1, 's:only', '10000', '5', n, 'a');
      assert.equal(only, full[0], `n = ${n}: full reply ${String(full)}, answer-only ${String(only)}`);
    }
    assert.deepEqual(
      [Number(await fx.admin.pttl('s:full')) > 0, Number(await fx.admin.pttl('s:only')) > 0],
      [true, true],
      'both modes store the bucket with an expiry',
    );
  });

  it('sends a lone caller at once, with nothing in flight, and the callers of its tick behind it as one script call', async () => {
    const client = new Redis(fx.srv.url);
    let sent = 0;
    const evalsha = client.evalsha.bind(client) as (...args: unknown[]) => Promise<unknown>;
    (client as unknown as { evalsha: (...args: unknown[]) => Promise<unknown> }).evalsha = (...args) => (sent++, evalsha(...args));
    await using lim = new RedisTokenLimiter({ redis: client, prefix: 't:lone:', rate: 0.1, burst: 5, timeoutMs: 2_000 });
    try {
      await onRedis(lim);
      const before = await scriptCalls(fx.admin);
      const lone = lim.take('k');
      assert.equal(sent, 1, 'the lone caller went out at once, not at the end of the tick');
      assert.equal(await lone, true);
      const first = lim.take('k');
      const rest = Array.from({ length: 4 }, () => lim.take('k'));
      assert.deepEqual(await Promise.all([first, ...rest]), [true, true, true, true, false]);
      assert.equal((await scriptCalls(fx.admin)) - before, 3, 'the lone caller, then one for the first of the tick and one for the four behind it');
      assert.equal(sent, 3);
    } finally {
      await lim.close();
      client.disconnect();
    }
  });

  it('sends one tick of callers behind a call in flight as one script call, and allows exactly the first 5 of 8', async () => {
    const lim = new RedisTokenLimiter({ redis: fx.srv.url, prefix: 't:batch8:', rate: 0.1, burst: 5, timeoutMs: 2_000 });
    try {
      await onRedis(lim);
      const before = await scriptCalls(fx.admin);
      const inFlight = lim.take('other'); // sent at once: the callers of this tick batch behind it
      const calls: Promise<boolean | LimitDecision>[] = [];
      for (let i = 0; i < 8; i++) calls.push(i % 2 === 0 ? lim.take('k') : lim.takeDecision('k'));
      const answers = (await Promise.all(calls)).map((a) => (typeof a === 'boolean' ? a : a.allowed));
      await inFlight;
      assert.deepEqual(answers, [true, true, true, true, true, false, false, false]);
      assert.equal((await scriptCalls(fx.admin)) - before, 2, 'one script call for the call in flight, one for the batch');
      const s = lim.stats();
      assert.equal(s.redisDecisions, 9, 'stats count decisions, not batches');
      assert.equal(s.rescueDecisions, 0);
      const d = (await calls[5]) as LimitDecision;
      assert.equal(d.remaining, 0);
      assert.ok(d.retryAfterMs > 9_000 && d.retryAfterMs <= 10_000, `retryAfterMs ${d.retryAfterMs}`);
      const first = (await calls[1]) as LimitDecision;
      assert.equal(first.allowed, true);
      assert.equal(first.remaining, 3, 'the second caller leaves 3 tokens');
    } finally {
      await lim.close();
    }
  });

  it('answers a batch like the same calls made one after another (property)', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 30 }), fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 4 }), async (burst, sizes) => {
        run++;
        // rate 0.001/s: a token per 1 000 s, so the time between the two runs adds no token.
        const batched = new RedisTokenLimiter({ redis: fx.admin, prefix: `p:b:${run}:`, rate: 0.001, burst, timeoutMs: 5_000 });
        try {
          for (const k of sizes) {
            const b: Promise<LimitDecision>[] = [];
            for (let i = 0; i < k; i++) b.push(batched.takeDecision('k'));
            const got = await Promise.all(b);
            for (let i = 0; i < k; i++) {
              // The plain one-token script call (no batch flag), as a limiter made before batching sent it.
              const r = (await fx.admin.eval(TOKEN_SCRIPT, 1, `p:s:${run}`, '1000000', String(burst), '1')) as number[];
              const want = { allowed: r[0] === 1, limit: burst, remaining: r[1]!, retryAfterMs: r[2]!, resetMs: r[3]! };
              const g = got[i]!;
              assert.equal(g.allowed, want.allowed, `caller ${i} of ${k}`);
              assert.equal(g.remaining, want.remaining, `remaining, caller ${i} of ${k}`);
              assert.equal(g.limit, want.limit);
              // The two keys are a few ms apart in time; a token is 1 000 000 ms.
              assert.ok(Math.abs(g.resetMs - want.resetMs) <= 5_000, `resetMs ${g.resetMs} vs ${want.resetMs}`);
              assert.ok(Math.abs(g.retryAfterMs - want.retryAfterMs) <= 5_000, `retryAfterMs ${g.retryAfterMs} vs ${want.retryAfterMs}`);
            }
          }
          assert.equal(batched.stats().rescueDecisions, 0);
        } finally {
          await batched.close();
        }
      }),
      { numRuns: 25 },
    );
  });

  it('decides each caller of a failed batch in process, in call order', async () => {
    const liar = await lyingClient(fx.srv.url, [1, 2, 3]);
    const lim = new RedisTokenLimiter({ redis: liar.client, prefix: 't:badbatch:', rate: 0.1, burst: 3, probeIntervalMs: 60_000, timeoutMs: 2_000 });
    try {
      assert.equal(lim.mode, 'redis');
      const answers = await Promise.all(Array.from({ length: 10 }, () => lim.take('k')));
      assert.deepEqual(answers, [true, true, true, false, false, false, false, false, false, false]);
      const s = lim.stats();
      assert.equal(s.mode, 'rescue');
      assert.ok(s.cause instanceof InvalidResponseError);
      assert.equal(s.rescueDecisions, 10);
      assert.equal(s.failures, 1, 'one Redis call failed');
    } finally {
      await lim.close();
      liar.disconnect();
    }
  });

  it('caps a batch at 1 024 callers: 1 500 callers are two script calls', async () => {
    const lim = new RedisTokenLimiter({ redis: fx.srv.url, prefix: 't:cap:', rate: 0.1, burst: 1_200, timeoutMs: 5_000 });
    try {
      await onRedis(lim);
      const before = await scriptCalls(fx.admin);
      const inFlight = lim.take('other'); // sent at once: the callers of this tick batch behind it
      const answers = await Promise.all(Array.from({ length: 1_500 }, () => lim.take('k')));
      await inFlight;
      assert.equal((await scriptCalls(fx.admin)) - before, 3, 'the call in flight, then 1 024 + 476');
      assert.equal(answers.filter(Boolean).length, 1_200);
      assert.ok(answers.slice(0, 1_200).every(Boolean), 'the first 1 200 callers are the ones allowed');
    } finally {
      await lim.close();
    }
  });
});
