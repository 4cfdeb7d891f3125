/**
 * Four processes share one RedisTokenLimiter key on a real Redis and together admit the budget
 * (burst + rate × time) within 1 %. The same file is the worker: run with BULWARK_LIMIT_WORKER=1 it
 * connects, says it is ready, hammers the key between the wall times the parent sends on stdin, and
 * prints what it admitted.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { RedisTokenLimiter } from '../src/limit/index.js';
import { onRedis, redisBinary, startRedis } from './support/redis.js';
import { skipReason } from './support/servers.js';

const RATE = 500;
// Two seconds of tolerance: the fleet under-admits only if all workers together fall 2 s behind.
const BURST = 1_000;
const WORKERS = 4;
const CONCURRENCY = 8;
const RUN_MS = 3_000;

async function worker(): Promise<void> {
  const env = process.env;
  const lim = new RedisTokenLimiter({ redis: env.REDIS_URL!, key: env.LIMIT_KEY!, rate: RATE, burst: BURST, timeoutMs: 5_000 });
  await onRedis(lim, 30_000);
  // Tell the parent we are ready, and wait for its "go START END" (wall times) on stdin.
  process.stdout.write('@@ready\n');
  const go = await new Promise<string>((resolve) => {
    let buf = '';
    process.stdin.on('data', (b: Buffer) => {
      buf += b;
      if (buf.includes('\n')) resolve(buf);
    });
  });
  process.stdin.pause();
  const [startAt, endAt] = go.trim().split(' ').slice(1).map(Number) as [number, number];
  while (Date.now() < startAt) await new Promise((r) => setTimeout(r, Math.min(20, startAt - Date.now())));
  let admitted = 0;
  let first = Infinity;
  const loop = async () => {
    for (;;) {
      const t = Date.now();
      if (t >= endAt) return;
      if (t < first) first = t;
      if (await lim.allow()) admitted++;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, loop));
  const s = lim.stats();
  await lim.close();
  process.stdout.write(`@@${JSON.stringify({ admitted, first: Number.isFinite(first) ? first : endAt, rescue: s.rescueDecisions, late: first - startAt })}\n`);
}

interface Worker {
  ready: Promise<void>;
  go(startAt: number, endAt: number): void;
  result: Promise<{ admitted: number; first: number; rescue: number; late: number }>;
}

function startWorker(env: NodeJS.ProcessEnv): Worker {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url)], {
    env: { ...process.env, ...env, BULWARK_LIMIT_WORKER: '1' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  let onReady!: () => void;
  const ready = new Promise<void>((r) => (onReady = r));
  const result = new Promise<{ admitted: number; first: number; rescue: number; late: number }>((resolve, reject) => {
    child.stdout.on('data', (b: Buffer) => {
      out += b;
      if (out.includes('@@ready')) onReady();
    });
    child.stderr.on('data', (b: Buffer) => (err += b));
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      onReady(); // a worker that died is not waited for
      const line = out.split('\n').find((l) => l.startsWith('@@{'));
      if (code !== 0 || line === undefined) reject(new Error(`worker exited ${code}\n${out}\n${err}`));
      else resolve(JSON.parse(line.slice(2)));
    });
  });
  return { ready, result, go: (startAt, endAt) => child.stdin.end(`go ${startAt} ${endAt}\n`) };
}

if (process.env.BULWARK_LIMIT_WORKER === '1') {
  await worker();
} else {
  describe('RedisTokenLimiter shared by a fleet', { skip: skipReason(redisBinary, 'redis-server') }, () => {
    it(`${WORKERS} processes sharing one key admit burst + rate × time, ±1 %`, async () => {
      const srv = await startRedis();
      try {
        const env = { REDIS_URL: srv.url, LIMIT_KEY: 'fleet' };
        const workers = Array.from({ length: WORKERS }, () => startWorker(env));
        await Promise.all(workers.map((w) => w.ready)); // all connected: start them together
        const startAt = Date.now() + 200;
        const endAt = startAt + RUN_MS;
        for (const w of workers) w.go(startAt, endAt);
        const results = await Promise.all(workers.map((w) => w.result));
        const admitted = results.reduce((a, r) => a + r.admitted, 0);
        const first = Math.min(...results.map((r) => r.first));
        const expected = BURST + (RATE * (endAt - first)) / 1000;
        process.stdout.write(`# fleet admitted ${admitted}, budget ${expected.toFixed(0)}; per worker ${results.map((r) => r.admitted).join(', ')}\n`);
        assert.equal(results.reduce((a, r) => a + r.rescue, 0), 0, 'every decision was made by Redis');
        assert.ok(Math.abs(admitted - expected) <= expected * 0.01, `admitted ${admitted}, budget ${expected.toFixed(0)} ±1 %`);
        assert.ok(results.every((r) => r.admitted > 0), 'every worker got a share');
      } finally {
        await srv.stop();
      }
    });
  });
}
