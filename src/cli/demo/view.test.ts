import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../../core/clock.js';
import { LatencyHistogram } from './histogram.js';
import { LiveView, progressBar, renderFrame, renderLine, type ViewSnapshot } from './view.js';

const snapshot: ViewSnapshot = {
  elapsedMs: 5_000,
  durationMs: 20_000,
  calls: 100,
  succeeded: 99,
  fallbacks: 1,
  retries: 7,
  breakerRejections: 3,
  registryDown: true,
  staleAnswers: 4,
  instances: [
    { id: 'healthy', address: '127.0.0.1:1', calls: 80, errors: 0, p50Ms: 2.5, p99Ms: 9, breaker: 'closed', ejected: false, heldOut: false },
    { id: 'flaky', address: '127.0.0.1:2', calls: 15, errors: 5, p50Ms: 3, p99Ms: 12, breaker: 'open', ejected: true, heldOut: false },
    { id: 'slow', address: '127.0.0.1:3', calls: 5, errors: 0, p50Ms: 201, p99Ms: 230, breaker: 'closed', ejected: false, heldOut: false },
  ],
};

describe('view', () => {
  it('draws the progress bar in proportion to the time elapsed', () => {
    assert.match(progressBar(5_000, 20_000, 20), /^\[█{5}░{15}\] {2}25% {2}5\.0s \/ 20\.0s$/);
    assert.match(progressBar(30_000, 20_000, 10), /^\[█{10}\] 100%/);
    // A run until Ctrl-C has no end to fill a bar towards: it says how long it has run and how to stop it.
    assert.equal(progressBar(12_345, Infinity), 'running 12.3s — Ctrl-C to stop');
    assert.match(renderLine({ ...snapshot, durationMs: Infinity }), /^\[5\.0s\/∞\] calls=100 /);
  });

  it('renders one row per instance with calls, errors, p50/p99, breaker state and health', () => {
    const lines = renderFrame(snapshot, false);
    const flaky = lines.find((l) => l.startsWith('flaky'))!;
    assert.match(flaky, /127\.0\.0\.1:2\s+15\s+5\s+33\.3%\s+3\.0ms\s+12ms\s+open\s+ejected/);
    // an open breaker the balancer holds out of rotation is not shown as in rotation
    const held = renderFrame({ ...snapshot, instances: [{ ...snapshot.instances[1]!, ejected: false, heldOut: true }] }, false);
    assert.match(
      held.find((l) => l.startsWith('flaky'))!,
      /open\s+out: breaker open$/,
    );
    assert.match(lines.join('\n'), /NOT ANSWERING/);
    assert.doesNotMatch(lines.join('\n'), /\x1b/);
    assert.match(renderFrame(snapshot, true).join('\n'), /\x1b\[31m/);
  });

  it('renders the plain one-line form without ANSI codes', () => {
    const line = renderLine(snapshot);
    assert.match(line, /^\[5\.0s\/20\.0s\] calls=100 ok=99\.0% .*registry=down stale=4/);
    assert.match(line, /flaky=15\/5err p99=12ms breaker=open ejected/);
  });

  it('redraws in place on a terminal (cursor up, clear line) every interval of its clock, and restores the cursor when stopped', () => {
    const clock = new ManualClock();
    const writes: string[] = [];
    const view = new LiveView(() => snapshot, { output: { write: (t: string) => writes.push(t), isTTY: true, columns: 200 }, intervalMs: 200, clock });
    const height = renderFrame(snapshot, true).length;
    view.start();
    assert.equal(writes[0], '\x1b[?25l', 'the cursor is hidden first');
    assert.ok(writes[1]!.startsWith('\r\x1b[2K'), 'the first frame starts on the current line');
    assert.doesNotMatch(writes[1]!, /\x1b\[\d+A/, 'the first frame has nothing above it to move over');
    assert.equal(writes[1]!.split('\n').length - 1, height);
    clock.advance(199);
    assert.equal(writes.length, 2, 'redrawn before its interval');
    clock.advance(1);
    assert.equal(writes.length, 3);
    assert.ok(writes[2]!.startsWith(`\x1b[${height}A\r\x1b[2K`), 'later frames move up over the last one');
    view.stop();
    assert.ok(writes[3]!.startsWith(`\x1b[${height}A`), 'the final frame');
    assert.equal(writes.at(-1), '\x1b[?25h');
    assert.equal(writes.length, 5);
    assert.equal(clock.pendingTimers, 0, 'stop cleared the timer');
  });

  it('prints plain lines when the output is not a terminal', () => {
    const writes: string[] = [];
    const view = new LiveView(() => snapshot, { output: { write: (t: string) => writes.push(t) }, clock: new ManualClock() });
    view.start();
    view.redraw(); // a state change shown at once, between periods
    view.stop();
    view.redraw(); // stopped: draws nothing
    assert.equal(writes.length, 3);
    assert.ok(writes.every((w) => w.endsWith('\n') && !w.includes('\x1b')));
  });
});

describe('LatencyHistogram', () => {
  it('answers quantiles within one 5 % bucket', () => {
    const h = new LatencyHistogram();
    assert.ok(Number.isNaN(h.quantile(0.5)));
    for (let i = 1; i <= 1000; i++) h.record(i);
    const p50 = h.quantile(0.5);
    const p99 = h.quantile(0.99);
    assert.ok(p50 >= 500 && p50 <= 500 * 1.05 * 1.05, `p50 ${p50}`);
    assert.ok(p99 >= 990 && p99 <= 990 * 1.05 * 1.05, `p99 ${p99}`);
    assert.equal(h.count, 1000);
  });
  it('takes odd samples without growing: 0, negative, NaN, huge', () => {
    const h = new LatencyHistogram();
    for (const x of [0, -5, Number.NaN, 1e12]) h.record(x);
    assert.equal(h.count, 4);
    assert.ok(h.quantile(1) > 100_000);
  });
});
