/**
 * bench/limit: the limiters against a bare clock read and rate-limiter-flexible, in the same run.
 *   npm run bench -- limit        (BENCH_RUNS, BENCH_MS, BENCH_FILTER: see harness.ts)
 * The parent starts one redis-server (test/support/redis.ts) that every Redis subject's child shares.
 */
import { performance } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis } from 'rate-limiter-flexible';
import { bench } from './harness.js';
import { KeyedLimiter, RedisTokenLimiter, TokenLimiter } from '../src/limit/index.js';
import { onRedis, startRedis, type RedisServer } from '../test/support/redis.js';

const isChild = process.argv.includes('--child');
let server: RedisServer | undefined;
if (!isChild) {
  server = await startRedis();
  process.env.BENCH_REDIS_URL = server.url;
}
const url = () => process.env.BENCH_REDIS_URL!;

/** scriptCall loads `lua` on `redis` and answers a call that runs it by EVALSHA on one key of its own. */
async function scriptCall(redis: Redis, lua: string): Promise<() => Promise<unknown>> {
  const sha = (await redis.script('LOAD', lua)) as string;
  const key = `floor:${process.pid}:${sha.slice(0, 8)}`;
  return () => redis.evalsha(sha, 1, key, '1', '2', '3');
}

/** A raw ioredis client running one Lua script by EVALSHA, one caller at a time. */
async function evalFloor(lua: string) {
  const redis = new Redis(url());
  return { op: await scriptCall(redis, lua), async: true, teardown: () => redis.disconnect() };
}

/**
 * The least work a token bucket that meets the spec must do in Redis — read Redis's TIME, read the
 * state, write it back with an expiry — with no arithmetic and a one-integer reply.
 */
const BUCKET_FLOOR = "local t = redis.call('TIME') local v = redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], t[2], 'PX', 60000) return 1";

const BIG = 1e12; // a rate / quota so large that every call is admitted
/** The Redis bucket's highest rate; with a BIG burst every call is admitted. */
const REDIS_RATE = 100_000;

try {
  await bench('limit: local token bucket, admit and reject', {
    baseline: 'performance.now()',
    subjects: {
      'performance.now()': () => ({ op: () => performance.now() }),
      'TokenLimiter.allow admit': () => {
        const l = new TokenLimiter({ rate: BIG, burst: BIG });
        return { op: () => l.allow() };
      },
      'TokenLimiter.allow reject': () => {
        const l = new TokenLimiter({ rate: 1e-9, burst: 1 });
        l.allow();
        return { op: () => l.allow() };
      },
      'TokenLimiter.decide admit': () => {
        const l = new TokenLimiter({ rate: BIG, burst: BIG });
        return { op: () => l.decide() };
      },
      'RateLimiterMemory.consume admit': () => {
        const r = new RateLimiterMemory({ points: BIG, duration: 1 });
        return { op: () => r.consume('k'), async: true };
      },
      'RateLimiterMemory.consume reject': () => {
        const r = new RateLimiterMemory({ points: 1, duration: 1_000_000 });
        void r.consume('k');
        return { op: () => r.consume('k').catch(() => undefined), async: true };
      },
    },
  });

  await bench('limit: Redis, one caller at a time', {
    baseline: 'ioredis PING',
    subjects: {
      'ioredis PING': async () => {
        const redis = new Redis(url());
        await redis.ping();
        return { op: () => redis.ping(), async: true, teardown: () => redis.disconnect() };
      },
      // Two floors, so that the script's cost in Redis is measured, not guessed: any script at all, and
      // the least a bucket that meets the spec must do (BUCKET_FLOOR).
      'EVALSHA return 1 (floor: any script)': async () => evalFloor('return 1'),
      'EVALSHA TIME+GET+SET (floor: a bucket)': async () => evalFloor(BUCKET_FLOOR),
      'RedisTokenLimiter.allow': async () => {
        const lim = new RedisTokenLimiter({ redis: url(), prefix: `b1:${process.pid}:`, rate: REDIS_RATE, burst: BIG, timeoutMs: 2_000 });
        await onRedis(lim);
        return {
          op: () => lim.take('k'),
          async: true,
          extra: () => ({ rescued: lim.stats().rescueDecisions }),
          teardown: () => lim.close(),
        };
      },
      'RateLimiterRedis.consume': async () => {
        const redis = new Redis(url());
        await redis.ping();
        const r = new RateLimiterRedis({ storeClient: redis, points: BIG, duration: 1, keyPrefix: `rlf1:${process.pid}` });
        return { op: () => r.consume('k'), async: true, teardown: () => redis.disconnect() };
      },
    },
  });

  await bench('limit: Redis, one caller at a time, interleaved in one process (robust to machine load)', {
    subjects: {
      'PING | floor | RedisTokenLimiter.allow | RateLimiterRedis.consume, rotating': async () => {
        const redis = new Redis(url());
        const floor = await scriptCall(redis, BUCKET_FLOOR);
        const rlfClient = new Redis(url());
        const rlf = new RateLimiterRedis({ storeClient: rlfClient, points: BIG, duration: 1, keyPrefix: `rlfi:${process.pid}` });
        const lim = new RedisTokenLimiter({ redis: url(), prefix: `bi:${process.pid}:`, rate: REDIS_RATE, burst: BIG, timeoutMs: 2_000 });
        await onRedis(lim);
        const calls = [
          () => redis.ping(),
          floor,
          () => lim.take('k'),
          () => rlf.consume('k'),
        ];
        const busy = [0, 0, 0, 0];
        let n = 0;
        return {
          async: true,
          batch: 25,
          // Each op: one call of each subject, the order rotating, each call timed on its own.
          op: async () => {
            const first = n++ % 4;
            for (let j = 0; j < 4; j++) {
              const s = (first + j) % 4;
              const t = performance.now();
              await calls[s]!();
              busy[s]! += performance.now() - t;
            }
          },
          extra: () => ({
            ping_us: (busy[0]! / n) * 1000,
            floor_vs_ping: busy[0]! / busy[1]!,
            ours_vs_ping: busy[0]! / busy[2]!,
            rateLimiterRedis_vs_ping: busy[0]! / busy[3]!,
            ours_vs_rateLimiterRedis: busy[3]! / busy[2]!,
            rescued: lim.stats().rescueDecisions,
          }),
          teardown: async () => {
            await lim.close();
            redis.disconnect();
            rlfClient.disconnect();
          },
        };
      },
    },
  });

  const C = 64;
  const many = (fn: () => Promise<unknown>) => () => Promise.all(Array.from({ length: C }, fn));
  await bench(`limit: Redis, ${C} concurrent callers (ns/op is per ${C} calls)`, {
    baseline: 'ioredis PING',
    subjects: {
      'ioredis PING': async () => {
        const redis = new Redis(url());
        await redis.ping();
        return { op: many(() => redis.ping()), async: true, batch: 10, teardown: () => redis.disconnect() };
      },
      'ioredis PING auto-pipelined': async () => {
        const redis = new Redis(url(), { enableAutoPipelining: true });
        await redis.ping();
        return { op: many(() => redis.ping()), async: true, batch: 10, teardown: () => redis.disconnect() };
      },
      'RedisTokenLimiter.allow': async () => {
        const lim = new RedisTokenLimiter({ redis: url(), prefix: `b64:${process.pid}:`, rate: REDIS_RATE, burst: BIG, timeoutMs: 2_000 });
        await onRedis(lim);
        return {
          op: many(() => lim.take('k')),
          async: true,
          batch: 10,
          extra: () => ({ rescued: lim.stats().rescueDecisions }),
          teardown: () => lim.close(),
        };
      },
      'RateLimiterRedis.consume': async () => {
        const redis = new Redis(url());
        await redis.ping();
        const r = new RateLimiterRedis({ storeClient: redis, points: BIG, duration: 1, keyPrefix: `rlf64:${process.pid}` });
        return { op: many(() => r.consume('k')), async: true, batch: 10, teardown: () => redis.disconnect() };
      },
      'RateLimiterRedis.consume auto-pipelined': async () => {
        const redis = new Redis(url(), { enableAutoPipelining: true });
        await redis.ping();
        const r = new RateLimiterRedis({ storeClient: redis, points: BIG, duration: 1, keyPrefix: `rlfap:${process.pid}` });
        return { op: many(() => r.consume('k')), async: true, batch: 10, teardown: () => redis.disconnect() };
      },
    },
  });

  const KEYS = 1_000_000;
  await bench(`limit: KeyedLimiter with ${KEYS / 1e6} M keys (maxKeys ${KEYS / 1e6} M)`, {
    baseline: 'Map.get',
    subjects: {
      'Map.get': () => {
        const keys = Array.from({ length: KEYS }, (_, i) => `user:${i}`);
        const m = new Map(keys.map((k) => [k, i32(k)]));
        let i = 0;
        let sum = 0; // used, so that the lookup is not optimised away
        return { op: () => (sum += m.get(keys[(i = (i + 7919) % KEYS)]!)!), extra: () => ({ sum: sum > 0 ? 1 : 0 }) };
      },
      'KeyedLimiter.allow': () => {
        setFlagsFromString('--expose_gc');
        const gc = runInNewContext('gc') as () => void;
        const keys = Array.from({ length: KEYS }, (_, i) => `user:${i}`);
        gc();
        const before = process.memoryUsage().heapUsed;
        const k = new KeyedLimiter({ rate: 10, burst: 20, maxKeys: KEYS });
        for (const key of keys) k.allow(key);
        gc();
        const perKey = (process.memoryUsage().heapUsed - before) / KEYS;
        let i = 0;
        return {
          op: () => k.allow(keys[(i = (i + 7919) % KEYS)]!),
          extra: () => {
            // Floods of new distinct keys (new strings, as from the network): size and heap stay bounded,
            // the same after 2 M new keys as after 4 M.
            const heapAfter = (n: number, from: number) => {
              for (let j = from; j < from + n; j++) k.allow(`flood:${j}`);
              gc();
              return Math.round(process.memoryUsage().heapUsed / 2 ** 20);
            };
            const after2M = heapAfter(2 * KEYS, 0);
            const after4M = heapAfter(2 * KEYS, 2 * KEYS);
            return {
              bytesPerKey: Math.round(perKey),
              heapMBAt1M: Math.round((before + perKey * KEYS) / 2 ** 20),
              heapMBAfter2MFlood: after2M,
              heapMBAfter4MFlood: after4M,
              size: k.size,
            };
          },
        };
      },
    },
  });
} finally {
  await server?.stop();
}

function i32(s: string): number {
  return s.length;
}
