/**
 * A measured client hands its answered calls' durations over in batches (AnsweredBatch), and the
 * measure still hears of every duration once, in call order: a full batch at once, the rest when the
 * measures change or are read, an attempt of the same service after the calls before it, and the calls
 * of a service evicted while its batch was pending.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ResilientClient } from './resilient-client.js';
import { ANSWERED_BATCH } from './answered-batch.js';
import type { ClientMeasure } from './types.js';
import { MemoryRegistry } from '../registry/index.js';
import { ManualClock } from '../core/clock.js';

/** A measure that notes what it hears, in order: `answered svc 3 3` per answered call (attempt and call ms). */
function recorder(): { measure: ClientMeasure; heard: string[]; handed: number[] } {
  const heard: string[] = [];
  const handed: number[] = [];
  return {
    heard,
    handed,
    measure: {
      answered: (service, durations, n) => {
        handed.push(n / 2);
        for (let i = 0; i < n; i += 2) heard.push(`answered ${service} ${durations[i]} ${durations[i + 1]}`);
      },
      attempt: (service, failed, ms) => void heard.push(`attempt ${service} ${failed ? 'failed' : 'ok'} ${ms}`),
      call: (service, outcome, ms) => void heard.push(`call ${service} ${outcome} ${ms}`),
    },
  };
}

async function setup(options: { maxServices?: number } = {}) {
  const clock = new ManualClock();
  const registry = new MemoryRegistry();
  for (const name of ['svc', 'other']) await registry.register({ id: `${name}-1`, name, address: '127.0.0.1:9001' });
  const client = new ResilientClient({ registry, clock, timeoutMs: 0, ...options });
  const call = (service: string, ms: number, error?: Error) =>
    client.call(
      service,
      async () => {
        clock.advance(ms);
        if (error !== undefined) throw error;
        return 1;
      },
      { retry: false, isFailure: () => false },
    );
  return { client, call, close: async () => (await client.close(), await registry.close()) };
}

describe('AnsweredBatch', () => {
  it('hands a full batch over at once, and the rest when the measure is removed', async () => {
    const t = await setup();
    const r = recorder();
    const dispose = t.client.measure(r.measure);
    for (let i = 0; i < ANSWERED_BATCH + 3; i++) await t.call('svc', 1);
    assert.deepEqual(r.handed, [ANSWERED_BATCH], 'one batch, as it filled');
    dispose();
    assert.deepEqual(r.handed, [ANSWERED_BATCH, 3], 'the rest as the measure went');
    assert.equal(r.heard.length, ANSWERED_BATCH + 3);
    assert.ok(r.heard.every((h) => h === 'answered svc 1 1'));
    await t.call('svc', 1);
    assert.equal(r.heard.length, ANSWERED_BATCH + 3, 'nothing once removed');
    await t.close();
  });

  it('hands the calls before an attempt of the same service over before it, and a new measure hears only what came after it', async () => {
    const t = await setup();
    const r = recorder();
    t.client.measure(r.measure);
    await t.call('svc', 1);
    await t.call('other', 2);
    await t.call('svc', 3);
    // An attempt whose error is not a failure: measured on its own, after the calls before it.
    await t.call('svc', 4, new Error('not a failure')).catch(() => {});
    assert.deepEqual(r.heard, ['answered svc 1 1', 'answered svc 3 3', 'attempt svc ok 4', 'call svc failed 4']);
    // A second measure: what was noted so far goes to the first alone.
    await t.call('other', 5);
    const second = recorder();
    t.client.measure(second.measure);
    assert.deepEqual(r.heard.slice(4), ['answered other 2 2', 'answered other 5 5']);
    await t.call('svc', 6);
    assert.deepEqual(second.heard, []);
    await t.close();
  });

  it('hands over the calls of a service evicted while they were pending', async () => {
    const t = await setup({ maxServices: 1 });
    const r = recorder();
    const dispose = t.client.measure(r.measure);
    await t.call('svc', 1);
    await t.call('other', 2); // evicts svc's state, its batch pending
    dispose();
    assert.deepEqual(r.heard.sort(), ['answered other 2 2', 'answered svc 1 1']);
    await t.close();
  });
});
