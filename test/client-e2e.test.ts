// End to end on loopback: the demo's three real HTTP services (healthy; 30 % failures; 200 ms slow)
// behind a MemoryRegistry, called through ResilientClient with retry, breakers and P2C.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryRegistry } from '../src/registry/memory-registry.js';
import { ResilientClient } from '../src/client/index.js';
import { startDemoServices } from '../src/cli/demo/services.js';

describe('ResilientClient end to end', () => {
  it('over 2 000 calls: ≥ 99.5 % succeed and the slow instance gets < 15 % of calls', async (t) => {
    const services = await startDemoServices();
    const registry = new MemoryRegistry();
    for (const s of services) await registry.register({ id: s.id, name: 'payments', address: s.address });
    // Defaults throughout: P2C, an SreBreaker per service and a CircuitBreaker per instance, retry on
    // another instance (3 attempts) within the retry budget. A generous timeout: the machine is shared.
    const client = new ResilientClient({ registry, timeoutMs: 5_000 });
    const perInstance = new Map<string, number>();
    // Attempts that reached an instance; a pick its breaker refused ('rejected') sent nothing.
    client.onAttempt((e) => {
      if (e.outcome !== 'rejected') perInstance.set(e.instance.id, (perInstance.get(e.instance.id) ?? 0) + 1);
    });
    const CALLS = 2_100;
    const CONCURRENCY = 4;
    let next = 0;
    let ok = 0;
    const errors: string[] = [];
    const deadline = Date.now() + 90_000; // bounded in time as well as in count
    try {
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < CALLS && Date.now() < deadline) {
            next++;
            try {
              const res = await client.fetch('http://payments/pay');
              if (res.status === 200 && ((await res.json()) as { ok?: boolean }).ok === true) ok++;
              else errors.push(`status ${res.status}`);
            } catch (err) {
              errors.push(String(err));
            }
          }
        }),
      );
      const calls = ok + errors.length;
      assert.ok(calls >= 2_000, `only ${calls} calls made in time`);
      const attempts = [...perInstance.values()].reduce((a, b) => a + b, 0);
      const slowShare = (perInstance.get('slow') ?? 0) / attempts;
      const served = Object.fromEntries(services.map((s) => [s.id, s.requests]));
      assert.ok(ok / calls >= 0.995, `success ${ok}/${calls}; errors: ${errors.slice(0, 5).join('; ')}`);
      assert.ok(slowShare < 0.15, `slow instance got ${(slowShare * 100).toFixed(1)} % of ${attempts} attempts (${JSON.stringify(served)})`);
      t.diagnostic(
        `calls ${calls}, ok ${ok}, slow share ${(slowShare * 100).toFixed(2)} %, served ${JSON.stringify(served)}, stats ${JSON.stringify(client.stats())}`,
      );
      // The flaky instance really failed requests (30 % of what it got), every failure was a failed
      // attempt, and retries on another instance saved those calls: no fallback was set, so a call
      // that succeeded was answered by an instance.
      const flaky = services.find((s) => s.id === 'flaky')!;
      const stats = client.stats();
      // P2C learns to avoid the flaky instance, so it may get few requests; each fails with p = 0.3.
      assert.ok(flaky.failures > 0, `the flaky instance never failed (${flaky.requests} requests)`);
      assert.ok(stats.failedAttempts >= flaky.failures, `${stats.failedAttempts} failed attempts < ${flaky.failures} failures`);
      assert.ok(stats.retries >= 1, 'no retry');
      assert.equal(stats.fallbacks, 0);
      assert.equal(stats.succeeded, ok, 'every successful call was counted as answered by an instance');
      assert.ok(stats.succeeded > calls - flaky.failures, 'retries saved calls whose first attempt failed');
      assert.equal(
        services.reduce((a, s) => a + s.requests, 0),
        attempts,
      );
    } finally {
      await client.close();
      await registry.close();
      await Promise.all(services.map((s) => s.close()));
    }
  });
});
