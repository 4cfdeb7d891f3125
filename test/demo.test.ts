// `bulwark demo` as a user runs it: a child process, a short duration, no terminal (plain lines).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { runBulwark } from './serve-harness.js';

/** bulwark runs the CLI as a child process (one helper for every CLI test). */
const bulwark = (args: string[], timeoutMs = 60_000) => runBulwark(args, timeoutMs);

// Each test runs processes of its own: all at once (the 3 s run is the longest; the others end beside it).
describe('bulwark demo', { concurrency: true }, () => {
  it('runs for --duration 3s, prints live lines and the summary, and exits 0 by itself', async (t) => {
    const started = Date.now();
    const r = await bulwark(['demo', '--duration', '3s']);
    assert.equal(r.code, 0, r.stderr);
    const took = Date.now() - started;
    assert.ok(took >= 3_000, `exited after ${took} ms, before its duration`);
    assert.match(r.stdout, /^\[\d+\.\ds\/3\.0s\] calls=/m, 'no plain progress line');
    assert.match(r.stdout, /registry=down/, 'the registry outage never showed');
    assert.match(r.stdout, /Summary/);
    // Every call has a fallback, so "answered" would always be 100 %: count what the instances answered.
    const calls = Number(/^\s+calls\s+(\d+) in/m.exec(r.stdout)?.[1]);
    const byInstance = /^\s+by an instance\s+([\d.]+) % of calls \((\d+)\)/m.exec(r.stdout);
    const byFallback = /^\s+by the fallback\s+([\d.]+) % of calls \((\d+)\)/m.exec(r.stdout);
    const failed = /^\s+failed\s+(\d+) calls/m.exec(r.stdout);
    assert.ok(calls > 0 && byInstance !== null && byFallback !== null && failed !== null, r.stdout);
    assert.equal(Number(byInstance[2]) + Number(byFallback[2]) + Number(failed[1]), calls, 'instance + fallback + failed = calls');
    // On a quiet machine every call is answered by an instance; on one so loaded that the demo's 1 s
    // attempt timeouts fire, the fallback answers many: the share is reported, the counts asserted.
    t.diagnostic(`${byInstance[1]} % of ${calls} calls answered by an instance, ${byFallback[1]} % by the fallback`);
    assert.ok(Number(byInstance[2]) > 0, 'no call was answered by an instance');
    assert.equal(Number(failed[1]), 0, 'a call failed although every call has a fallback');
    for (const id of ['healthy', 'flaky', 'slow']) assert.match(r.stdout, new RegExp(`^${id}\\s+127\\.0\\.0\\.1:\\d+`, 'm'));
    assert.doesNotMatch(r.stdout, /\x1b\[/, 'ANSI codes written to a pipe');
  });

  it('explains itself with --help and exits 0', async () => {
    const r = await bulwark(['demo', '--help']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /--duration/);
    assert.match(r.stdout, /registry/);
    const top = await bulwark(['--help']);
    assert.equal(top.code, 0);
    assert.match(top.stdout, /demo/);
    assert.match(top.stdout, /^ {2}serve /m);
    assert.match(top.stdout, /^ {2}registry /m);
    assert.doesNotMatch(top.stdout, /coming|not built/, 'the help offers only what is built');
  });

  it('refuses an unknown command with exit code 2', async () => {
    const r = await bulwark(['nope']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /unknown command 'nope'/);
  });

  it('rejects a bad flag with exit code 2 and the help', async () => {
    const r = await bulwark(['demo', '--duration', 'soon']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--duration must be a duration/);
    const u = await bulwark(['demo', '--colour']);
    assert.equal(u.code, 2);
    assert.match(u.stderr, /unknown option --colour/);
  });
});
