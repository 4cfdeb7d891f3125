// The test runner scripts/test.mjs starts (with the TypeScript loader preloaded, which every test file's
// process inherits): it runs the test files it is given in lanes, instead of `node --test` running them
// all N at a time, and reports them as one run.
//
// Why lanes: about a third of the suite's wall time is files that mostly WAIT (etcd elections and lease
// TTLs, a Redis Cluster failover, outages, Prometheus scrapes: wall ≥ 2× their CPU time). Among the two
// slots of `--test-concurrency=2` they hold a slot while a core idles; a third slot for every file lets two
// CPU-bound files and a third share two cores, and the load-sensitive ones fail (see SENSITIVE in test.mjs).
// Here the CPU-bound files run `cpu` at a time (2) and the waiting ones beside them in a lane of their own
// (`wait`, 1), and while a load-sensitive file runs, no waiting file starts and no other sensitive file.
//
// Each file is a node:test run() of its own (process isolation, --test-force-exit and the per-file timeout
// as under `node --test`); their events go to the reporters as one stream, one file's events at a time (the
// others' wait in a buffer, as `node --test` orders files' output): top-level tests numbered in one
// sequence, one plan, and one summary (tests, pass, fail … summed over the files), then a line per failed
// test (`# failed: <file> › <suite> › <test> — <first line of the error>`), so a log's tail names them.
//
//   node --import ./scripts/test-ts.mjs --import ./scripts/test-assert.mjs scripts/test-lanes.mjs '<plan JSON>'
// plan: { files: [{ file, kind: 'cpu' | 'wait' | 'sensitive' }] (in start order), cpu, wait, timeoutMs,
// reporter: 'spec' | 'tap', timesReporter: path of a reporter module for stderr }
import { run } from 'node:test';
import { spec, tap } from 'node:test/reporters';
import { PassThrough, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

const plan = JSON.parse(process.argv[2]);
const started = performance.now();

// --- the reporters, fed one merged stream -------------------------------------------------------------
const visible = new PassThrough({ objectMode: true });
const times = new PassThrough({ objectMode: true });
const emit = (event) => {
  visible.write(event);
  times.write(event);
};
const reporting = Promise.all([
  pipeline(plan.reporter === 'spec' ? visible.pipe(spec()) : Readable.from(tap(visible)), process.stdout, { end: false }),
  import(plan.timesReporter).then(({ default: reporter }) => pipeline(Readable.from(reporter(times)), process.stderr, { end: false })),
]);

const SUMMARY = /^(tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) ([\d.]+)$/;
const totals = { tests: 0, suites: 0, pass: 0, fail: 0, cancelled: 0, skipped: 0, todo: 0 };
let topLevel = 0;
/** The failed tests (not suites), one line each, repeated after the summary: a CI log's tail names them. */
const failures = [];
const path = []; // names of the tests started, by nesting (files' events are forwarded one file at a time)
const failureLine = ({ file, name, nesting, details }) => {
  const cause = details?.error?.cause ?? details?.error;
  const message = String(cause?.message ?? cause ?? '').split('\n').find((l) => l.trim() !== '') ?? '';
  return `failed: ${file === undefined ? '' : `${file.replace(process.cwd() + '/', '')} › `}${[...path.slice(0, nesting), name].join(' › ')}${message === '' ? '' : ` — ${message.trim().slice(0, 300)}`}`;
};

/** forward passes one file's event on: its run's plan and summary are left out (one of each at the end). */
function forward(event) {
  const { type, data } = event;
  if (data?.nesting === 0 && data.file === undefined) {
    if (type === 'test:plan') return;
    const m = type === 'test:diagnostic' ? SUMMARY.exec(data.message) : null;
    if (m !== null) {
      if (m[1] in totals) totals[m[1]] += Number(m[2]);
      return;
    }
  }
  if ((type === 'test:pass' || type === 'test:fail') && data.nesting === 0) data.testNumber = ++topLevel;
  if (type === 'test:start') path.splice(data.nesting, Infinity, data.name);
  if (type === 'test:fail' && data.details?.type !== 'suite') failures.push(failureLine(data));
  emit(event);
}

// --- one file's output at a time ------------------------------------------------------------------------
/** Output of the runs: `current` reports live; the others keep their events until it is its turn. */
const buffered = new Map();
const ended = new Set();
let current;

function onEvent(id, event) {
  if (current === undefined) current = id;
  if (id === current) forward(event);
  else buffered.get(id).push(event);
}

function onEnd(id) {
  ended.add(id);
  if (id !== current) return;
  current = undefined;
  // Files that ended meanwhile go out whole; then one that is still running, from its buffer on.
  for (const [other, events] of buffered) {
    if (ended.has(other)) {
      for (const e of events) forward(e);
      buffered.delete(other);
    }
  }
  for (const [other, events] of buffered) {
    if (other === id) continue;
    for (const e of events) forward(e);
    events.length = 0;
    current = other;
    break;
  }
  buffered.delete(id);
}

// --- the lanes -----------------------------------------------------------------------------------------
const queue = [...plan.files];
const running = new Map(); // id → kind
let nextId = 0;
let finish;
const allDone = new Promise((resolve) => (finish = resolve));

/** trace writes when each file starts and ends to stderr, with BULWARK_TEST_TRACE=1 (to see the lanes at work). */
const trace = process.env.BULWARK_TEST_TRACE === '1'
  ? (what, file, kind) => process.stderr.write(`# ${((performance.now() - started) / 1000).toFixed(1).padStart(6)} s ${what.padEnd(5)} ${kind.padEnd(9)} ${file}\n`)
  : () => {};
const count = (kind) => [...running.values()].filter((k) => k === kind).length;
function canStart(kind) {
  if (kind === 'wait') return count('wait') < plan.wait && count('sensitive') === 0;
  const cpu = count('cpu') + count('sensitive');
  if (kind === 'sensitive') return cpu < plan.cpu && count('sensitive') === 0;
  return cpu < plan.cpu;
}

function schedule() {
  for (let i = 0; i < queue.length; ) {
    const { file, kind } = queue[i];
    if (!canStart(kind)) {
      i++;
      continue;
    }
    queue.splice(i, 1);
    const id = nextId++;
    running.set(id, kind);
    buffered.set(id, []);
    trace('start', file, kind);
    const stream = run({ files: [file], concurrency: 1, timeout: plan.timeoutMs, forceExit: true });
    stream.on('data', (event) => onEvent(id, event));
    stream.on('end', () => {
      trace('end', file, kind);
      running.delete(id);
      onEnd(id);
      schedule();
    });
  }
  if (queue.length === 0 && running.size === 0) finish();
}
schedule();
await allDone;

// --- one plan and one summary --------------------------------------------------------------------------
emit({ type: 'test:plan', data: { nesting: 0, count: topLevel } });
for (const [name, value] of Object.entries(totals)) emit({ type: 'test:diagnostic', data: { nesting: 0, message: `${name} ${value}` } });
emit({ type: 'test:diagnostic', data: { nesting: 0, message: `duration_ms ${performance.now() - started}` } });
for (const message of failures) emit({ type: 'test:diagnostic', data: { nesting: 0, message } });
visible.end();
times.end();
await reporting;
process.exit(totals.fail > 0 || totals.cancelled > 0 ? 1 : 0);
