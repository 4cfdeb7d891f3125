import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { getEventListeners } from 'node:events';
import fc from 'fast-check';
import { AbortedError, BulkheadRejectedError } from '../core/errors.js';
import { Bulkhead, type BulkheadOptions } from './bulkhead.js';

/** A task the test settles by hand. */
function gate<T = string>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('Bulkhead', () => {
  it('runs up to maxConcurrent, queues up to maxQueued, and rejects the rest at once', async () => {
    const bulkhead = new Bulkhead({ maxConcurrent: 2, maxQueued: 1 });
    const gates = [gate(), gate(), gate()];
    let started = 0;
    const ps = gates.map((g) => bulkhead.execute(() => (started++, g.promise)));
    assert.deepEqual(bulkhead.stats(), { active: 2, queued: 1, rejected: 0 });
    assert.equal(started, 2);
    const err = await bulkhead.execute(() => 'never').catch((e: unknown) => e);
    assert.ok(err instanceof BulkheadRejectedError);
    assert.match(err.message, /2 running, 1 queued/);
    assert.equal(bulkhead.stats().rejected, 1);
    gates[0]!.resolve('a');
    assert.equal(await ps[0], 'a');
    await tick();
    assert.equal(started, 3, 'the freed slot went to the queued call');
    assert.deepEqual(bulkhead.stats(), { active: 2, queued: 0, rejected: 1 });
    gates[1]!.reject(new Error('b'));
    gates[2]!.resolve('c');
    await assert.rejects(ps[1]!, /b/);
    assert.equal(await ps[2], 'c');
    assert.deepEqual(bulkhead.stats(), { active: 0, queued: 0, rejected: 1 });
  });

  it('serves the queue first come, first served', async () => {
    const bulkhead = new Bulkhead({ maxConcurrent: 1, maxQueued: 10 });
    const order: number[] = [];
    const first = gate();
    const ps = [bulkhead.execute(() => first.promise)];
    for (let i = 1; i <= 5; i++) ps.push(bulkhead.execute(async () => (order.push(i), String(i))));
    first.resolve('0');
    assert.deepEqual(await Promise.all(ps), ['0', '1', '2', '3', '4', '5']);
    assert.deepEqual(order, [1, 2, 3, 4, 5]);
  });

  it('hands a freed slot to the queue, not to a caller arriving at that moment', async () => {
    const bulkhead = new Bulkhead({ maxConcurrent: 1, maxQueued: 1 });
    const g = gate();
    const order: string[] = [];
    const a = bulkhead.execute(() => g.promise);
    const b = bulkhead.execute(async () => void order.push('queued'));
    g.resolve('x');
    await a;
    const c = bulkhead.execute(async () => void order.push('late'));
    await Promise.all([b, c]);
    assert.deepEqual(order, ['queued', 'late']);
  });

  it('takes a queued caller whose signal aborts out of the queue', async () => {
    const bulkhead = new Bulkhead({ maxConcurrent: 1, maxQueued: 2 });
    const g = gate();
    const running = bulkhead.execute(() => g.promise);
    const ac = new AbortController();
    let ran = false;
    const queued = bulkhead.execute(() => void (ran = true), { signal: ac.signal });
    const other = bulkhead.execute(() => 'other');
    assert.equal(bulkhead.queued, 2);
    const reason = new Error('gone');
    ac.abort(reason);
    const err = await queued.catch((e: unknown) => e);
    assert.ok(err instanceof AbortedError);
    assert.equal(err.cause, reason);
    assert.equal(bulkhead.queued, 1);
    g.resolve('done');
    await running;
    assert.equal(await other, 'other');
    assert.equal(ran, false);
    assert.deepEqual(bulkhead.stats(), { active: 0, queued: 0, rejected: 0 });
  });

  it('removes its abort listener once a queued call starts', async () => {
    const bulkhead = new Bulkhead({ maxConcurrent: 1, maxQueued: 1 });
    const g = gate();
    const ac = new AbortController();
    const a = bulkhead.execute(() => g.promise);
    const b = bulkhead.execute(() => 'b', { signal: ac.signal });
    assert.equal(getEventListeners(ac.signal, 'abort').length, 1);
    g.resolve('a');
    await Promise.all([a, b]);
    assert.equal(getEventListeners(ac.signal, 'abort').length, 0);
  });

  it('rejects with AbortedError without running when the signal is already aborted', async () => {
    const bulkhead = new Bulkhead();
    let ran = false;
    await assert.rejects(
      bulkhead.execute(() => (ran = true), { signal: AbortSignal.abort() }),
      AbortedError,
    );
    assert.equal(ran, false);
    assert.equal(bulkhead.active, 0);
  });

  it('frees the slot of a task that throws synchronously or returns a plain value', async () => {
    const bulkhead = new Bulkhead({ maxConcurrent: 1 });
    await assert.rejects(
      bulkhead.execute(() => {
        throw new Error('sync');
      }),
      /sync/,
    );
    assert.equal(await bulkhead.execute(() => 5), 5);
    assert.equal(bulkhead.active, 0);
  });

  it('never runs more than maxConcurrent nor queues more than maxQueued (property)', async () => {
    type Op = { kind: 'call'; abortable: boolean } | { kind: 'settle'; index: number; ok: boolean } | { kind: 'abort'; index: number };
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ kind: fc.constant('call' as const), abortable: fc.boolean() }),
      fc.record({ kind: fc.constant('settle' as const), index: fc.nat(), ok: fc.boolean() }),
      fc.record({ kind: fc.constant('abort' as const), index: fc.nat() }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 0, max: 4 }),
        fc.array(op, { maxLength: 60 }),
        async (maxConcurrent, maxQueued, ops) => {
          const bulkhead = new Bulkhead({ maxConcurrent, maxQueued });
          let running = 0;
          const gates: ReturnType<typeof gate<string>>[] = [];
          const controllers: AbortController[] = [];
          const outcomes: Promise<unknown>[] = [];
          const check = () => {
            assert.ok(bulkhead.active <= maxConcurrent, `active ${bulkhead.active} > ${maxConcurrent}`);
            assert.ok(bulkhead.queued <= maxQueued, `queued ${bulkhead.queued} > ${maxQueued}`);
            assert.equal(running, bulkhead.active, 'tasks actually running match active');
          };
          for (const o of ops) {
            if (o.kind === 'call') {
              const ac = new AbortController();
              controllers.push(ac);
              const p = bulkhead.execute(
                () => {
                  running++;
                  const g = gate();
                  gates.push(g);
                  return g.promise.finally(() => running--);
                },
                o.abortable ? { signal: ac.signal } : undefined,
              );
              outcomes.push(p.catch(() => {}));
            } else if (o.kind === 'settle' && gates.length > 0) {
              const g = gates.splice(o.index % gates.length, 1)[0]!;
              if (o.ok) g.resolve('ok');
              else g.reject(new Error('fail'));
            } else if (o.kind === 'abort' && controllers.length > 0) {
              controllers[o.index % controllers.length]!.abort();
            }
            check();
            await tick();
            check();
          }
          // Drain: settle everything still running (and what the queue starts) until idle.
          while (bulkhead.active > 0) {
            for (const g of gates.splice(0)) g.resolve('end');
            await tick();
          }
          await Promise.all(outcomes);
          assert.deepEqual({ active: bulkhead.active, queued: bulkhead.queued }, { active: 0, queued: 0 });
        },
      ),
      { numRuns: 150 },
    );
  });

  const bad: [BulkheadOptions, RegExp, ErrorConstructor][] = [
    [{ maxConcurrent: 0 }, /maxConcurrent.*got 0/, RangeError],
    [{ maxConcurrent: 1.5 }, /maxConcurrent.*got 1\.5/, RangeError],
    [{ maxConcurrent: Number.NaN }, /maxConcurrent.*got NaN/, RangeError],
    [{ maxConcurrent: Infinity }, /maxConcurrent.*got Infinity/, RangeError],
    [{ maxQueued: -1 }, /maxQueued.*got -1/, RangeError],
    [{ maxQueued: '5' as never }, /maxQueued must be a number, got "5"/, TypeError],
  ];
  for (const [options, message, type] of bad) {
    it(`rejects ${inspect(options)} with ${type.name}`, () => {
      assert.throws(
        () => new Bulkhead(options),
        (err: Error) => err instanceof type && message.test(err.message),
      );
    });
  }
});
