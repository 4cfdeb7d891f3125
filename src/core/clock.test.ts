import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock, systemClock } from './clock.js';

describe('ManualClock', () => {
  it('moves only when advanced or set', () => {
    const c = new ManualClock(5);
    assert.equal(c.now(), 5);
    assert.equal(c.advance(10), 15);
    c.set(100);
    assert.equal(c.now(), 100);
  });
  it('rejects going backwards and non-finite steps', () => {
    const c = new ManualClock(10);
    assert.throws(() => c.set(5), RangeError);
    assert.throws(() => c.advance(-1), RangeError);
    assert.throws(() => c.advance(Number.NaN), RangeError);
    assert.throws(() => new ManualClock(Infinity), RangeError);
  });
});

describe('systemClock', () => {
  it('is monotonic', () => {
    let prev = systemClock.now();
    for (let i = 0; i < 1000; i++) {
      const t = systemClock.now();
      assert.ok(t >= prev);
      prev = t;
    }
  });
});

describe('ManualClock timers', () => {
  it('fires timers that fall due inside advance, in due order, reading each due time', () => {
    const c = new ManualClock(0);
    const seen: string[] = [];
    c.setTimeout(() => seen.push(`b@${c.now()}`), 20);
    c.setTimeout(() => seen.push(`a@${c.now()}`), 10);
    c.setTimeout(() => seen.push(`c@${c.now()}`), 30);
    assert.equal(c.advance(25), 25);
    assert.deepEqual(seen, ['a@10', 'b@20']);
    assert.equal(c.pendingTimers, 1);
    c.advance(5);
    assert.deepEqual(seen, ['a@10', 'b@20', 'c@30']);
  });

  it('fires ties in the order they were set, and a timer set while firing in the same advance', () => {
    const c = new ManualClock(0);
    const seen: number[] = [];
    c.setTimeout(() => {
      seen.push(1);
      c.setTimeout(() => seen.push(3), 5); // due at 15, inside this advance
    }, 10);
    c.setTimeout(() => seen.push(2), 10);
    c.advance(100);
    assert.deepEqual(seen, [1, 2, 3]);
  });

  it('repeats intervals until cleared, and ignores clearing a fired or foreign handle', () => {
    const c = new ManualClock(0);
    let n = 0;
    const h = c.setInterval(() => n++, 10);
    c.advance(35);
    assert.equal(n, 3);
    c.clearTimeout(h);
    c.advance(100);
    assert.equal(n, 3);
    const once = c.setTimeout(() => n++, 1);
    c.advance(1);
    c.clearTimeout(once);
    c.clearTimeout(undefined);
    c.clearTimeout(setTimeout(() => {}, 0));
    assert.equal(n, 4);
    assert.equal(c.pendingTimers, 0);
  });

  it('clamps delays below 1 ms to 1 ms, as Node does', () => {
    const c = new ManualClock(0);
    let fired = false;
    c.setTimeout(() => (fired = true), 0);
    c.advance(0);
    assert.equal(fired, false);
    c.advance(1);
    assert.equal(fired, true);
  });

  it('advanceAsync lets awaits between timers run, so a loop that awaits then re-arms is driven to the end', async () => {
    const c = new ManualClock(0);
    const STEP_MS = 100; // manual-clock time: the test never waits on real time
    const ticks: number[] = [];
    const loop = async () => {
      for (let i = 0; i < 5; i++) {
        await new Promise<void>((r) => c.setTimeout(r, STEP_MS));
        await Promise.resolve();
        ticks.push(c.now());
      }
    };
    const done = loop();
    await c.advanceAsync(1_000);
    await done;
    assert.deepEqual(ticks, [100, 200, 300, 400, 500]);
  });

  it('fires any schedule in (due, order set) order whatever the advance steps (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 200 }), { minLength: 1, maxLength: 40 }),
        fc.array(fc.integer({ min: 0, max: 60 }), { minLength: 1, maxLength: 20 }),
        fc.array(fc.nat(39), { maxLength: 10 }),
        (delays, steps, cancels) => {
          const c = new ManualClock(0);
          const fired: number[] = [];
          const handles = delays.map((d, i) => c.setTimeout(() => fired.push(i), d));
          const cancelled = new Set(cancels.filter((i) => i < delays.length));
          for (const i of cancelled) c.clearTimeout(handles[i]);
          for (const s of steps) c.advance(s);
          c.advance(1_000);
          const expected = delays
            .map((d, i) => ({ due: Math.max(1, d), i }))
            .filter((x) => !cancelled.has(x.i))
            .sort((a, b) => a.due - b.due || a.i - b.i)
            .map((x) => x.i);
          assert.deepEqual(fired, expected);
        },
      ),
    );
  });
});

describe('systemClock timers', () => {
  it('runs a real timer and clears it', async () => {
    let fired = 0;
    const cleared = systemClock.setTimeout(() => fired++, 1);
    systemClock.clearTimeout(cleared);
    await new Promise<void>((r) => systemClock.setTimeout(r, 2));
    assert.equal(fired, 0);
  });
});
