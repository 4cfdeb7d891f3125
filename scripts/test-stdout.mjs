// Preloaded into every test file's process by scripts/test.mjs (--import): the process's stdout writes
// complete before it exits, and a process that would still leave results unwritten fails instead.
//
// Why: node:test's child processes send their results to the runner through stdout, a pipe, and Node
// writes to a pipe asynchronously. --test-force-exit ends a child with process.exit() once its reporter
// has closed, which drops whatever is still queued for the pipe — when the runner reads slowly (a loaded
// machine), the last results of the file. They vanished without a failure: a grouped unit run reported
// 120-129 of its 131 tests in 3 of 8 runs under load, and a failing last test would have read as a pass.
// With blocking writes (what Node does for files and terminals) nothing is left queued at exit; should
// anything still be (stdout not a pipe Node can block on), the process exits with code 1, which the
// runner reports as the file failing.
import { writeSync } from 'node:fs';

process.stdout._handle?.setBlocking?.(true);
globalThis[Symbol.for('bulwark.test.stdoutBlocking')] = typeof process.stdout._handle?.setBlocking === 'function';
process.on('exit', () => {
  if (process.stdout.writableLength > 0) {
    writeSync(2, `test process ${process.pid}: ${process.stdout.writableLength} bytes of results were still unwritten at exit\n`);
    process.exitCode = 1;
  }
});
