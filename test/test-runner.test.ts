/**
 * scripts/test-assert.mjs is preloaded into every test process: a failing `assert.ok(value)` with no
 * message reports the value at once (node would otherwise re-parse the TypeScript source for minutes
 * looking for the expression), and a message the test gives is kept. scripts/test-stdout.mjs is preloaded
 * too, so that a test process never exits with results still unwritten.
 */
import { it } from 'node:test';
import assert, { AssertionError } from 'node:assert/strict';

it('assert.ok without a message fails at once, naming the value; with one, keeps it', () => {
  const t0 = performance.now();
  const value: number = 0;
  assert.throws(() => assert.ok(value), (e: unknown) => e instanceof AssertionError && e.message === 'The expression evaluated to a falsy value: 0');
  assert.throws(() => assert.ok(value, 'mine'), (e: unknown) => e instanceof AssertionError && e.message === 'mine');
  assert.doesNotThrow(() => assert.ok(1));
  assert.ok(performance.now() - t0 < 1_000, 'the two failures took under a second');
});

it('test processes write their results to the runner before they exit (scripts/test-stdout.mjs is preloaded)', () => {
  // Without it, --test-force-exit could end a process with its last results still queued for the pipe.
  assert.equal((globalThis as Record<symbol, unknown>)[Symbol.for('bulwark.test.stdoutBlocking')], true);
});
