/**
 * execute() semantics shared by both breakers: the same table of cases runs against each.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../core/clock.js';
import { AbortedError, BreakerOpenError, ClosedError, TimeoutError } from '../core/errors.js';
import { neverAborted } from '../core/guard.js';
import { CircuitBreaker } from './circuit-breaker.js';
import type { Breaker } from './types.js';
import { SreBreaker } from './sre-breaker.js';

interface Subject {
  name: string;
  make(): Breaker;
  /** failures counted so far */
  failures(b: Breaker): number;
  successes(b: Breaker): number;
  /** trip makes the breaker reject the next call */
  trip(b: Breaker): void;
}

const subjects: Subject[] = [
  {
    name: 'SreBreaker',
    make: () => new SreBreaker({ clock: new ManualClock(), random: () => 0, forcePassMs: 1e9 }),
    failures: (b) => (b as SreBreaker).stats().failures,
    successes: (b) => (b as SreBreaker).stats().successes,
    trip: (b) => {
      for (let i = 0; i < 50; i++) {
        try {
          b.admit().failure(new Error('down'));
        } catch {
          return;
        }
      }
      throw new Error('did not trip');
    },
  },
  {
    name: 'CircuitBreaker',
    make: () => new CircuitBreaker({ clock: new ManualClock(), minimumCalls: 1 }),
    failures: (b) => (b as CircuitBreaker).stats().failures,
    successes: (b) => {
      const s = (b as CircuitBreaker).stats();
      return s.calls - s.failures;
    },
    trip: (b) => (b as CircuitBreaker).isolate(),
  },
];

for (const s of subjects) {
  describe(`${s.name}.execute`, () => {
    it('answers a promise task and counts its success', async () => {
      const b = s.make();
      assert.equal(await b.execute(async () => 42), 42);
      assert.equal(s.successes(b), 1);
    });

    it('accepts a task that returns a plain value', async () => {
      const b = s.make();
      assert.equal(await b.execute(() => 'plain'), 'plain');
      assert.equal(s.successes(b), 1);
    });

    it('turns a synchronous throw into a rejection and counts it', async () => {
      const b = s.make();
      const err = new Error('sync');
      const p = b.execute(() => {
        throw err;
      });
      assert.ok(p instanceof Promise);
      await assert.rejects(p, (e) => e === err);
      assert.equal(s.failures(b), 1);
    });

    it('passes a rejection through unchanged and counts it', async () => {
      const b = s.make();
      const err = new Error('async');
      await assert.rejects(
        b.execute(async () => {
          throw err;
        }),
        (e) => e === err,
      );
      assert.equal(s.failures(b), 1);
    });

    it('accepts a non-native thenable', async () => {
      const b = s.make();
      const thenable = { then: (ok: (v: number) => void) => ok(7) } as unknown as PromiseLike<number>;
      assert.equal(await b.execute(() => thenable), 7);
    });

    it('hands the task the caller signal, or neverAborted', async () => {
      const b = s.make();
      const ac = new AbortController();
      assert.equal(await b.execute((signal) => signal), neverAborted);
      assert.equal(await b.execute((signal) => signal, { signal: ac.signal }), ac.signal);
    });

    it('rejects with AbortedError without running the task when the signal is already aborted', async () => {
      const b = s.make();
      let ran = false;
      await assert.rejects(
        b.execute(
          () => {
            ran = true;
          },
          { signal: AbortSignal.abort(new Error('gone')) },
        ),
        AbortedError,
      );
      assert.equal(ran, false);
    });

    it('does not count a failure the caller caused by aborting; a deadline still counts', async () => {
      const b = s.make();
      const ac = new AbortController();
      const p = b.execute(
        (signal) =>
          new Promise((_, reject) => {
            signal.addEventListener('abort', () => reject(signal.reason));
          }),
        { signal: ac.signal },
      );
      ac.abort();
      await assert.rejects(p);
      assert.equal(s.failures(b), 0);
      const deadline = new AbortController();
      const q = b.execute(
        (signal) =>
          new Promise((_, reject) => {
            signal.addEventListener('abort', () => reject(signal.reason));
          }),
        { signal: deadline.signal },
      );
      deadline.abort(new TimeoutError('deadline'));
      await assert.rejects(q, TimeoutError);
      assert.equal(s.failures(b), 1);
    });

    it('isFailure: an acceptable error still reaches the caller but counts as a success', async () => {
      const b = s.make();
      const notFound = Object.assign(new Error('404'), { status: 404 });
      const isFailure = (e: unknown) => (e as { status?: number }).status !== 404;
      await assert.rejects(
        b.execute(
          () => {
            throw notFound;
          },
          { isFailure },
        ),
        (e) => e === notFound,
      );
      assert.equal(s.failures(b), 0);
      assert.equal(s.successes(b), 1);
      await assert.rejects(
        b.execute(
          () => {
            throw new Error('500');
          },
          { isFailure },
        ),
      );
      assert.equal(s.failures(b), 1);
    });

    it('rejects with BreakerOpenError without running the task while rejecting', async () => {
      const b = s.make();
      s.trip(b);
      let ran = false;
      await assert.rejects(
        b.execute(() => {
          ran = true;
        }),
        (e) => e instanceof BreakerOpenError && e.code === 'ERR_BREAKER_OPEN' && e.breaker === b.name,
      );
      assert.equal(ran, false);
    });

    it('answers the fallback instead when it rejects; the fallback gets the BreakerOpenError', async () => {
      const b = s.make();
      s.trip(b);
      let seen: unknown;
      const v = await b.execute(async () => 'live', {
        fallback: (err) => {
          seen = err;
          return 'cached';
        },
      });
      assert.equal(v, 'cached');
      assert.ok(seen instanceof BreakerOpenError);
      await assert.rejects(
        b.execute(async () => 'live', {
          fallback: () => {
            throw new Error('fallback broke');
          },
        }),
        /fallback broke/,
      );
    });

    it('tryAdmit answers undefined where admit throws, and lastRejection is the error admit throws', () => {
      const b = s.make() as Breaker & { tryAdmit(): unknown; lastRejection(): BreakerOpenError };
      assert.notEqual(b.tryAdmit(), undefined);
      s.trip(b);
      assert.equal(b.tryAdmit(), undefined);
      assert.throws(
        () => b.admit(),
        (e) => e === b.lastRejection(),
      );
    });

    it('does not call the fallback when the task itself fails', async () => {
      const b = s.make();
      let called = false;
      await assert.rejects(
        b.execute(
          () => {
            throw new Error('task');
          },
          {
            fallback: () => {
              called = true;
              return 0;
            },
          },
        ),
        /task/,
      );
      assert.equal(called, false);
    });

    it("rejects a task that is not a function with a TypeError, counting nothing (the caller's error)", async () => {
      const b = s.make();
      for (const bad of [undefined, null, 42, 'fn', {}]) {
        await assert.rejects(b.execute(bad as never), (e) => e instanceof TypeError && /fn must be a function/.test(e.message));
        await assert.rejects(b.execute(bad as never, { isFailure: () => true }), TypeError);
      }
      assert.equal(s.failures(b), 0);
      assert.equal(s.successes(b), 0);
      // Still healthy: a CircuitBreaker with minimumCalls: 1 would have opened on one counted failure.
      assert.equal(await b.execute(() => 'still admitted'), 'still admitted');
      if (b instanceof CircuitBreaker) assert.equal(b.state, 'closed');
    });

    it('after close() refuses every call with ClosedError and ignores late outcomes; close is idempotent', async () => {
      const b = s.make() as Breaker & { close(): Promise<void>; tryAdmit(): unknown; [Symbol.asyncDispose](): Promise<void> };
      const inFlight = b.admit();
      await b.close();
      await b[Symbol.asyncDispose]();
      inFlight.failure(new Error('late'));
      assert.throws(() => b.admit(), ClosedError);
      assert.equal(b.tryAdmit(), undefined);
      await assert.rejects(
        b.execute(() => 1),
        ClosedError,
      );
      let fellBack = false;
      const fallback = () => ((fellBack = true), 0);
      await assert.rejects(
        b.execute(() => 1, { fallback }),
        ClosedError,
      );
      assert.equal(fellBack, false, 'the fallback answers for an open breaker, not a closed one');
    });
  });
}
