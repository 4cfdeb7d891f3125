/**
 * The Redis limiters against a real redis-server: the scripts' semantics, NOSCRIPT, expiry, bad
 * replies and refused scripts, and the rescue through SIGSTOP, SIGKILL and restart.
 * Margins are wide on purpose: the machine running this may be small and busy.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as tick } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { InvalidResponseError, TimeoutError } from '../src/core/errors.js';
import { RedisPeriodLimiter, RedisTokenLimiter } from '../src/limit/index.js';
import { onRedis, redisBinary, startRedis } from './support/redis.js';
import { lyingClient, useRedis } from './support/use-redis.js';
import { skipReason, waitFor } from './support/servers.js';

const skip = skipReason(redisBinary, 'redis-server');
process.on('warning', () => {}); // the rescue's warnings are expected here

describe('Redis limiters on a real Redis', { skip }, () => {
  const fx = useRedis();

  it('shares one bucket: burst at once, then the rate, time taken from Redis', async () => {
    const lim = new RedisTokenLimiter({ redis: fx.srv.url, prefix: 't:basic:', rate: 0.1, burst: 5, timeoutMs: 2_000 }); // a token per 10 s: no refill during the test
    try {
      await onRedis(lim);
      const answers = [];
      for (let i = 0; i < 7; i++) answers.push(await lim.take('k'));
      assert.deepEqual(answers, [true, true, true, true, true, false, false]);
      const d = await lim.takeDecision('k');
      assert.equal(d.allowed, false);
      assert.equal(d.limit, 5);
      assert.equal(d.remaining, 0);
      assert.ok(d.retryAfterMs > 9_000 && d.retryAfterMs <= 10_000, `retryAfterMs ${d.retryAfterMs}`);
      assert.ok(d.resetMs > 49_000 && d.resetMs <= 50_000, `resetMs ${d.resetMs}`);
      assert.equal(await lim.take('k', 6), false, 'n > burst is false without asking');
      await assert.rejects(lim.take('k', -1), RangeError);
      assert.equal(lim.mode, 'redis');
      assert.equal(lim.stats().rescueDecisions, 0);
    } finally {
      await lim.close();
    }
  });

  it('loads the script again after SCRIPT FLUSH (NOSCRIPT)', async () => {
    const lim = new RedisTokenLimiter({ redis: fx.srv.url, prefix: 't:noscript:', rate: 100, burst: 100, timeoutMs: 2_000 });
    try {
      await onRedis(lim);
      assert.equal(await lim.take('k'), true);
      await fx.admin.script('FLUSH');
      assert.equal(await lim.take('k'), true);
      assert.equal(lim.stats().failures, 0);
    } finally {
      await lim.close();
    }
  });

  it('never sets an expiry of 0, even when burst < rate / 2', async () => {
    const lim = new RedisTokenLimiter({ redis: fx.srv.url, prefix: 't:ttl:', rate: 1_000, burst: 1, timeoutMs: 2_000 });
    const per = new RedisPeriodLimiter({ redis: fx.srv.url, prefix: 'p:ttl:', periodMs: 1, quota: 5, timeoutMs: 2_000 });
    try {
      await onRedis(lim);
      await onRedis(per);
      assert.equal(await lim.take('k'), true);
      const ttl = await fx.admin.pttl('t:ttl:{k}');
      assert.ok(ttl > 0, `PTTL ${ttl}`);
      await per.take('k');
      const pttl = await fx.admin.pttl('p:ttl:{k}');
      assert.notEqual(pttl, -1, 'a 1 ms window key has an expiry (or has expired already)');
      // A count left without expiry (by hand, by an old version) gets one instead of living forever.
      const slow = new RedisPeriodLimiter({ redis: fx.srv.url, prefix: 'p:ttl:', periodMs: 60_000, quota: 5, timeoutMs: 2_000 });
      await onRedis(slow);
      await fx.admin.set('p:ttl:{stuck}', '1');
      assert.equal(await fx.admin.pttl('p:ttl:{stuck}'), -1);
      assert.equal(await slow.take('stuck'), true);
      const stuck = await fx.admin.pttl('p:ttl:{stuck}');
      assert.ok(stuck > 0 && stuck <= 60_000, `PTTL ${stuck}`);
      await slow.close();
    } finally {
      await lim.close();
      await per.close();
    }
  });

  it('never moves the stored time backwards: a bucket found ahead of now stays ahead', async () => {
    const lim = new RedisTokenLimiter({ redis: fx.srv.url, prefix: 't:fwd:', rate: 10, burst: 2, timeoutMs: 2_000 });
    try {
      await onRedis(lim);
      const [sec, usec] = (await fx.admin.time()) as unknown as [string, string];
      // As if a call had emptied the bucket 5 s into the future (go-zero #4072: late calls rewound it).
      // The state is seconds and ms within the second of Redis's clock: a zero byte and two
      // little-endian doubles (or, as earlier versions wrote it, the text "<seconds> <ms>").
      const state = (s: number, ms: number) => {
        const b = Buffer.alloc(17);
        b.writeDoubleLE(s, 1);
        b.writeDoubleLE(ms, 9);
        return b;
      };
      const ahead = state(Number(sec) + 5, Number(usec) / 1000);
      await fx.admin.set('t:fwd:{k}', ahead, 'PX', 60_000);
      assert.equal(await lim.take('k'), false);
      assert.deepEqual(await fx.admin.getBuffer('t:fwd:{k}'), ahead);
      const text = `${Number(sec) + 5} ${Number(usec) / 1000}`;
      await fx.admin.set('t:fwd:{t}', text, 'PX', 60_000);
      assert.equal(await lim.take('t'), false, 'a text state is read too');
      assert.equal(await fx.admin.get('t:fwd:{t}'), text);
      const asMs = (v: Buffer | null) => {
        assert.ok(v !== null && v.length === 17 && v[0] === 0, `a packed state: ${v?.toString('hex')}`);
        const s = v.readDoubleLE(1);
        const f = v.readDoubleLE(9);
        assert.ok(Number.isInteger(s) && f >= 0 && f < 1000, `ms within the second: ${f}`);
        return s * 1000 + f;
      };
      let last = 0;
      const fresh = new RedisTokenLimiter({ redis: fx.srv.url, prefix: 't:fwd2:', rate: 1_000, burst: 50, timeoutMs: 2_000 });
      await onRedis(fresh);
      for (let i = 0; i < 100; i++) {
        await fresh.take('k');
        const v = asMs(await fx.admin.getBuffer('t:fwd2:{k}'));
        assert.ok(v >= last, `${v} < ${last}`);
        last = v;
      }
      await fresh.close();
    } finally {
      await lim.close();
    }
  });

  it('counts a period quota per key with go-zero’s three answers', async () => {
    const per = new RedisPeriodLimiter({ redis: fx.srv.url, prefix: 'p:q:', periodMs: 60_000, quota: 3, timeoutMs: 2_000 });
    try {
      await onRedis(per);
      const answers = [];
      for (let i = 0; i < 4; i++) answers.push(await per.takeAnswer('u1'));
      assert.deepEqual(answers, ['allowed', 'allowed', 'hit-quota', 'over-quota']);
      assert.equal(await per.takeAnswer('u2'), 'allowed');
      const d = await per.takeDecision('u1');
      assert.equal(d.allowed, false);
      assert.equal(d.remaining, 0);
      assert.ok(d.retryAfterMs > 0 && d.retryAfterMs <= 60_000);
      await assert.rejects(per.takeAnswer('x'.repeat(1_025)), TypeError);
    } finally {
      await per.close();
    }
  });

  it('aligns period windows to Redis’s clock', async () => {
    const per = new RedisPeriodLimiter({ redis: fx.srv.url, prefix: 'p:align:', periodMs: 3_600_000, quota: 1, align: true, timeoutMs: 2_000 });
    try {
      await onRedis(per);
      const [sec] = (await fx.admin.time()) as unknown as [string, string];
      const left = 3_600_000 - ((Number(sec) * 1000) % 3_600_000);
      const d = await per.takeDecision('k');
      assert.equal(d.allowed, true);
      assert.ok(Math.abs(d.resetMs - left) < 2_000, `reset in ${d.resetMs}, expected ~${left}`);
    } finally {
      await per.close();
    }
  });

  // allow() expects the integer 1 or 0, decide() four integers: anything else is a failure, never a crash.
  const badReplies: [string, unknown, 'allow' | 'decide'][] = [
    ['strings', ['not', 'numbers'], 'allow'],
    ['an integer other than 0 or 1', 2, 'allow'],
    ['the four numbers, to allow()', [1, 0, 0, 0], 'allow'],
    ['one integer, to decide()', 1, 'decide'],
    ['three integers, to decide()', [1, 2, 3], 'decide'],
  ];
  for (const [what, reply, method] of badReplies) {
    it(`treats a reply of the wrong shape (${what}) as a Redis failure, never a crash`, async () => {
      const liar = await lyingClient(fx.srv.url, reply);
      const lim = new RedisTokenLimiter({ redis: liar.client, prefix: 't:shape:', rate: 10, burst: 2, probeIntervalMs: 60_000, timeoutMs: 2_000 });
      try {
        assert.equal(lim.mode, 'redis');
        const answer = method === 'allow' ? await lim.take('k') : (await lim.takeDecision('k')).allowed;
        assert.equal(answer, true, 'answered by the rescue limiter, which is full');
        assert.equal(lim.mode, 'rescue');
        assert.ok(lim.stats().cause instanceof InvalidResponseError);
      } finally {
        await lim.close();
        liar.disconnect();
      }
    });
  }

  it('goes to rescue, with the cause in stats(), when Redis refuses scripts', async () => {
    await fx.admin.call('ACL', 'SETUSER', 'noscripts', 'on', '>pw', '~*', '+@all', '-@scripting');
    const client = new Redis({ host: fx.srv.host, port: fx.srv.port, username: 'noscripts', password: 'pw', maxRetriesPerRequest: 1 });
    await client.ping();
    const per = new RedisPeriodLimiter({ redis: client, prefix: 'p:acl:', periodMs: 1_000, quota: 1, timeoutMs: 2_000 });
    try {
      assert.equal(per.mode, 'redis');
      assert.equal(await per.takeAnswer('k'), 'hit-quota');
      assert.equal(await per.takeAnswer('k'), 'over-quota', 'the rescue limiter counts');
      const cause = per.stats().cause;
      assert.ok(cause instanceof Error && /NOPERM/.test(cause.message), String(cause));
    } finally {
      await per.close();
      client.disconnect();
    }
  });

  it('stays on Redis when this process, not Redis, was too busy to read the replies in time', async () => {
    const lim = new RedisTokenLimiter({ redis: fx.srv.url, prefix: 't:busy:', rate: 1_000, burst: 1_000, timeoutMs: 50 });
    try {
      await onRedis(lim);
      assert.equal(await lim.take('k'), true);
      for (let round = 0; round < 3; round++) {
        const taken = [lim.take('k'), lim.take('k'), lim.take('k')];
        await tick(); // the calls are written (the socket is uncorked on the next tick)
        // Blocked for 6 × timeoutMs (as by a long GC pause): Redis answers at once, and the replies wait
        // unread while the deadline passes; the deadline's timer then runs before the poll reads them.
        for (const until = performance.now() + 300; performance.now() < until;);
        assert.deepEqual(await Promise.all(taken), [true, true, true]);
      }
      const s = lim.stats();
      assert.deepEqual([lim.mode, s.rescueDecisions, s.outages, s.redisDecisions], ['redis', 0, 0, 10]);
    } finally {
      await lim.close();
    }
  });

  it('rejects bad options with TypeError / RangeError naming the option', () => {
    const opts = { redis: fx.srv.url, prefix: 'k:', rate: 1 };
    for (const [o, err, name] of [
      [{ ...opts, rate: 0 }, RangeError, 'rate'],
      [{ ...opts, rate: Infinity }, RangeError, 'rate'],
      [{ ...opts, lease: { tokens: 0, maxMs: 10 } }, RangeError, 'lease.tokens'],
      [{ ...opts, lease: { tokens: 2, maxMs: 10 } }, RangeError, 'lease.tokens'], // more than burst (1)
      [{ ...opts, lease: { tokens: 1, maxMs: 0 } }, RangeError, 'lease.maxMs'],
      [{ ...opts, prefix: 'a{b}' }, TypeError, 'prefix'],
      [{ ...opts, prefix: undefined }, TypeError, 'prefix'],
      [{ ...opts, maxKeys: 0 }, RangeError, 'maxKeys'],
      [{ ...opts, burst: 0 }, RangeError, 'burst'],
      [{ ...opts, timeoutMs: 0 }, RangeError, 'timeoutMs'],
      [{ ...opts, instances: 0 }, RangeError, 'instances'],
      [{ ...opts, prefix: 'x:'.repeat(2_000) }, TypeError, 'prefix'],
      [{ ...opts, redis: 'localhost:6379' }, TypeError, 'redis'],
      [{ ...opts, redis: {} }, TypeError, 'redis'],
    ] as const) {
      assert.throws(
        () => new RedisTokenLimiter(o as never),
        (e: Error) => e instanceof err && e.message.includes(name),
        JSON.stringify(o).slice(0, 80),
      );
    }
    assert.throws(() => new RedisPeriodLimiter({ redis: fx.srv.url, prefix: 'k:', periodMs: 1_000, quota: 0 }), RangeError);
  });
});

describe('Redis limiter rescue (chaos)', { skip }, () => {
  it('answers within timeoutMs from rescue when Redis hangs (SIGSTOP), and returns when it answers', async () => {
    const srv = await startRedis();
    const lim = new RedisTokenLimiter({ redis: srv.url, prefix: 't:stop:', rate: 100, burst: 10, timeoutMs: 50 });
    try {
      await onRedis(lim);
      assert.equal(await lim.take('k'), true);
      const warnings: unknown[] = [];
      const onWarning = (w: Error & { code?: string }) => w.code === 'BULWARK_LIMIT_RESCUE' && warnings.push(w);
      process.on('warning', onWarning);
      srv.pause();
      const start = performance.now();
      const answers = await Promise.all(Array.from({ length: 10 }, () => lim.take('k')));
      const took = performance.now() - start;
      process.stdout.write(`# SIGSTOP: 10 pending decisions answered from rescue after ${took.toFixed(0)} ms (timeoutMs 50)\n`);
      assert.equal(answers.length, 10);
      assert.equal(lim.mode, 'rescue');
      assert.ok(lim.stats().cause instanceof TimeoutError);
      assert.ok(took < 50 + 1_000, `answered after ${took} ms`);
      // In rescue no caller waits on Redis: the answer comes before the next turn of the event loop.
      const first = await Promise.race([lim.take('k').then(() => 'limiter'), tick().then(() => 'event loop')]);
      assert.equal(first, 'limiter');
      for (let i = 0; i < 50; i++) await lim.take('k');
      await new Promise((r) => setTimeout(r, 300)); // probes keep failing: still one warning
      process.off('warning', onWarning);
      assert.equal(warnings.length, 1, 'one warning per outage');
      srv.resume();
      await waitFor('back on Redis', () => lim.mode === 'redis', 10_000);
      assert.equal(lim.stats().outages, 1);
    } finally {
      await lim.close();
      await srv.stop();
    }
  });

  it('survives SIGKILL: no caller sees an error, rescue admits rate / instances ±10 %, and comes back after restart', async () => {
    const srv = await startRedis();
    const rate = 400;
    const instances = 2;
    const lim = new RedisTokenLimiter({ redis: srv.url, prefix: 't:kill:', rate, burst: 200, instances, timeoutMs: 50 });
    const decisions: { t: number; ok: boolean }[] = []; // decisions made in rescue, in order
    let errors = 0;
    let stop = false;
    const caller = async () => {
      while (!stop) {
        try {
          const inRescue = lim.mode === 'rescue';
          const ok = await lim.take('k');
          if (inRescue && lim.mode === 'rescue') decisions.push({ t: performance.now(), ok });
        } catch {
          errors++;
        }
        await new Promise((r) => setTimeout(r, 1)); // up to ~8 000 calls/s in all: saturates, does not hog a busy box
      }
    };
    const callers = Array.from({ length: 8 }, caller);
    try {
      await onRedis(lim);
      await waitFor('callers deciding on Redis', () => lim.stats().redisDecisions >= 200, 10_000);
      await srv.kill();
      await waitFor('rescue', () => lim.mode === 'rescue', 5_000);
      await new Promise((r) => setTimeout(r, 2_500));
      // Between two refusals the rescue bucket was empty at both ends: what it admitted in between is
      // exactly its rate × the time between them (machine stalls cannot skew the count).
      const first = decisions.findIndex((d) => !d.ok);
      let last = decisions.length - 1;
      while (last > first && decisions[last]!.ok) last--;
      assert.ok(first >= 0 && last > first, 'the callers were refused in rescue');
      const span = decisions[last]!.t - decisions[first]!.t;
      assert.ok(span > 1_000, `measured over ${span} ms`);
      const n = decisions.slice(first, last).filter((d) => d.ok).length;
      const expected = ((rate / instances) * span) / 1000;
      process.stdout.write(`# rescue admitted ${n} in ${span.toFixed(0)} ms, expected ${expected.toFixed(1)}\n`);
      assert.ok(Math.abs(n - expected) <= expected * 0.1, `rescue admitted ${n}, expected ${expected.toFixed(0)} ±10 %`);
      assert.equal(errors, 0);
      assert.equal(lim.mode, 'rescue');

      await srv.restart();
      const restarted = performance.now();
      const onRedisBefore = lim.stats().redisDecisions;
      await waitFor('back on Redis', () => lim.mode === 'redis', 10_000);
      const back = performance.now() - restarted;
      process.stdout.write(`# back on Redis ${back.toFixed(0)} ms after the restart\n`);
      assert.ok(back < 1_500, `back on Redis after ${back} ms (target 300 ms; wide margin for a loaded machine)`);
      // the callers' decisions are Redis's again (those before the kill do not count)
      await waitFor('decisions on Redis after the restart', () => lim.stats().redisDecisions >= onRedisBefore + 50, 10_000);
      assert.equal(errors, 0);
    } finally {
      stop = true;
      await Promise.all(callers);
      await lim.close();
      await srv.stop();
    }
  });
});
