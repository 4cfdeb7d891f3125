import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../core/clock.js';
import { ProcessFeed } from './process-feed.js';
import type { HistogramTotals, MetricsSnapshot } from '../metrics/types.js';
import type { Point, ProcessFrame } from './types.js';

/** A metrics of one client whose counters the test sets, counting how often it is asked. */
function source() {
  const s = { calls: 0, failed: 0, snapshots: 0, hist: [0, 0, 0] as number[], count: 0 };
  return {
    s,
    snapshot(): MetricsSnapshot {
      s.snapshots++;
      return { at: '2026-01-01T00:00:00.000Z', components: [{ name: 'api', kind: 'ResilientClient', status: { calls: s.calls, failedAttempts: s.failed } }] };
    },
    histograms(): HistogramTotals[] {
      return [{ name: 'api', family: 'client_call_duration_seconds', bounds: [0.01, 0.1, 1], counts: s.hist, count: s.count, sum: 0 }];
    },
  };
}

describe('ProcessFeed', () => {
  it('takes one snapshot per tick however many listen, and hands them all the same text', () => {
    const clock = new ManualClock(0);
    const src = source();
    const feed = new ProcessFeed(src, { clock, tickMs: 1_000 });
    const got: string[][] = [[], [], []];
    for (const g of got) feed.onTick((f) => g.push(f));
    clock.advance(3_000);
    assert.equal(src.s.snapshots, 4); // the first at construction, then one per tick
    assert.equal(got[0]!.length, 3);
    assert.ok(got[0]!.every((f, i) => f === got[1]![i] && f === got[2]![i]));
    void feed.close();
    clock.advance(5_000);
    assert.equal(src.s.snapshots, 4);
  });

  it('turns counters into calls/s and errors/s and histograms into p50/p99 over the window', () => {
    const clock = new ManualClock(0);
    const src = source();
    const feed = new ProcessFeed(src, { clock, tickMs: 1_000 });
    src.s.calls = 50;
    src.s.failed = 5;
    src.s.hist = [100, 0, 0];
    src.s.count = 100;
    clock.advance(1_000);
    src.s.calls = 150;
    src.s.failed = 25;
    clock.advance(2_000); // a tick of 1 s then one with no change
    const frame = JSON.parse(feed.latest()!) as ProcessFrame;
    assert.equal(frame.mode, 'process');
    assert.deepEqual(
      frame.components.map((c) => c.name),
      ['api'],
    );
    const history = JSON.parse(feed.history()) as Point[];
    assert.equal(history.length, 4);
    assert.deepEqual(history[1]!.c.api!.slice(0, 2), [50, 5]);
    assert.deepEqual(history[2]!.c.api!.slice(0, 2), [100, 20]);
    assert.deepEqual(history[3]!.c.api!.slice(0, 2), [0, 0]);
    assert.deepEqual(history[3]!.c.api!.slice(2), [5, 9.9]);
    void feed.close();
  });

  it('keeps history for historyMs only', () => {
    const clock = new ManualClock(0);
    const feed = new ProcessFeed(source(), { clock, tickMs: 1_000, historyMs: 10_000 });
    clock.advance(60_000);
    const h = JSON.parse(feed.history()) as Point[];
    assert.equal(h.length, 11);
    assert.equal(h[0]!.t, 50_000);
    void feed.close();
  });

  it('refuses bad options by name', () => {
    assert.throws(() => new ProcessFeed(source(), { tickMs: 0 }), /ProcessFeed: tickMs must be an integer in \[10, 3600000\], got 0/);
    assert.throws(() => new ProcessFeed(source(), { tick: 5 } as never), /ProcessFeed: tick is not an option/);
    assert.throws(() => new ProcessFeed({} as never), /ProcessFeed: metrics must be a BulwarkMetrics/);
  });
});
