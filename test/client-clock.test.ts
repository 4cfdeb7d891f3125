/**
 * ResilientClient sets every timer through its clock: the lookup that opens a service (its singleflight)
 * times out on the client's ManualClock, not on real time.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ResilientClient } from '../src/client/resilient-client.js';
import { ManualClock } from '../src/core/clock.js';
import { RegistryCache } from '../src/registry/registry-cache.js';
import { FakeRegistry, flush } from './support/registry-cache-fixtures.js';

describe('ResilientClient: every timer on its clock', () => {
  it('opening a service whose lookup never answers times out after 30 s of the client clock', async () => {
    const fake = new FakeRegistry();
    fake.hold = true; // the registry never answers
    // the cache runs on a clock of its own that never moves: only the client's singleflight can time out
    const cache = new RegistryCache(fake, { clock: new ManualClock(0), watch: false });
    const clock = new ManualClock(1_000_000);
    const client = new ResilientClient({ registry: cache, clock });
    let settled: unknown = 'pending';
    client
      .call('api', () => 'called')
      .then(
        (v) => (settled = v),
        (err: unknown) => (settled = err),
      );
    await flush();
    await clock.advanceAsync(29_999);
    assert.equal(settled, 'pending');
    await clock.advanceAsync(1);
    await flush();
    assert.ok((settled as unknown) instanceof Error && (settled as { code?: string }).code === 'ERR_TIMEOUT', `got ${String(settled)}`);
    fake.release();
    await client.close();
    await cache.close();
  });
});
