/**
 * Four processes share one RedisTokenLimiter key on a real Redis and together admit the budget
 * (burst + rate × time) within 1 %. The same file is the worker: run with BULWARK_LIMIT_WORKER=1 it
 * hammers the key between START_AT and END_AT (wall time) and prints what it admitted.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { RedisTokenLimiter } from '../src/limit/index.js';
import { redisBinary, startRedis } from './support/redis.js';
import { skipReason, waitFor } from './support/servers.js';

const RATE = 1_000;
const BURST = 500; // half a second of tolerance for a worker that the machine stalls
const WORKERS = 4;
const CONCURRENCY = 8;
const RUN_MS = 3_000;

async function worker(): Promise<void> {
  const env = process.env;
  const lim = new RedisTokenLimiter({ redis: env.REDIS_URL!, key: env.LIMIT_KEY!, rate: RATE, burst: BURST, timeoutMs: 5_000 });
  await waitFor('Redis', () => lim.mode === 'redis', 20_000);
  const startAt = Number(env.START_AT);
  const endAt = Number(env.END_AT);
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
  process.stdout.write(`@@${JSON.stringify({ admitted, first, rescue: s.rescueDecisions, late: first - startAt })}\n`);
}

function runWorker(env: NodeJS.ProcessEnv): Promise<{ admitted: number; first: number; rescue: number; late: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url)], {
      env: { ...process.env, ...env, BULWARK_LIMIT_WORKER: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => (out += b));
    child.stderr.on('data', (b: Buffer) => (err += b));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      const line = out.split('\n').find((l) => l.startsWith('@@'));
      if (code !== 0 || line === undefined) reject(new Error(`worker exited ${code}\n${out}\n${err}`));
      else resolve(JSON.parse(line.slice(2)));
    });
  });
}

if (process.env.BULWARK_LIMIT_WORKER === '1') {
  await worker();
} else {
  describe('RedisTokenLimiter shared by a fleet', { skip: skipReason(redisBinary, 'redis-server') }, () => {
    it(`${WORKERS} processes sharing one key admit burst + rate × time, ±1 %`, async () => {
      const srv = await startRedis();
      try {
        const startAt = Date.now() + 4_000; // time for the workers to start (tsx is slow on a busy box)
        const endAt = startAt + RUN_MS;
        const env = { REDIS_URL: srv.url, LIMIT_KEY: 'fleet', START_AT: String(startAt), END_AT: String(endAt) };
        const results = await Promise.all(Array.from({ length: WORKERS }, () => runWorker(env)));
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
