/**
 * ResilientClient checks its nested options at construction and names them under itself: a table of bad
 * values, each expected to throw a TypeError or RangeError whose message starts with the client, the
 * option's path, and shows the value — never a client that constructs and then fails every call.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../core/clock.js';
import { MemoryRegistry } from '../registry/memory-registry.js';
import { ResilientClient, type ResilientClientOptions } from './resilient-client.js';

type Row = [label: string, options: Partial<ResilientClientOptions>, error: typeof TypeError | typeof RangeError, message: RegExp];

const rows: Row[] = [
  ['bulkhead.maxConcurrent 0', { bulkhead: { maxConcurrent: 0 } }, RangeError, /^ResilientClient: bulkhead\.maxConcurrent must be an integer .*got 0$/],
  ['bulkhead.maxQueued NaN', { bulkhead: { maxQueued: NaN } }, RangeError, /^ResilientClient: bulkhead\.maxQueued .*got NaN$/],
  ['bulkhead not an object', { bulkhead: 5 as never }, TypeError, /^ResilientClient: bulkhead must be an object, got 5$/],
  [
    "balancer.strategy 'p2cc'",
    { balancer: { strategy: 'p2cc' as never } },
    RangeError,
    /^ResilientClient: balancer\.strategy must be one of 'round-robin', .*'p2c'.*, a Picker or a factory, got "p2cc"$/,
  ],
  ['balancer.panicThreshold 2', { balancer: { panicThreshold: 2 } }, RangeError, /^ResilientClient: balancer\.panicThreshold must be .*got 2$/],
  [
    'balancer.outlier.consecutiveFailures 0',
    { balancer: { outlier: { consecutiveFailures: 0 } } },
    RangeError,
    /^ResilientClient: balancer\.outlier\.consecutiveFailures .*got 0$/,
  ],
  [
    'balancer.activeHealth.intervalMs -1',
    { balancer: { activeHealth: { intervalMs: -1 } } },
    RangeError,
    /^ResilientClient: balancer\.activeHealth\.intervalMs .*got -1$/,
  ],
  ['balancer not an object', { balancer: 'p2c' as never }, TypeError, /^ResilientClient: balancer must be an object, got "p2c"$/],
  ['retryBudget.percentCanRetry -1', { retryBudget: { percentCanRetry: -1 } }, RangeError, /^ResilientClient: retryBudget\.percentCanRetry .*got -1$/],
  ['retryBackoff.initialMs -5', { retryBackoff: { initialMs: -5 } }, RangeError, /^ResilientClient: retryBackoff\.initialMs .*got -5$/],
  [
    "retryBackoff.jitter 'some'",
    { retryBackoff: { jitter: 'some' as never } },
    RangeError,
    /^ResilientClient: retryBackoff\.jitter must be 'none', 'full' or 'decorrelated', got some$/,
  ],
  ['registryCache.ttlMs 0', { registryCache: { ttlMs: 0 } }, RangeError, /^ResilientClient: registryCache\.ttlMs .*got 0$/],
  ['http.maxPools 0', { http: { maxPools: 0 } }, RangeError, /^ResilientClient: http\.maxPools .*got 0$/],
];

describe('ResilientClient options', () => {
  for (const [label, options, error, message] of rows) {
    it(`refuses ${label} at construction, naming the client and the option`, () => {
      const registry = new MemoryRegistry();
      assert.throws(
        () => new ResilientClient({ registry, clock: new ManualClock(), ...options }),
        (err: Error) => {
          assert.equal(err.constructor, error, err.message);
          assert.match(err.message, message);
          return true;
        },
      );
    });
  }

  it('constructs with good nested options, and calls through them', async () => {
    const registry = new MemoryRegistry();
    await registry.register({ id: 'a', name: 'pay', address: '127.0.0.1:1' });
    const client = new ResilientClient({
      registry,
      balancer: { strategy: 'round-robin', outlier: { consecutiveFailures: 3 } },
      bulkhead: { maxConcurrent: 2 },
      retryBudget: { percentCanRetry: 0.5 },
      retryBackoff: { initialMs: 1 },
    });
    try {
      assert.equal(await client.call('pay', async (instance) => instance.id), 'a');
    } finally {
      await client.close();
      await registry.close();
    }
  });
});
