import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { getEventListeners } from 'node:events';
import { AbortedError, TimeoutError } from '../core/errors.js';
import { neverAborted } from '../core/guard.js';
import { ManualClock } from '../core/clock.js';
import { Timeout, type TimeoutOptions } from './timeout.js';
import { lateClock } from '../core/test-fixtures.js';

function activeTimers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
}

describe('Timeout', () => {
  describe('on a ManualClock (every timer is set through the clock)', () => {
    it('rejects with TimeoutError at the deadline (at most 1 % late) even when the task ignores its signal', async () => {
      const clock = new ManualClock();
      const timeout = new Timeout({ timeoutMs: 200, clock });
      let taskSignal!: AbortSignal;
      let settled = false;
      const p = timeout.execute((signal) => {
        taskSignal = signal;
        return new Promise<never>(() => {});
      });
      p.catch(() => {}).finally(() => (settled = true));
      await clock.advanceAsync(199);
      assert.equal(settled, false);
      assert.equal(taskSignal.aborted, false);
      clock.advance(3); // one granule (2 ms) late at most
      const err = await p.catch((e: unknown) => e);
      assert.ok(err instanceof TimeoutError);
      assert.match(err.message, /200 ms/);
      assert.equal(taskSignal.aborted, true);
      assert.equal(taskSignal.reason, err, "the task's signal carries the TimeoutError as its reason");
    });

    it('answers the value when the task settles before the deadline, and the deadline no longer fires', async () => {
      const clock = new ManualClock();
      const timeout = new Timeout({ timeoutMs: 100, clock });
      let taskSignal!: AbortSignal;
      let release!: (v: string) => void;
      const p = timeout.execute((signal) => ((taskSignal = signal), new Promise<string>((r) => (release = r))));
      clock.advance(50);
      release('fast');
      assert.equal(await p, 'fast');
      clock.advance(1_000);
      assert.equal(taskSignal.aborted, false);
    });

    it('answers a failure that happens before the deadline as it is', async () => {
      const clock = new ManualClock();
      const timeout = new Timeout({ timeoutMs: 100, clock });
      const boom = new Error('boom');
      const p = timeout.execute(() => new Promise((_, reject) => clock.setTimeout(() => reject(boom), 30)));
      clock.advance(30);
      await assert.rejects(p, boom);
    });

    it('with a caller signal, aborts its own signal exactly at the deadline, and clears its timer when the task settles', async () => {
      const clock = new ManualClock();
      const timeout = new Timeout({ timeoutMs: 200, clock });
      const caller = new AbortController();
      let taskSignal!: AbortSignal;
      const p = timeout.execute((signal) => ((taskSignal = signal), new Promise<never>(() => {})), { signal: caller.signal });
      p.catch(() => {});
      clock.advance(199);
      assert.equal(taskSignal.aborted, false);
      clock.advance(1);
      await assert.rejects(p, TimeoutError);
      assert.ok(taskSignal.reason instanceof TimeoutError);
      assert.notEqual(taskSignal, caller.signal);
      assert.equal(await timeout.execute(async () => 3, { signal: caller.signal }), 3);
      assert.equal(clock.pendingTimers, 0, 'the settled call cleared its timer');
    });
  });

  it('gives every task a real signal, whatever its declared parameters; calls without a caller signal share it', async () => {
    {
      const clock = new ManualClock();
      const timeout = new Timeout({ timeoutMs: 50, clock });
      const seen: AbortSignal[] = [];
      const p = timeout.execute(function (this: unknown) {
        // eslint-disable-next-line prefer-rest-params
        seen.push(arguments[0] as AbortSignal);
        return new Promise<never>(() => {});
      });
      const q = timeout.execute((...args: unknown[]) => (seen.push(args[0] as AbortSignal), new Promise<never>(() => {})));
      assert.notEqual(seen[0], neverAborted);
      assert.equal(seen[0], seen[1], 'one signal for calls that start together');
      clock.advance(51);
      await assert.rejects(p, TimeoutError);
      await assert.rejects(q, TimeoutError);
      assert.equal(seen[0]!.aborted, true, 'a task written with a rest parameter still sees the deadline');
    }
  });

  it('runs a task that returns a plain value or throws synchronously', async () => {
    const timeout = new Timeout({ timeoutMs: 1_000 });
    assert.equal(await timeout.execute(() => 42), 42);
    await assert.rejects(
      timeout.execute(() => {
        throw new TypeError('sync');
      }),
      TypeError,
    );
  });

  it('settles (and clears its timer) when a foreign thenable throws from then()', async () => {
    const before = activeTimers();
    const evil = {
      then: () => {
        throw new Error('bad thenable');
      },
    } as unknown as PromiseLike<number>;
    await assert.rejects(
      new Timeout({ timeoutMs: 60_000 }).execute(() => evil),
      /bad thenable/,
    );
    assert.equal(activeTimers(), before);
  });

  it('leaves no timer behind after the task settles, whichever way', async () => {
    const timeout = new Timeout({ timeoutMs: 60_000 });
    const before = activeTimers();
    await timeout.execute(() => 1);
    await timeout.execute(async () => 2);
    await timeout.execute(() => Promise.reject(new Error('x'))).catch(() => {});
    await timeout
      .execute(() => {
        throw new Error('y');
      })
      .catch(() => {});
    assert.equal(activeTimers(), before);
  });

  it('rejects with AbortedError and aborts the task signal when the caller aborts first', async () => {
    const timeout = new Timeout({ timeoutMs: 60_000 });
    const ac = new AbortController();
    let taskSignal!: AbortSignal;
    const before = activeTimers();
    const p = timeout.execute((signal) => ((taskSignal = signal), new Promise<never>(() => {})), { signal: ac.signal });
    const reason = new Error('user left');
    ac.abort(reason);
    const err = await p.catch((e: unknown) => e);
    assert.ok(err instanceof AbortedError);
    assert.equal(err.cause, reason);
    assert.equal(taskSignal.reason, reason);
    assert.equal(activeTimers(), before);
  });

  it('does not start the task when the caller signal is already aborted', async () => {
    let calls = 0;
    await assert.rejects(
      new Timeout().execute(() => calls++, { signal: AbortSignal.abort() }),
      AbortedError,
    );
    assert.equal(calls, 0);
  });

  it('removes its listener from the caller signal after settling', async () => {
    const ac = new AbortController();
    const timeout = new Timeout({ timeoutMs: 60_000 });
    for (let i = 0; i < 20; i++) await timeout.execute(() => i, { signal: ac.signal });
    await timeout.execute(() => Promise.reject(new Error('x')), { signal: ac.signal }).catch(() => {});
    assert.equal(getEventListeners(ac.signal, 'abort').length, 0);
  });

  it('really times out on the real clock (10 ms)', async () => {
    const started = performance.now();
    await assert.rejects(
      new Timeout({ timeoutMs: 10 }).execute(() => new Promise(() => {})),
      TimeoutError,
    );
    assert.ok(performance.now() - started >= 9);
  });

  const bad: [TimeoutOptions, RegExp, ErrorConstructor][] = [
    [{ timeoutMs: 0 }, /timeoutMs.*got 0/, RangeError],
    [{ timeoutMs: -5 }, /timeoutMs.*got -5/, RangeError],
    [{ timeoutMs: Number.NaN }, /timeoutMs.*got NaN/, RangeError],
    [{ timeoutMs: Infinity }, /timeoutMs.*got Infinity/, RangeError],
    [{ timeoutMs: 2 ** 31 }, /timeoutMs.*got 2147483648/, RangeError],
    [{ timeoutMs: '1s' as never }, /timeoutMs must be a number, got "1s"/, TypeError],
  ];
  for (const [options, message, type] of bad) {
    it(`rejects ${inspect(options)} with ${type.name}`, () => {
      assert.throws(
        () => new Timeout(options),
        (err: Error) => err instanceof type && message.test(err.message),
      );
    });
  }
});

describe('Timeout after a stall of the process', () => {
  for (const withSignal of [false, true]) {
    it(`counts an answer that came during the stall, and times out what is still unanswered a turn later (${withSignal ? 'a caller signal' : 'shared deadlines'})`, async () => {
      const manual = new ManualClock(0);
      const clock = lateClock(manual);
      const t = new Timeout({ timeoutMs: 50, clock });
      const options = withSignal ? { signal: new AbortController().signal } : undefined;
      let answer!: (v: string) => void;
      const answered = t.execute(() => new Promise<string>((r) => (answer = r)), options);
      const unanswered = t
        .execute(() => new Promise<never>(() => {}), options)
        .then(
          () => 'answered',
          (err: unknown) => (err instanceof TimeoutError ? 'timed out' : err),
        );
      await manual.advanceAsync(49);
      clock.lateMs = 300; // blocked 300 ms: the deadline's timer runs before the poll reads the answer
      await manual.advanceAsync(withSignal ? 1 : 2); // the shared deadline ends with its 1 ms granule
      answer('in time');
      assert.equal(await answered, 'in time');
      assert.deepEqual(t.stats(), { calls: 2, timeouts: 0 });
      await manual.advanceAsync(1);
      assert.equal(await unanswered, 'timed out');
      assert.deepEqual(t.stats(), { calls: 2, timeouts: 1 });
    });
  }
});
