import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from './clock.js';
import { TimeoutError } from './errors.js';
import { Deadlines, type DeadlineNode, type Granule } from './deadline.js';
import { lateClock } from './test-fixtures.js';

function activeTimers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
}

/** Node is a DeadlineNode that records its deadline. */
class Node implements DeadlineNode {
  granule: Granule | undefined;
  deadlinePrev: DeadlineNode | undefined;
  deadlineNext: DeadlineNode | undefined;
  timedOut: TimeoutError | undefined;
  onDeadline(err: TimeoutError): void {
    this.timedOut = err;
  }
}

describe('Deadlines', () => {
  it('answers the value of a task that settles in time', async () => {
    const d = new Deadlines({ timeoutMs: 1_000 });
    assert.equal(await d.run(() => 5), 5);
    assert.equal(await d.run(async () => 6), 6);
    await assert.rejects(
      d.run(() => Promise.reject(new Error('no'))),
      /no/,
    );
    await assert.rejects(
      d.run(() => {
        throw new Error('sync');
      }),
      /sync/,
    );
    const evil = {
      then: () => {
        throw new Error('bad thenable');
      },
    } as unknown as PromiseLike<number>;
    await assert.rejects(
      d.run(() => evil),
      /bad thenable/,
    );
  });

  it('shares one signal among calls that start in the same granule, and starts a new one in the next', async () => {
    const clock = new ManualClock(1_000);
    const d = new Deadlines({ timeoutMs: 10_000, clock }); // 100 ms granules
    const signals: AbortSignal[] = [];
    await Promise.all([d.run((s) => signals.push(s)), d.run((s) => signals.push(s))]);
    clock.advance(99);
    await d.run((s) => signals.push(s));
    clock.advance(1);
    await d.run((s) => signals.push(s));
    assert.equal(signals[0], signals[1]);
    assert.equal(signals[0], signals[2]);
    assert.notEqual(signals[2], signals[3]);
    assert.equal(signals[0]!.aborted, false);
  });

  describe('on a ManualClock (the granule timers are set through the clock)', () => {
    it('fires between timeoutMs and timeoutMs + 1 % after a call started, and aborts the shared signal with the TimeoutError', () => {
      fc.assert(
        fc.property(fc.integer({ min: 1, max: 100_000 }), fc.integer({ min: 0, max: 10_000_000 }), (timeoutMs, start) => {
          const clock = new ManualClock(start);
          const d = new Deadlines({ timeoutMs, clock, what: 'probe' });
          const node = new Node();
          const signal = d.join(node);
          const late = Math.max(1, timeoutMs / 100);
          clock.advance(timeoutMs - 1);
          assert.equal(node.timedOut, undefined, 'fired early');
          clock.advance(Math.ceil(late) + 1);
          const got = node.timedOut as TimeoutError | undefined;
          assert.ok(got instanceof TimeoutError, 'fired more than one granule late');
          assert.equal(got.message, `probe timed out after ${timeoutMs} ms`);
          assert.equal(signal.aborted, true);
          assert.equal(signal.reason, got);
          assert.equal(node.granule, undefined);
        }),
        { numRuns: 200 },
      );
    });

    it('leaves a call that settled out of the deadline, and aborts nothing when nobody is in flight', () => {
      const clock = new ManualClock();
      const d = new Deadlines({ timeoutMs: 100, clock });
      const a = new Node();
      const b = new Node();
      const signal = d.join(a);
      d.join(b);
      a.granule!.remove(a);
      clock.advance(102);
      assert.equal(a.timedOut, undefined);
      assert.ok(b.timedOut instanceof TimeoutError, 'the one still in flight timed out');
      const c = new Node();
      const next = d.join(c); // the granule fired: a new one
      assert.notEqual(next, signal);
      c.granule!.remove(c);
      clock.advance(1_000);
      assert.equal(next.aborted, false);
      assert.equal(clock.pendingTimers, 0, 'every granule timer fired');
    });

    it('rejects a task that ignores its signal at the deadline, and keeps a timer no longer than 2^31 − 1 ms', async () => {
      const clock = new ManualClock();
      const d = new Deadlines({ timeoutMs: 2 ** 31 - 1, clock });
      const p = d.run(() => new Promise(() => {}));
      let settled = false;
      p.catch(() => {}).finally(() => (settled = true));
      assert.ok(clock.nextTimerAt()! <= 2 ** 31 - 1, 'the timer waits no longer than 2^31 − 1 ms');
      clock.advance(1_000); // an overflowing delay would have fired after 1 ms
      await Promise.resolve();
      assert.equal(settled, false);
      clock.advance(2 ** 31);
      await assert.rejects(p, TimeoutError);
    });
  });

  it('really times out on the real clock (10 ms), not early', async () => {
    const d = new Deadlines({ timeoutMs: 10 });
    let signal: AbortSignal | undefined;
    const start = performance.now();
    const err = await d.run((s) => ((signal = s), new Promise(() => {}))).catch((e: unknown) => e);
    assert.ok(err instanceof TimeoutError);
    assert.equal(signal!.reason, err);
    assert.ok(performance.now() - start >= 9, 'fired early');
  });

  it('does not keep the process alive once no call is in flight', async () => {
    const before = activeTimers();
    const d = new Deadlines({ timeoutMs: 60_000 });
    await d.run(() => 1);
    assert.equal(activeTimers(), before); // the granule's timer is unref'd again
  });

  it('rejects bad options naming them', () => {
    assert.throws(() => new Deadlines({ timeoutMs: 0 }), /timeoutMs.*got 0/);
    assert.throws(() => new Deadlines({ timeoutMs: 2 ** 31 }), RangeError);
    assert.throws(() => new Deadlines({ timeoutMs: 10, what: 5 as never }), /what must be a string/);
    assert.throws(() => new Deadlines({ timeoutMs: 10, clock: {} as never }), /clock/);
    assert.throws(() => new Deadlines(undefined as never), TypeError);
  });
});

describe('Deadlines after a stall of the process', () => {
  it('lets a call answered during the stall settle: its granule fires one timer turn after the late one', async () => {
    const manual = new ManualClock(0);
    const clock = lateClock(manual);
    const d = new Deadlines({ timeoutMs: 50, clock }); // 1 ms granules
    let answer!: (v: string) => void;
    const answered = d.run(() => new Promise<string>((r) => (answer = r)));
    let unanswered = false;
    const waiting = d
      .run(() => new Promise<never>(() => {}))
      .catch((err: unknown) => {
        unanswered = err instanceof TimeoutError;
      });
    await manual.advanceAsync(50);
    clock.lateMs = 300; // blocked 300 ms: the timer runs before the poll reads what came meanwhile
    await manual.advanceAsync(1);
    answer('in time'); // the poll reads the answer
    assert.equal(await answered, 'in time');
    assert.equal(unanswered, false, 'nothing fails in the turn that found the deadline passed');
    await manual.advanceAsync(1); // the next timer turn
    await waiting;
    assert.equal(unanswered, true, 'a call still unanswered then times out');
  });
});
