/**
 * What the test runner (scripts/test.mjs) promises every test process: a failing `assert.ok(value)` with
 * no message fails at once (an earlier node 20 re-parsed the TypeScript source for minutes looking for the
 * expression, since the compiled code's columns are not the source's, and the runner patched assert.ok;
 * node 20.20 does not), and
 * scripts/test-stdout.mjs is preloaded, so that a process never exits with results unwritten.
 */
import { it } from 'node:test';
import assert, { AssertionError } from 'node:assert/strict';

it('assert.ok without a message fails at once; with one, keeps it', () => {
  const t0 = performance.now();
  const value: number = 0;
  const during: Array<{ at: number }> = [{ at: 1 }] as Array<{ at: number }>;
  assert.throws(() => assert.ok(value), AssertionError);
  assert.throws(() => assert.ok(during.length > 10), AssertionError);
  assert.throws(
    () => assert.ok(value, 'mine'),
    (e: unknown) => e instanceof AssertionError && e.message === 'mine',
  );
  assert.doesNotThrow(() => assert.ok(1));
  assert.ok(performance.now() - t0 < 1_000, 'the failures took under a second');
});

it('test processes write their results to the runner before they exit (scripts/test-stdout.mjs is preloaded)', () => {
  // Without it, --test-force-exit could end a process with its last results still queued for the pipe.
  assert.equal((globalThis as Record<symbol, unknown>)[Symbol.for('bulwark.test.stdoutBlocking')], true);
});
