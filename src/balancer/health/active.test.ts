import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../../core/clock.js';
import type { ServiceInstance } from '../../registry/types.js';
import { ActiveHealthChecker, checkHealthPath, type HealthEvent } from './active.js';

const inst = (id: string): ServiceInstance => ({ id, name: 'svc', address: `127.0.0.1:${1}` });
const LONG = 3_600_000; // timers never fire in these tests: checkNow drives the probes

describe('ActiveHealthChecker', () => {
  it('marks an instance down after 3 failed probes and up after 2 good ones', async () => {
    let healthy = true;
    const c = new ActiveHealthChecker({ intervalMs: LONG, probe: async () => healthy });
    const events: HealthEvent[] = [];
    c.onChange((e) => events.push(e));
    c.update([inst('a')]);
    assert.equal(c.isHealthy('a'), true);
    healthy = false;
    await c.checkNow();
    await c.checkNow();
    assert.equal(c.isHealthy('a'), true);
    await c.checkNow();
    assert.equal(c.isHealthy('a'), false);
    healthy = true;
    await c.checkNow();
    assert.equal(c.isHealthy('a'), false);
    await c.checkNow();
    assert.equal(c.isHealthy('a'), true);
    assert.deepEqual(events, [
      { id: 'a', healthy: false },
      { id: 'a', healthy: true },
    ]);
    await c.close();
  });

  it('counts a probe that throws or outlives its timeout as a failure', async () => {
    const clock = new ManualClock();
    const c = new ActiveHealthChecker({
      clock,
      intervalMs: LONG,
      timeoutMs: 20,
      unhealthyThreshold: 2,
      probe: (i, signal) =>
        i.id === 'throws' ? Promise.reject(new Error('boom')) : new Promise((resolve) => signal.addEventListener('abort', () => resolve(true))),
    });
    c.update([inst('throws'), inst('hangs')]);
    for (let round = 0; round < 2; round++) {
      const done = c.checkNow();
      await clock.advanceAsync(19);
      assert.equal(c.stats().probing, 1, 'the hanging probe is still in flight before its timeout');
      await clock.advanceAsync(1);
      await done;
    }
    assert.equal(c.isHealthy('throws'), false);
    assert.equal(c.isHealthy('hangs'), false, 'a probe answering only after its abort is a failure');
    assert.deepEqual(c.stats(), { instances: 2, down: 2, probing: 0 });
    await c.close();
  });

  it('stops probing a removed instance at once: its probe in flight is aborted and yields no verdict', async () => {
    let aborted = 0;
    let probes = 0;
    const c = new ActiveHealthChecker({
      intervalMs: LONG,
      timeoutMs: 60_000,
      probe: (_i, signal) => {
        probes++;
        return new Promise((resolve) =>
          signal.addEventListener('abort', () => {
            aborted++;
            resolve(false);
          }),
        );
      },
    });
    c.update([inst('a'), inst('b')]);
    const round = c.checkNow();
    c.update([inst('b')]);
    assert.equal(aborted, 1);
    assert.equal(c.stats().instances, 1);
    await c.close();
    await round;
    assert.equal(probes, 2);
    assert.equal(c.isHealthy('a'), true); // no state: not probed, counts as up
  });

  it('probes on its own timer, the first within one interval and then every interval ± jitter, and stops on close', async () => {
    const clock = new ManualClock();
    const times: number[] = [];
    const random = (() => {
      const seq = [0.5, 0, 0.75]; // first probe at half an interval, then spreads of 0.5 and 1.25 intervals
      let k = 0;
      return () => seq[Math.min(k++, seq.length - 1)]!;
    })();
    await using c = new ActiveHealthChecker({ clock, intervalMs: 1_000, jitter: 0.5, random, probe: async () => (times.push(clock.now()), true) });
    c.update([inst('a')]);
    await clock.advanceAsync(499);
    assert.deepEqual(times, []);
    await clock.advanceAsync(1);
    assert.deepEqual(times, [500]);
    await clock.advanceAsync(500); // 500 + 1 000 × (1 − 0.5)
    assert.deepEqual(times, [500, 1_000]);
    await clock.advanceAsync(1_249); // then 1 000 × 1.25, just under
    assert.deepEqual(times, [500, 1_000]);
    await clock.advanceAsync(1);
    assert.deepEqual(times, [500, 1_000, 2_250]);
    await c.close();
    assert.equal(clock.pendingTimers, 0, 'close cleared the timer');
    await clock.advanceAsync(10_000);
    assert.equal(times.length, 3);
  });

  it('adds and removes one instance without touching the others', async () => {
    const clock = new ManualClock();
    let probes = 0;
    // random 0.5: the first probe at half an interval, the next one a whole interval later (unseeded, two could land in 1 000 ms)
    const c = new ActiveHealthChecker({ clock, intervalMs: 1_000, random: () => 0.5, probe: async () => (probes++, true) });
    c.add(inst('a'));
    c.add(inst('b'));
    c.add(inst('a')); // already probed: only its object is taken
    assert.equal(c.stats().instances, 2);
    assert.equal(clock.pendingTimers, 2);
    c.remove('a');
    assert.equal(clock.pendingTimers, 1);
    await clock.advanceAsync(1_000);
    assert.equal(probes, 1);
    await c.close();
    c.add(inst('c')); // closed: ignored
    assert.equal(c.stats().instances, 0);
  });

  const paths: [unknown, boolean][] = [
    ['/health', true],
    ['/', true],
    ['/ready?deep=1', true],
    ['/a/b-c_d.e~f', true],
    ['health', false],
    ['http://x/health', false],
    ['//evil.example/health', false],
    ['/he alth', false],
    ['/health#frag', false],
    ['/health\n', false],
    ['', false],
    [42, false],
    [undefined, false],
  ];
  for (const [path, ok] of paths) {
    it(`${ok ? 'accepts' : 'rejects with TypeError'} health path ${JSON.stringify(path)}`, () => {
      if (ok) assert.equal(checkHealthPath('t', path), path);
      else {
        assert.throws(() => checkHealthPath('t', path), TypeError);
        if (path !== undefined) assert.throws(() => new ActiveHealthChecker({ path: path as string }), TypeError);
      }
    });
  }

  it('rejects bad options', () => {
    assert.throws(() => new ActiveHealthChecker({ intervalMs: 0 }), RangeError);
    assert.throws(() => new ActiveHealthChecker({ timeoutMs: -1 }), RangeError);
    assert.throws(() => new ActiveHealthChecker({ unhealthyThreshold: 0 }), RangeError);
    assert.throws(() => new ActiveHealthChecker({ jitter: 1 }), RangeError);
    assert.throws(() => new ActiveHealthChecker({ probe: 'x' as never }), TypeError);
  });
});
