// A consumer of node:test's events that scripts/test-run.mjs runs beside the visible reporter: it records how long each
// test file's tests took ({ "<absolute path>": seconds, the sum of its top-level tests and suites }) in
// the JSON file named by BULWARK_TEST_TIMES_FILE, so that the next run can start the longest files first
// (node's runner starts files in the order given: a long real-server file started last would run on
// alone while the other slots idle). The file is rewritten as each file's top-level test ends; the two
// runs of scripts/test-run.mjs share the record (module scope).
import { writeFileSync } from 'node:fs';

const seconds = {};

export default async function testTimes(source) {
  const out = process.env.BULWARK_TEST_TIMES_FILE;
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const { file, nesting, details } = event.data;
    if (file === undefined || nesting !== 0) continue;
    seconds[file] = (seconds[file] ?? 0) + (details?.duration_ms ?? 0) / 1000;
    if (out !== undefined) writeFileSync(out, JSON.stringify(seconds));
  }
}
