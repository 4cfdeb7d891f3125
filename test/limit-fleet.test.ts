/**
 * Four processes share one RedisTokenLimiter key on a real Redis. The bucket refills one token per
 * 1 000 s, so what the fleet admits is a count, not a rate measured on wall time: exactly the burst,
 * however the processes interleave. With leases, the fleet stays within the documented bound
 * (`instances × lease.tokens` above the bucket), and reaches it when every process holds a full lease
 * as a new window opens. The same file is the worker: run with BULWARK_LIMIT_WORKER=1 it connects,
 * says it is ready, and runs the commands the parent sends on stdin.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { RedisTokenLimiter } from '../src/limit/index.js';
import { onRedis, redisBinary, startRedis } from './support/redis.js';
import { skipReason } from './support/servers.js';
import { tsNodeArgs } from './support/ts-node.js';

/** A token per 1 000 s: nothing refills while a test runs. */
const RATE = 0.001;
const BURST = 2_000;
const WORKERS = 4;
const CONCURRENCY = 8;
const LEASE = 50;

async function worker(): Promise<void> {
  const env = process.env;
  const lease = env.LIMIT_LEASE ? { tokens: Number(env.LIMIT_LEASE), maxMs: 600_000 } : undefined;
  const lim = new RedisTokenLimiter({ redis: env.REDIS_URL!, prefix: 'fleet:', rate: RATE, burst: BURST, timeoutMs: 5_000, ...(lease ? { lease } : {}) });
  await onRedis(lim, 30_000);
  const say = (line: string) => process.stdout.write(`@@${line}\n`);
  say('ready');
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === 'one') {
      say(`one ${await lim.take('shared')}`);
    } else if (line === 'drain') {
      // Every caller takes until its first refusal: with no refill, the bucket (and leases) are empty then.
      let admitted = 0;
      const loop = async () => {
        while (await lim.take('shared')) admitted++;
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, loop));
      say(`drained ${JSON.stringify({ admitted, rescue: lim.stats().rescueDecisions })}`);
    } else if (line === 'exit') {
      break;
    }
  }
  await lim.close();
}

interface Worker {
  ready: Promise<void>;
  /** send writes a command and answers the worker's next line. */
  send(command: string): Promise<string>;
  exited: Promise<void>;
}

function startWorker(env: NodeJS.ProcessEnv): Worker {
  const child = spawn(process.execPath, tsNodeArgs(fileURLToPath(import.meta.url)), {
    env: { ...process.env, ...env, BULWARK_LIMIT_WORKER: '1' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (b: Buffer) => (err += b));
  const waiters: ((line: string) => void)[] = [];
  const lines: string[] = [];
  createInterface({ input: child.stdout }).on('line', (l) => {
    if (!l.startsWith('@@')) return;
    const w = waiters.shift();
    if (w) w(l.slice(2));
    else lines.push(l.slice(2));
  });
  const next = () => new Promise<string>((resolve) => (lines.length > 0 ? resolve(lines.shift()!) : waiters.push(resolve)));
  const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
  const exited = new Promise<void>((resolve, reject) =>
    child.on('exit', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`worker exited ${code}\n${err}`));
    }),
  );
  exited.catch(() => {});
  const ready = Promise.race([next().then(() => undefined), exited]);
  return {
    ready,
    exited,
    send: (command) => {
      child.stdin.write(`${command}\n`);
      if (command === 'exit') child.stdin.end();
      return Promise.race([next(), exited.then(() => '')]);
    },
  };
}

async function fleet(env: NodeJS.ProcessEnv, run: (workers: Worker[]) => Promise<void>): Promise<void> {
  const workers = Array.from({ length: WORKERS }, () => startWorker(env));
  try {
    await Promise.all(workers.map((w) => w.ready));
    await run(workers);
  } finally {
    await Promise.all(workers.map((w) => w.send('exit')));
    await Promise.all(workers.map((w) => w.exited));
  }
}

const drained = (line: string): { admitted: number; rescue: number } => JSON.parse(line.replace(/^drained /, ''));

if (process.env.BULWARK_LIMIT_WORKER === '1') {
  await worker();
} else {
  describe('RedisTokenLimiter shared by a fleet', { skip: skipReason(redisBinary, 'redis-server') }, () => {
    it(`${WORKERS} processes × ${CONCURRENCY} callers on one key admit exactly the burst, however they interleave`, async () => {
      const srv = await startRedis();
      try {
        await fleet({ REDIS_URL: srv.url }, async (workers) => {
          const results = (await Promise.all(workers.map((w) => w.send('drain')))).map(drained);
          const admitted = results.reduce((a, r) => a + r.admitted, 0);
          process.stdout.write(`# fleet admitted ${admitted} of a burst of ${BURST}; per worker ${results.map((r) => r.admitted).join(', ')}\n`);
          assert.equal(
            results.reduce((a, r) => a + r.rescue, 0),
            0,
            'every decision was made by Redis',
          );
          assert.equal(admitted, BURST);
          assert.ok(
            results.every((r) => r.admitted > 0),
            'every worker got a share',
          );
        });
      } finally {
        await srv.stop();
      }
    });

    it(`with leases of ${LEASE}, admits at most instances × lease above the bucket in a window, and reaches that bound when every process holds a lease`, async () => {
      const srv = await startRedis();
      const admin = new Redis(srv.url);
      try {
        await fleet({ REDIS_URL: srv.url, LIMIT_LEASE: String(LEASE) }, async (workers) => {
          // Over the key's life: leases take tokens from the bucket before they are spent, so the
          // fleet admits exactly the burst.
          let results = (await Promise.all(workers.map((w) => w.send('drain')))).map(drained);
          assert.equal(
            results.reduce((a, r) => a + r.admitted, 0),
            BURST,
            'a drained fleet admitted exactly the burst',
          );
          // Worst case: every process holds a lease of LEASE − 1 tokens as a new window opens (the key
          // expires or, here, is deleted: a full bucket again).
          await admin.del('fleet:{shared}');
          for (const w of workers) assert.equal(await w.send('one'), 'one true');
          await admin.del('fleet:{shared}');
          results = (await Promise.all(workers.map((w) => w.send('drain')))).map(drained);
          const admitted = results.reduce((a, r) => a + r.admitted, 0);
          const bound = BURST + WORKERS * LEASE;
          process.stdout.write(`# with leases: the new window admitted ${admitted}; bucket ${BURST}, documented bound ${bound}\n`);
          assert.ok(admitted <= bound, `admitted ${admitted}, bound ${bound}`);
          assert.equal(admitted, BURST + WORKERS * (LEASE - 1), 'each process spent what its lease still held, then the new bucket');
          assert.equal(
            results.reduce((a, r) => a + r.rescue, 0),
            0,
          );
        });
      } finally {
        admin.disconnect();
        await srv.stop();
      }
    });
  });
}
