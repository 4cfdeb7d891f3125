import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  AbortedError,
  BreakerOpenError,
  BulkheadRejectedError,
  ClosedError,
  NoInstanceError,
  NotFoundError,
  RetryBudgetExhaustedError,
  TimeoutError,
} from '../core/errors.js';
import { Balancer } from '../balancer/balancer.js';
import { seeded } from '../balancer/test-fixtures.js';
import { ManualClock } from '../core/clock.js';
import { BreakerGroup } from '../breaker/breaker-group.js';
import { CircuitBreaker } from '../breaker/circuit-breaker.js';
import { Fallback } from '../policy/fallback.js';
import { MemoryRegistry } from '../registry/memory-registry.js';
import type { ServiceInstance } from '../registry/types.js';
import { ResilientClient, type ResilientClientOptions } from './resilient-client.js';
import type { AttemptOutcome, ServiceBalancer } from './types.js';

/** FakeBalancer picks round robin, honours `exclude`, and records every pick and report. */
class FakeBalancer implements ServiceBalancer {
  picks = 0;
  readonly reports: { id: string; ok: boolean }[] = [];
  private next = 0;
  closed = false;
  constructor(public list: ServiceInstance[]) {}
  pick(_key?: string, exclude?: { has(id: string): boolean }): ServiceInstance {
    const n = this.list.length;
    if (n === 0) throw new NoInstanceError('empty');
    this.picks++;
    for (let k = 0; k < n; k++) {
      const inst = this.list[this.next++ % n]!;
      if (exclude === undefined || !exclude.has(inst.id)) return inst;
    }
    return this.list[0]!;
  }
  report(instance: ServiceInstance, outcome: AttemptOutcome): void {
    this.reports.push({ id: instance.id, ok: outcome.ok });
  }
  async close(): Promise<void> {
    this.closed = true;
  }
}

const instances = (...ids: string[]): ServiceInstance[] => ids.map((id, i) => ({ id, name: 'svc', address: `127.0.0.1:${9000 + i}` }));

async function setup(ids: string[], options: Partial<ResilientClientOptions> = {}) {
  const registry = new MemoryRegistry();
  const list = instances(...ids);
  for (const inst of list) await registry.register(inst);
  const balancer = new FakeBalancer(list);
  const client = new ResilientClient({ registry, balancerFactory: () => balancer, ...options });
  return {
    client,
    balancer,
    async close() {
      await client.close();
      await registry.close();
    },
  };
}

describe('ResilientClient.call', () => {
  it('answers a first call at once over a registry that never calls the optional onReady (no wait for its watch)', async () => {
    const mem = new MemoryRegistry({ sweepIntervalMs: 0 });
    await mem.register({ id: 'a', name: 'svc', address: '127.0.0.1:1' });
    // written to the documented interface: onReady is optional, and this registry never calls it
    const registry = {
      register: mem.register.bind(mem),
      deregister: mem.deregister.bind(mem),
      getService: mem.getService.bind(mem),
      listServices: mem.listServices.bind(mem),
      watch: (o?: Parameters<MemoryRegistry['watch']>[0]) => mem.watch({ ...o, onReady: undefined }),
      close: () => Promise.resolve(),
    };
    const clock = new ManualClock(); // never advanced: a wait for the watch on it would never end
    await using client = new ResilientClient({ registry, clock });
    let settled = false;
    const call = client.call('svc', (i) => i.id).finally(() => (settled = true));
    for (let i = 0; i < 50 && !settled; i++) await new Promise((r) => setImmediate(r));
    assert.equal(settled, true, 'the first call waited for the watch');
    assert.equal(await call, 'a');
    await mem.close();
  });

  it('answers the value the task returns for the picked instance', async () => {
    const t = await setup(['a', 'b']);
    assert.equal(await t.client.call('svc', (inst) => `hello from ${inst.id}`), 'hello from a');
    assert.deepEqual(t.balancer.reports, [{ id: 'a', ok: true }]);
    assert.equal(t.client.stats().succeeded, 1);
    await t.close();
  });

  it('retries a failed attempt on another instance', async () => {
    const t = await setup(['a', 'b', 'c']);
    const seen: string[] = [];
    const v = await t.client.call('svc', (inst) => {
      seen.push(inst.id);
      if (inst.id !== 'c') throw new Error(`${inst.id} down`);
      return 42;
    });
    assert.equal(v, 42);
    assert.deepEqual(seen, ['a', 'b', 'c']);
    assert.deepEqual(
      t.balancer.reports.map((r) => r.ok),
      [false, false, true],
    );
    const s = t.client.stats();
    assert.equal(s.attempts, 3);
    assert.equal(s.retries, 2);
    assert.equal(s.failedAttempts, 2);
    await t.close();
  });

  it('does not retry when retry is false, and rejects with the task error', async () => {
    const t = await setup(['a', 'b']);
    let runs = 0;
    await assert.rejects(
      t.client.call(
        'svc',
        () => {
          runs++;
          throw new Error('boom');
        },
        { retry: false },
      ),
      /boom/,
    );
    assert.equal(runs, 1);
    assert.equal(t.client.stats().failed, 1);
    await t.close();
  });

  it('stops at maxAttempts', async () => {
    const t = await setup(['a', 'b', 'c', 'd']);
    let runs = 0;
    await assert.rejects(
      t.client.call('svc', () => Promise.reject(new Error(`fail ${++runs}`)), { retry: { maxAttempts: 2 } }),
      /fail 2/,
    );
    assert.equal(runs, 2);
    await t.close();
  });

  it('rejects with RetryBudgetExhaustedError (cause: the last failure) when the budget has no retry left', async () => {
    const t = await setup(['a', 'b'], { retryBudget: { percentCanRetry: 0, minRetriesPerSec: 0 } });
    const err = await t.client.call('svc', () => Promise.reject(new Error('down'))).catch((e: unknown) => e);
    assert.ok(err instanceof RetryBudgetExhaustedError);
    assert.match(String((err.cause as Error).message), /down/);
    assert.equal(t.client.stats().retriesRefused, 1);
    assert.equal(t.client.stats().attempts, 1);
    await t.close();
  });

  it('rejects with NotFoundError for a service the registry does not know', async () => {
    const t = await setup(['a']);
    await assert.rejects(
      t.client.call('nope', () => 1),
      NotFoundError,
    );
    await t.close();
  });

  it('answers the fallback function when every attempt fails', async () => {
    const t = await setup(['a', 'b']);
    const v = await t.client.call('svc', () => Promise.reject(new Error('down')), { fallback: (err) => `fallback after ${(err as Error).message}` });
    assert.equal(v, 'fallback after down');
    assert.equal(t.client.stats().fallbacks, 1);
    assert.equal(t.client.stats().failed, 0);
    await t.close();
  });

  it('answers the last good value of a policy Fallback', async () => {
    const t = await setup(['a']);
    const fallback = new Fallback<number>({ lastGood: true });
    assert.equal(await t.client.call('svc', () => 7, { fallback }), 7);
    assert.equal(await t.client.call('svc', () => Promise.reject(new Error('down')), { fallback, retry: false }), 7);
    assert.equal(t.client.stats().succeeded, 1);
    assert.equal(t.client.stats().fallbacks, 1);
    await t.close();
  });

  it('passes over an instance whose breaker is open: not called, the attempt goes elsewhere, health hears of it', async () => {
    const breakers = new BreakerGroup({
      factory: (name) => new CircuitBreaker({ name, minimumCalls: 2, failureRate: 0.5, openMs: 60_000 }),
      exclude: (name) => !name.includes('/'),
    });
    const t = await setup(['a', 'b'], { breakers });
    // Round robin: four calls reach a twice, and a fails both: its breaker opens.
    for (let i = 0; i < 4; i++) {
      await t.client.call('svc', (inst) => (inst.id === 'a' ? Promise.reject(new Error('a down')) : 1), { retry: false }).catch(() => {});
    }
    assert.equal((breakers.get('svc/a') as CircuitBreaker).state, 'open');
    const before = t.balancer.reports.length;
    const seen: string[] = [];
    for (let i = 0; i < 4; i++) await t.client.call('svc', (inst) => seen.push(inst.id), { retry: false });
    assert.deepEqual(seen, ['b', 'b', 'b', 'b']);
    const refusals = t.balancer.reports.slice(before).filter((r) => r.id === 'a');
    assert.ok(refusals.length >= 1);
    assert.ok(
      refusals.every((r) => !r.ok),
      'a refusal reached health as a success',
    );
    assert.equal(t.client.stats().breakerRejections, refusals.length);
    assert.equal(t.balancer.reports.length, t.balancer.picks);
    await t.close();
  });

  it('releases a pick its instance breaker refused: no ejection for refusals, later picks leave the open instance out, and it returns for its half-open probes', async () => {
    const clock = new ManualClock();
    const breakers = new BreakerGroup({
      factory: (name) => new CircuitBreaker({ name, minimumCalls: 2, failureRate: 0.5, openMs: 600_000, clock }),
      exclude: (name) => !name.includes('/'),
    });
    const registry = new MemoryRegistry();
    for (const inst of instances('a', 'b', 'c')) await registry.register(inst);
    const client = new ResilientClient({ registry, breakers, clock, timeoutMs: 0, balancer: { random: seeded(3) } });
    try {
      for (let i = 0; i < 50 && (breakers.get('svc/a') as CircuitBreaker | undefined)?.state !== 'open'; i++) {
        clock.advance(1_001); // past forcePickMs: P2C keeps measuring every instance
        await client.call('svc', (inst) => (inst.id === 'a' ? Promise.reject(new Error('a down')) : 1), { retry: false }).catch(() => {});
      }
      assert.equal((breakers.get('svc/a') as CircuitBreaker).state, 'open');
      const balancer = (await client.service('svc')).balancer as Balancer;
      const failedBefore = client.stats().failed;
      const seen = new Map<string, number>();
      for (let i = 0; i < 200; i++) {
        clock.advance(1_001); // `a` lost every pick for over a second: P2C force-picks it, its breaker refuses
        await client.call('svc', (inst) => {
          seen.set(inst.id, (seen.get(inst.id) ?? 0) + 1);
          return 1;
        });
      }
      assert.equal(seen.get('a'), undefined, 'no call reached the open instance');
      const refusals = client.stats().breakerRejections;
      assert.ok(refusals >= 1 && refusals <= 2, `refusals ${refusals}: after the first, picks leave the open instance out`);
      const a = balancer.health().find((h) => h.instance.id === 'a')!;
      assert.equal(a.timesEjected, 0, 'refusals are no evidence for outlier detection');
      assert.equal(client.stats().failed, failedBefore, 'every call found an instance');
      clock.advance(600_000); // the open period ends: the breaker half-opens and wants probes
      seen.clear();
      for (let i = 0; i < 50; i++) {
        clock.advance(1_001);
        await client.call('svc', (inst) => {
          seen.set(inst.id, (seen.get(inst.id) ?? 0) + 1);
          return 1;
        });
      }
      assert.ok((seen.get('a') ?? 0) > 0, 'the instance came back for its probes');
      assert.equal((breakers.get('svc/a') as CircuitBreaker).state, 'closed');
    } finally {
      await client.close();
      await registry.close();
    }
  });

  it('rejects at once with BreakerOpenError when the service breaker refuses, without calling the task', async () => {
    const breakers = new BreakerGroup({ factory: (name) => new CircuitBreaker({ name, minimumCalls: 1, failureRate: 1, openMs: 60_000 }) });
    const t = await setup(['a', 'b'], { breakers });
    await t.client.call('svc', () => Promise.reject(new Error('down')), { retry: false }).catch(() => {});
    let ran = false;
    await assert.rejects(
      t.client.call('svc', () => {
        ran = true;
      }),
      BreakerOpenError,
    );
    assert.equal(ran, false);
    await t.close();
  });

  it('times out a task that ignores its signal with TimeoutError at the deadline on its clock, and aborts that signal', async () => {
    const clock = new ManualClock();
    const t = await setup(['a'], { timeoutMs: 20, clock });
    let signal: AbortSignal | undefined;
    let settled = false;
    const p = t.client
      .call(
        'svc',
        (_i, s) => {
          signal = s;
          return new Promise(() => {});
        },
        { retry: false },
      )
      .catch((e: unknown) => e)
      .finally(() => (settled = true));
    await clock.advanceAsync(19);
    assert.equal(settled, false, 'timed out early');
    assert.equal(signal?.aborted, false);
    await clock.advanceAsync(2); // at most one granule (1 ms) late
    const err = await p;
    assert.ok(err instanceof TimeoutError, String(err));
    assert.equal(signal?.aborted, true);
    assert.deepEqual(t.balancer.reports, [{ id: 'a', ok: false }]);
    await t.close();
  });

  it('ignores the late answer of a timed-out attempt: the retry that followed decides the call', async () => {
    const clock = new ManualClock();
    const t = await setup(['a', 'b'], { timeoutMs: 100, clock, retryBackoff: { initialMs: 0, maxMs: 0 } });
    const p = t.client.call('svc', (inst) =>
      inst.id === 'a' ? new Promise((r) => clock.setTimeout(() => r('late answer from a'), 150)) : new Promise((r) => clock.setTimeout(() => r('b'), 80)),
    );
    await clock.advanceAsync(101); // a's deadline: the retry goes to b, which answers 80 ms later
    assert.deepEqual(t.balancer.reports, [{ id: 'a', ok: false }]);
    await clock.advanceAsync(80);
    assert.equal(await p, 'b');
    await clock.advanceAsync(100); // a's late answer arrives (at 150 ms): nothing may change
    assert.deepEqual(t.balancer.reports, [
      { id: 'a', ok: false },
      { id: 'b', ok: true },
    ]);
    assert.equal(t.client.stats().succeeded, 1);
    await t.close();
  });

  it('times out with a dedicated signal linked to the caller when the caller passes one', async () => {
    const t = await setup(['a']);
    const caller = new AbortController();
    let signal: AbortSignal | undefined;
    const p = t.client.call(
      'svc',
      (_i, s) => {
        signal = s;
        return new Promise(() => {});
      },
      { signal: caller.signal, timeoutMs: 5_000 },
    );
    while (signal === undefined) await new Promise((r) => setImmediate(r));
    caller.abort(new Error('user left'));
    await assert.rejects(p, AbortedError);
    assert.equal(signal?.aborted, true);
    // The caller's own cancellation is nobody's failure.
    assert.deepEqual(t.balancer.reports, [{ id: 'a', ok: true }]);
    assert.equal(t.client.stats().failedAttempts, 0);
    await t.close();
  });

  it('passes errors isFailure rejects to the caller without counting them against the instance', async () => {
    const t = await setup(['a', 'b']);
    const notFound = Object.assign(new Error('404'), { status: 404 });
    await assert.rejects(
      t.client.call('svc', () => Promise.reject(notFound), { isFailure: (e) => (e as { status?: number }).status !== 404 }),
      /404/,
    );
    assert.deepEqual(t.balancer.reports, [{ id: 'a', ok: true }]);
    await t.close();
  });

  it('rejects with BulkheadRejectedError when the service has maxConcurrent attempts in flight', async () => {
    const t = await setup(['a'], { bulkhead: { maxConcurrent: 1 } });
    let release!: () => void;
    const first = t.client.call('svc', () => new Promise<void>((r) => (release = r)));
    await new Promise((r) => setImmediate(r));
    await assert.rejects(
      t.client.call('svc', () => 1, { retry: false }),
      BulkheadRejectedError,
    );
    assert.equal(t.client.stats().bulkheadRejections, 1);
    release();
    await first;
    await t.close();
  });

  it('holds one bulkhead slot while an attempt is in flight, and frees it however the attempt ends', async () => {
    const clock = new ManualClock();
    const t = await setup(['a', 'b'], { timeoutMs: 100, clock, retryBackoff: { initialMs: 0, maxMs: 0 } });
    const bulkhead = (await t.client.service('svc')).bulkhead;
    const tick = () => new Promise((r) => setImmediate(r));
    // answered
    let answer!: (v: string) => void;
    const answered = t.client.call('svc', () => new Promise<string>((r) => (answer = r)));
    assert.equal(bulkhead.active, 1);
    answer('x');
    assert.equal(await answered, 'x');
    assert.equal(bulkhead.active, 0);
    // failed, then retried on the other instance: the first attempt's slot is freed before the retry takes one
    let fail!: (err: Error) => void;
    let answerRetry!: (v: string) => void;
    let attempts = 0;
    const retried = t.client.call('svc', () => new Promise<string>((r, j) => (attempts++ === 0 ? (fail = j) : (answerRetry = r))));
    assert.equal(bulkhead.active, 1);
    fail(new Error('boom'));
    for (let i = 0; i < 20 && answerRetry === undefined; i++) await tick();
    assert.equal(bulkhead.active, 1);
    answerRetry('y');
    assert.equal(await retried, 'y');
    assert.equal(bulkhead.active, 0);
    // timed out, not retried
    const timedOut = t.client.call('svc', () => new Promise<string>(() => {}), { retry: false });
    assert.equal(bulkhead.active, 1);
    const rejected = assert.rejects(timedOut, TimeoutError);
    await clock.advanceAsync(102);
    await rejected;
    assert.equal(bulkhead.active, 0);
    // thrown at once, not retried
    await assert.rejects(
      t.client.call(
        'svc',
        () => {
          throw new Error('sync');
        },
        { retry: false },
      ),
      /sync/,
    );
    assert.equal(bulkhead.active, 0);
    await t.close();
  });

  it('rejects with NoInstanceError when the service has no instance to pick', async () => {
    const t = await setup(['a']);
    t.balancer.list = [];
    await assert.rejects(
      t.client.call('svc', () => 1),
      NoInstanceError,
    );
    await t.close();
  });

  it('rejects calls after close with ClosedError and closes the balancers', async () => {
    const t = await setup(['a']);
    await t.client.call('svc', () => 1);
    await t.client.close();
    assert.equal(t.balancer.closed, true);
    await assert.rejects(
      t.client.call('svc', () => 1),
      ClosedError,
    );
    await t.close();
  });

  it('rejects bad options with TypeError / RangeError naming them', () => {
    const registry = new MemoryRegistry();
    assert.throws(() => new ResilientClient({} as ResilientClientOptions), /registry/);
    assert.throws(() => new ResilientClient({ registry, timeoutMs: -1 }), /timeoutMs/);
    assert.throws(() => new ResilientClient({ registry, maxAttempts: 0 }), /maxAttempts/);
    assert.throws(() => new ResilientClient({ registry, bulkhead: { maxConcurrent: 0 } }), /maxConcurrent/);
    assert.throws(() => new ResilientClient({ registry, breakers: {} as BreakerGroup }), /breakers/);
    void registry.close();
  });

  it("rejects a bad argument with TypeError: the caller's error, never counted, retried or fallen back from", async () => {
    const t = await setup(['a']);
    let fellBack = 0;
    const fallback = () => (fellBack++, -1);
    await assert.rejects(
      t.client.call('svc', () => 1, { timeoutMs: -5, fallback }),
      RangeError,
    );
    await assert.rejects(
      t.client.call('svc', () => 1, { retry: 'yes' as unknown as boolean, fallback }),
      TypeError,
    );
    await assert.rejects(t.client.call('svc', 'fn' as never, { fallback }), TypeError);
    await assert.rejects(t.client.call('svc', undefined as never, { fallback }), /fn must be a function, got undefined/);
    await assert.rejects(
      t.client.call('svc', () => 1, { signal: 'stop' as never, fallback }),
      /options\.signal must be an AbortSignal/,
    );
    await assert.rejects(
      t.client.call('svc', () => 1, 5 as never),
      /options must be an object/,
    );
    await assert.rejects(
      t.client.call('', () => 1),
      TypeError,
    );
    await assert.rejects(
      t.client.call(undefined as never, () => 1),
      /service must be a non-empty string/,
    );
    await assert.rejects(t.client.fetch('http://svc/x', { signal: {} as never }), /init\.signal must be an AbortSignal/);
    assert.deepEqual(t.client.stats(), {
      calls: 0,
      succeeded: 0,
      fallbacks: 0,
      failed: 0,
      attempts: 0,
      failedAttempts: 0,
      retries: 0,
      retriesRefused: 0,
      breakerRejections: 0,
      bulkheadRejections: 0,
    });
    assert.equal(fellBack, 0);
    assert.equal(t.balancer.picks, 0);
    await t.close();
  });

  it('closes with Symbol.asyncDispose, and refuses calls afterwards with ClosedError', async () => {
    const registry = new MemoryRegistry();
    await registry.register({ id: 'a', name: 'svc', address: '127.0.0.1:9000' });
    const balancer = new FakeBalancer(instances('a'));
    let client: ResilientClient;
    {
      await using c = new ResilientClient({ registry, balancerFactory: () => balancer });
      client = c;
      assert.equal(await c.call('svc', () => 1), 1);
    }
    assert.equal(balancer.closed, true);
    await assert.rejects(
      client.call('svc', () => 1),
      ClosedError,
    );
    await registry.close();
  });

  it('reports every pick exactly once and never calls the same instance twice in one call while others are left (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }), { minLength: 1, maxLength: 20 }), async (plan) => {
        const t = await setup(['a', 'b', 'c'], { maxAttempts: 3 });
        for (const fails of plan) {
          const seen: string[] = [];
          let k = 0;
          await t.client
            .call('svc', (inst) => {
              seen.push(inst.id);
              return fails[k++] ? Promise.reject(new Error('x')) : 1;
            })
            .catch(() => {});
          assert.equal(new Set(seen).size, seen.length, `an instance was retried: ${seen.join(',')}`);
        }
        assert.equal(t.balancer.reports.length, t.balancer.picks);
        const s = t.client.stats();
        assert.equal(s.calls, plan.length);
        assert.equal(s.succeeded + s.failed + s.fallbacks, s.calls);
        await t.close();
      }),
      { numRuns: 40 },
    );
  });

  it('feeds the service breaker the whole call: one admission per call, a success when a retry answered, a failure when every attempt failed', async () => {
    const outcomes: string[] = [];
    const breakers = new BreakerGroup({
      factory: (name) => ({
        name,
        admit() {
          if (name.includes('/')) return { success() {}, failure() {}, release() {} };
          return { success: () => void outcomes.push('success'), failure: () => void outcomes.push('failure'), release: () => void outcomes.push('release') };
        },
        execute: () => Promise.reject(new Error('unused')),
      }),
    });
    const t = await setup(['a', 'b', 'c'], { breakers, retryBackoff: { initialMs: 0, maxMs: 0 } });
    // a fails, b answers: two attempts, one call answered by a retry.
    assert.equal(await t.client.call('svc', (inst) => (inst.id === 'a' ? Promise.reject(new Error('a down')) : inst.id)), 'b');
    assert.deepEqual(outcomes, ['success'], 'a call a retry answered is one success, not a failure and a success');
    // Every attempt fails: one failure for the call.
    await assert.rejects(t.client.call('svc', () => Promise.reject(new Error('all down'))));
    assert.deepEqual(outcomes, ['success', 'failure']);
    assert.equal(t.client.stats().attempts, 5);
    await t.close();
  });

  it('settles every breaker admission exactly once — success, failure or release — whatever happens (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ refuse: fc.boolean(), outcome: fc.constantFrom('ok', 'fail', 'throw', 'hang') }), { minLength: 1, maxLength: 30 }),
        async (script) => {
          const tokens: number[] = []; // per token: how many times it was settled
          let step = 0;
          const next = () => script[step++ % script.length]!;
          const breakers = new BreakerGroup({
            factory: (name) => ({
              name,
              admit() {
                if (name.includes('/') && next().refuse) throw new BreakerOpenError('refused');
                const i = tokens.push(0) - 1;
                return { success: () => void tokens[i]!++, failure: () => void tokens[i]!++, release: () => void tokens[i]!++ };
              },
              execute: () => Promise.reject(new Error('unused')),
            }),
          });
          const clock = new ManualClock();
          const t = await setup(['a', 'b', 'c'], { breakers, timeoutMs: 5, clock });
          for (let c = 0; c < 5; c++) {
            let done = false;
            void t.client
              .call('svc', () => {
                const o = next().outcome;
                if (o === 'throw') throw new Error('sync');
                if (o === 'hang') return new Promise(() => {});
                return o === 'ok' ? 1 : Promise.reject(new Error('async'));
              })
              .catch(() => {})
              .finally(() => (done = true));
            while (!done) await clock.advanceAsync(5); // hung attempts time out, backoffs pass
          }
          assert.ok(
            tokens.every((n) => n === 1),
            `token settle counts: ${tokens.join(',')}`,
          );
          assert.equal(t.balancer.reports.length, t.balancer.picks, 'a pick was not ended');
          await t.close();
        },
      ),
      { numRuns: 30 },
    );
  });
});
