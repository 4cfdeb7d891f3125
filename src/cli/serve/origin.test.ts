import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BulkheadRejectedError, LoadError, NotFoundError, RateLimitedError } from '../../core/index.js';
import { readServeConfig, type ServeConfig } from './config.js';
import { Origin } from './origin.js';

/** The getter module a test's origin loads through: it hands each call to `globalThis.originTestLoad`. */
type TestLoad = (key: string, signal: AbortSignal) => Promise<unknown>;
const hooks = globalThis as { originTestLoad?: TestLoad };

async function origin(flags: string[], load: TestLoad): Promise<Origin> {
  const dir = mkdtempSync(join(tmpdir(), 'bulwark-origin-'));
  const file = join(dir, 'getter.mjs');
  writeFileSync(file, 'export default (key, { signal }) => globalThis.originTestLoad(key, signal);\n');
  hooks.originTestLoad = load;
  try {
    return await Origin.create(readServeConfig(['--getter', file, ...flags], {}) as ServeConfig);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('serve origin guards', () => {
  it('a 404 is an answer: counted as notFound, a success to the breaker', async () => {
    const o = await origin([], async () => null);
    await assert.rejects(o.load('g', 'k', new AbortController().signal), NotFoundError);
    const s = o.stats();
    assert.deepEqual([s.notFound, s.failures, s.breaker.failedCalls, s.breaker.successfulCalls], [1, 0, 0, 1]);
    await o.close();
  });

  it('a full bulkhead refuses at once, and the refusal never reaches the breaker', async () => {
    let release!: () => void;
    const o = await origin(['--origin-concurrency', '1', '--origin-queue', '0'], () => new Promise((r) => (release = () => r('v'))));
    const first = o.load('g', 'a', new AbortController().signal);
    await assert.rejects(o.load('g', 'b', new AbortController().signal), BulkheadRejectedError);
    release();
    assert.equal(await first, 'v');
    const s = o.stats();
    assert.deepEqual([s.requests, s.bulkheadRejected, s.failures, s.breaker.failedCalls, s.breaker.successfulCalls], [1, 1, 0, 0, 1]);
    await o.close();
  });

  it('the limiter is asked first: a refusal makes no request and is unknown to the breaker', async () => {
    const o = await origin(['--origin-rate', '1'], async () => 'v');
    assert.equal(await o.load('g', 'a', new AbortController().signal), 'v');
    await assert.rejects(o.load('g', 'b', new AbortController().signal), RateLimitedError);
    const s = o.stats();
    assert.deepEqual([s.requests, s.rateLimited, s.breaker.successfulCalls + s.breaker.failedCalls], [1, 1, 1]);
    await o.close();
  });

  it('an origin failure counts against the breaker; a caller that left does not', async () => {
    const o = await origin(
      [],
      (_key, signal) =>
        new Promise((_r, reject) => {
          if (_key === 'down') reject(new Error('connection refused'));
          signal.addEventListener('abort', () => reject(signal.reason));
        }),
    );
    await assert.rejects(o.load('g', 'down', new AbortController().signal), LoadError);
    const ac = new AbortController();
    const leaving = o.load('g', 'slow', ac.signal);
    ac.abort();
    await assert.rejects(leaving);
    const s = o.stats();
    assert.deepEqual([s.failures, s.breaker.failedCalls], [1, 1]);
    await o.close();
  });
});
