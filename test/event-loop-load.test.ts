/**
 * EventLoopLoad against this process's real event loop: Node's own meters see a blocked loop as busy
 * and delayed. The sampling logic itself is unit-tested on fake meters (src/limit/adaptive-shedder.test.ts);
 * this checks the wiring to `performance.eventLoopUtilization` and `monitorEventLoopDelay`, which measure
 * real time: the delay monitor records on its own 10 ms timer, so the test lets it tick before and after
 * the block (the only real-time waits, 15 ms each), and a ManualClock decides when the sample is taken.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as tick } from 'node:timers/promises';
import { ManualClock } from '../src/core/clock.js';
import { EventLoopLoad } from '../src/limit/event-loop-load.js';

/** One period of Node's delay monitor (10 ms resolution) and a little more. */
const MONITOR_TICK_MS = 15;

describe('EventLoopLoad on the real event loop', () => {
  it('reads a loop blocked for 60 ms as busy (> 50 %) and delayed (p99 ≥ 20 ms)', async () => {
    const clock = new ManualClock();
    await using load = new EventLoopLoad({ sampleMs: 100, clock });
    await tick(MONITOR_TICK_MS);
    const start = performance.now();
    while (performance.now() - start < 60) {
      // keep the loop busy: 60 ms without yielding
    }
    await tick(MONITOR_TICK_MS);
    clock.advance(100); // the sample is taken now, not when a real timer happens to fire
    const s = load.read();
    assert.ok(s.utilization > 0.5, `utilization ${s.utilization} after 60 ms of a blocked loop`);
    assert.ok(s.delayP99Ms >= 20, `delay p99 ${s.delayP99Ms} ms after 60 ms of a blocked loop`);
  });
});
