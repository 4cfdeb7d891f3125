import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { LatencyWindow, quantileMs } from './latency.js';

const BOUNDS = [0.005, 0.01, 0.025, 0.05, 0.1];

describe('quantileMs', () => {
  it('interpolates within the bucket the rank falls in, as histogram_quantile does', () => {
    // 100 observations: 50 in (0, 5 ms], 40 in (5, 10], 10 in (10, 25]
    assert.equal(quantileMs(0.5, BOUNDS, [50, 40, 10, 0, 0], 100), 5);
    assert.equal(quantileMs(0.25, BOUNDS, [50, 40, 10, 0, 0], 100), 2.5);
    assert.ok(Math.abs(quantileMs(0.99, BOUNDS, [50, 40, 10, 0, 0], 100)! - 23.5) < 1e-9);
  });

  it('answers the last bound for a rank above it, and null with no observations', () => {
    assert.equal(quantileMs(0.99, BOUNDS, [0, 0, 0, 0, 1], 10), 100);
    assert.equal(quantileMs(0.5, BOUNDS, [0, 0, 0, 0, 0], 0), null);
  });
});

describe('LatencyWindow', () => {
  it('takes percentiles over the window only, from the difference of two readings', () => {
    const w = new LatencyWindow(60_000);
    assert.deepEqual(w.add(0, BOUNDS, [0, 0, 0, 0, 0], 0), [null, null]);
    // the first minute: everything slow (50–100 ms)
    assert.deepEqual(
      w.add(30_000, BOUNDS, [0, 0, 0, 0, 100], 100).map((x) => Math.round(x! * 1e6) / 1e6),
      [75, 99.5],
    );
    // a minute later all new observations are fast; the slow ones have left the window
    w.add(60_000, BOUNDS, [0, 0, 0, 0, 100], 100);
    const [p50, p99] = w.add(95_000, BOUNDS, [100, 0, 0, 0, 100], 200);
    assert.equal(p50, 2.5);
    assert.ok(p99! <= 5, `p99 ${p99} should not see the slow minute`);
  });

  it('answers null when nothing was observed in the window', () => {
    const w = new LatencyWindow(1_000);
    w.add(0, BOUNDS, [5, 0, 0, 0, 0], 5);
    assert.deepEqual(w.add(2_000, BOUNDS, [5, 0, 0, 0, 0], 5), [null, null]);
  });
});
