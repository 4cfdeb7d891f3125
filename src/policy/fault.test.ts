import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { ManualClock } from '../core/clock.js';
import { AbortedError, ClosedError, FaultInjectedError } from '../core/errors.js';
import { seeded } from '../balancer/test-fixtures.js';
import { FaultInjector } from './fault.js';
import { Retry } from './retry.js';
import { CircuitBreaker } from '../breaker/circuit-breaker.js';
import type { FaultOptions } from './types.js';

describe('FaultInjector', () => {
  it('delays its share of 2 000 calls within ±5 points, each by exactly the delay', async () => {
    const clock = new ManualClock();
    const fault = new FaultInjector({ delay: { ms: 200, percent: 50 }, clock, random: seeded(1) });
    const done: number[] = [];
    const start = clock.now();
    const calls = Array.from({ length: 2_000 }, (_, i) => fault.execute(() => i).then(() => done.push(clock.now() - start)));
    await clock.advanceAsync(0);
    const immediate = done.length;
    await clock.advanceAsync(199);
    assert.equal(done.length, immediate, 'no delayed call ends before 200 ms');
    await clock.advanceAsync(1);
    await Promise.all(calls);
    const delayed = done.filter((ms) => ms === 200).length;
    assert.equal(delayed + immediate, 2_000, 'a call is either not delayed or delayed by exactly 200 ms');
    assert.ok(Math.abs(delayed / 2_000 - 0.5) <= 0.05, `delayed share ${delayed / 2_000}`);
    assert.deepEqual({ ...fault.stats(), remainingMs: 0 }, { calls: 2_000, delayed, aborted: 0, expired: false, remainingMs: 0 });
  });

  it('fails its share of calls with FaultInjectedError and its status, without running them', async () => {
    const fault = new FaultInjector({ abort: { percent: 30, status: 502, error: 'rehearsal' }, random: seeded(2) });
    let ran = 0;
    const results = await Promise.allSettled(Array.from({ length: 2_000 }, () => fault.execute(() => ran++)));
    const failed = results.filter((r) => r.status === 'rejected');
    assert.ok(Math.abs(failed.length / 2_000 - 0.3) <= 0.05, `aborted share ${failed.length / 2_000}`);
    assert.equal(ran, 2_000 - failed.length);
    const err = (failed[0] as PromiseRejectedResult).reason;
    assert.ok(err instanceof FaultInjectedError);
    assert.equal(err.code, 'ERR_FAULT_INJECTED');
    assert.equal(err.status, 502);
    assert.equal(err.message, 'rehearsal');
    assert.equal(fault.stats().aborted, failed.length);
    await fault.close();
  });

  it('expires on time (ttlMs after it was configured) and then passes calls straight through; reconfigure starts it again', async () => {
    const clock = new ManualClock();
    const fault = new FaultInjector({ abort: { percent: 100 }, ttlMs: 60_000, clock });
    clock.advance(59_999);
    await assert.rejects(
      fault.execute(() => 1),
      FaultInjectedError,
    );
    assert.equal(fault.stats().remainingMs, 1);
    clock.advance(1);
    assert.equal(fault.stats().expired, true);
    assert.equal(fault.active, false);
    assert.equal(await fault.execute(() => 1), 1);
    assert.equal(fault.stats().calls, 1, 'calls after expiry are not counted');
    fault.reconfigure({ ttlMs: 1_000 });
    assert.equal(fault.stats().expired, false);
    await assert.rejects(
      fault.execute(() => 1),
      FaultInjectedError,
    );
    clock.advance(1_000);
    assert.equal(await fault.execute(() => 2), 2);
    await fault.close();
    assert.equal(clock.pendingTimers, 0);
  });

  it('aborts a delay when the signal aborts: AbortedError, the task never runs, the timer is cleared', async () => {
    const clock = new ManualClock();
    const fault = new FaultInjector({ delay: { ms: 1_000, percent: 100 }, clock });
    const ac = new AbortController();
    let ran = false;
    const p = fault.execute(() => (ran = true), { signal: ac.signal });
    await clock.advanceAsync(500);
    const timers = clock.pendingTimers;
    ac.abort(new Error('caller gave up'));
    const err = await p.catch((e: unknown) => e);
    assert.ok(err instanceof AbortedError);
    assert.equal((err.cause as Error).message, 'caller gave up');
    assert.equal(clock.pendingTimers, timers - 1);
    await clock.advanceAsync(1_000);
    assert.equal(ran, false);
    await fault.close();
  });

  it('delays first, then draws the abort, as Envoy does', async () => {
    const clock = new ManualClock();
    const fault = new FaultInjector({ delay: { ms: 100, percent: 100 }, abort: { percent: 100 }, clock });
    let settledAt = -1;
    const p = fault.execute(() => 1).catch((e: unknown) => ((settledAt = clock.now()), e));
    await clock.advanceAsync(100);
    assert.ok((await p) instanceof FaultInjectedError);
    assert.equal(settledAt, 100);
  });

  it('reconfigure applies the whole change or nothing, options() round-trips, and clock/random cannot change', async () => {
    const clock = new ManualClock();
    const fault = new FaultInjector({ delay: { ms: 10, percent: 5 }, clock });
    const built = fault.options();
    assert.deepEqual(built, { delay: { ms: 10, percent: 5 }, abort: { percent: 0, status: 503, error: 'fault injected' }, ttlMs: 600_000 });
    assert.throws(
      () => fault.reconfigure({ abort: { percent: 50 }, ttlMs: 86_400_001 }),
      /FaultInjector: ttlMs must be a finite number in \[1, 86400000\], got 86400001/,
    );
    assert.deepEqual(fault.options(), built);
    fault.reconfigure({ abort: { percent: 50, status: 500 } });
    assert.deepEqual(fault.options().abort, { percent: 50, status: 500, error: 'fault injected' });
    assert.deepEqual(fault.options().delay, { ms: 10, percent: 5 }, 'what the change does not name stays');
    fault.reconfigure({ delay: undefined });
    assert.deepEqual(fault.options().delay, { ms: 0, percent: 0 });
    fault.reconfigure(built);
    assert.deepEqual(fault.options(), built);
    assert.throws(() => fault.reconfigure({ clock }), /FaultInjector: clock cannot change on a running FaultInjector/);
    assert.throws(() => fault.reconfigure({ random: Math.random }), TypeError);
    await fault.close();
    await assert.rejects(
      fault.execute(() => 1),
      ClosedError,
    );
  });

  it('refuses bad options with a TypeError or RangeError naming the option and value', () => {
    const table: [FaultOptions, ErrorConstructor, string][] = [
      [{ delay: { ms: 10, percent: 101 } }, RangeError, 'FaultInjector: delay.percent must be a finite number in [0, 100], got 101'],
      [{ delay: { ms: -1, percent: 1 } }, RangeError, 'FaultInjector: delay.ms must be a finite number in [0, 2147483647], got -1'],
      [{ delay: { percent: 1 } as never }, TypeError, 'FaultInjector: delay.ms must be a number, got undefined'],
      [{ abort: { percent: 10, status: 600 } }, RangeError, 'FaultInjector: abort.status must be an integer in [200, 599], got 600'],
      [{ abort: { percent: 10, error: 5 as never } }, TypeError, 'FaultInjector: abort.error must be a string, got 5'],
      [{ abort: { percent: 10, code: 1 } as never }, TypeError, 'FaultInjector: abort: code is not an option; the options are percent, status, error'],
      [{ ttlMs: 0 }, RangeError, 'FaultInjector: ttlMs must be a finite number in [1, 86400000], got 0'],
      [{ ttl: 5 } as never, TypeError, 'FaultInjector: ttl is not an option; the options are delay, abort, ttlMs, clock, random'],
    ];
    for (const [options, type, message] of table) {
      assert.throws(
        () => new FaultInjector(options),
        (err: unknown) => err instanceof type && (err as Error).message === message,
        message,
      );
    }
  });

  it('is a failure the guards outside count and retry: a breaker opens, Retry tries again', async () => {
    const fault = new FaultInjector({ abort: { percent: 100 } });
    const breaker = new CircuitBreaker({ minimumCalls: 3, failureRate: 0.5 });
    let attempts = 0;
    const retry = new Retry({ maxAttempts: 2 });
    for (let i = 0; i < 2; i++) {
      await retry
        .execute((signal) => breaker.execute((s) => fault.execute(() => 'ok', { signal: s }), { signal }).finally(() => attempts++))
        .catch(() => undefined);
    }
    assert.equal(attempts, 4, 'each call was tried twice');
    assert.equal(breaker.state, 'open');
    await fault.close();
    await breaker.close();
  });

  it('adds 200 ms to a call on the system clock: within [200, max(200 + the loop lag p99, a bare 200 ms timer beside it) + 10] ms', async () => {
    const fault = new FaultInjector({ delay: { ms: 200, percent: 100 } });
    const lag = monitorEventLoopDelay({ resolution: 1 });
    lag.enable();
    const added: number[] = [];
    const control: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      // A bare 200 ms timer beside it: what the loop's lag does to any timer of this turn (the p99 of
      // the lag samples misses a single stall of a loaded machine, which both timers then share).
      const bare = new Promise<number>((r) => setTimeout(() => r(performance.now() - t0), 200));
      await fault.execute(() => undefined);
      added.push(performance.now() - t0);
      control.push(await bare);
    }
    lag.disable();
    const p99 = lag.percentile(99) / 1e6;
    added.forEach((ms, i) => {
      const bound = Math.max(200 + p99, control[i]!) + 10;
      assert.ok(
        ms >= 199 && ms <= bound,
        `added ${ms.toFixed(1)} ms, bound [199, ${bound.toFixed(1)}] (lag p99 ${p99.toFixed(1)}, bare timer ${control[i]!.toFixed(1)})`,
      );
    });
    await fault.close();
  });
});
