// Runs the test files that scripts/test.mjs planned, with node:test's own runner (run(): the API of
// `node --test`, which takes the files in the order given, where the command line sorts them by name):
//
//   node --import ./scripts/test-ts.mjs --import ./scripts/test-stdout.mjs scripts/test-run.mjs '<plan JSON>'
//   plan: { files: [...] (longest first), slot: [...], alone: [...], concurrency, timeoutMs, namePatterns: [...] }
//
// Two runs at once: the files in `slot` (the load-sensitive files, then those that mostly wait) one at a
// time, and every other file but `alone`'s `concurrency` at a time (node's --test-concurrency); then the
// files in `alone`, one at a time, with nothing beside them. Each file is a process of its own with --test-force-exit and the timeout,
// as under `node --test`; the --import flags this process was started with are passed on to them. The
// other files report live (spec); the slot's report is printed after theirs, so that the two do not
// interleave. Each event also goes to scripts/test-times.mjs (how long each file took, for the next
// run's order). Exit code 1 if any test failed, was cancelled or timed out.
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import { PassThrough } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import testTimes from './test-times.mjs';

const plan = JSON.parse(process.argv[2]);

/** files runs `files` `concurrency` at a time and reports them to `out`; answers whether a test failed. */
async function files(list, concurrency, out) {
  if (list.length === 0) return false;
  const stream = run({
    files: list,
    concurrency,
    timeout: plan.timeoutMs,
    forceExit: true,
    ...(plan.namePatterns.length > 0 ? { testNamePatterns: plan.namePatterns } : {}),
  });
  const visible = new PassThrough({ objectMode: true });
  const timed = new PassThrough({ objectMode: true });
  let failed = false;
  stream.on('data', (event) => {
    if (event.type === 'test:fail') failed = true;
    visible.write(event);
    timed.write(event);
  });
  stream.on('end', () => {
    visible.end();
    timed.end();
  });
  await Promise.all([pipeline(visible, spec(), out, { end: false }), testTimes(timed)]);
  return failed;
}

const held = new PassThrough();
const report = [];
held.on('data', (chunk) => report.push(chunk));
const [slotFailed, othersFailed] = await Promise.all([
  files(plan.slot, 1, held),
  files(
    plan.files.filter((f) => !plan.slot.includes(f) && !plan.alone.includes(f)),
    plan.concurrency,
    process.stdout,
  ),
]);
if (plan.slot.length > 0) process.stdout.write(`\n# run one at a time beside the others: ${plan.slot.join(', ')}\n${Buffer.concat(report).toString()}`);
if (plan.alone.length > 0) process.stdout.write(`\n# run alone, after the others: ${plan.alone.join(', ')}\n`);
const aloneFailed = await files(plan.alone, 1, process.stdout);
process.exit(slotFailed || othersFailed || aloneFailed ? 1 : 0);
