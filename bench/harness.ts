/**
 * Benchmark harness. A bench file declares subjects; the parent process runs each subject in its own
 * child process (JIT state from one subject must not slow another), `runs` times, interleaved so that
 * machine noise spreads over all subjects, then prints the median of each and its ratio to the baseline.
 *
 *   // bench/example.bench.ts
 *   import { bench } from './harness.js';
 *   await bench('example', {
 *     baseline: 'bare call',
 *     subjects: {
 *       'bare call': () => ({ op: () => f() }),
 *       'ours': async () => { const x = await setup(); return { op: () => x.run(), async: true }; },
 *     },
 *   });
 *
 * Run compiled: `npm run bench` (all) or `npm run bench -- example` (files whose names contain "example").
 * `node --import tsx bench/example.bench.ts` works too, but tsx's keepNames slows closures: use it only while iterating.
 * A section may state its `targets` (see `Target`, `atMost`, `fasterBy`): each is printed ✓/✗ after the table.
 * A subject whose child crashes makes the run exit non-zero.
 * Environment: BENCH_RUNS (default 5), BENCH_MS (measured time per child, default 1 000),
 * BENCH_FILTER (substring of subject names), BENCH_SECTION (substring of section titles: the others are skipped),
 * BENCH_PIN (a CPU list for `taskset -c`, e.g. `0`: every child runs on those CPUs). On this project's
 * 2-vCPU machine a core's speed depends on its host and changes over minutes: at one time a bare `await`
 * loop took 47–52 ns on CPU 0 and 79–87 ns on CPU 1, later 49–56 ns on both. Pinned, the children share
 * one core's state rather than comparing the cores they landed on; what remains between them is the
 * drift in time, which only the interleaved sections (every path in one process) remove.
 * What a child starts (a server, a load generator) inherits the pin: leave it unset for those sections.
 */
import { spawnSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

/** Subject is what one child measures: `op` called in a loop (awaited when `async`). */
export interface Subject {
  op: () => unknown;
  /** op returns a promise to await. Defaults to false. */
  async?: boolean;
  /** Ops per timed batch (the clock is read once per batch). Defaults to 1 000 (sync) / 100 (async). */
  batch?: number;
  /** Runs after measuring (close servers, connections). */
  teardown?: () => unknown;
  /** Extra numbers to report (e.g. heap bytes, p99); the median of each is printed. */
  extra?: () => Record<string, number> | Promise<Record<string, number>>;
}

/** Medians is what a target is checked against: the medians of the subjects of one section. */
export interface Medians {
  /** ns per op of `subject` (NaN when it failed or was filtered out). */
  ns(subject: string): number;
  /** The median of an extra number `key` of `subject`. */
  extra(subject: string, key: string): number;
}

/**
 * Target is one number a bench's header promises. After the table the harness prints each as ✓ or ✗
 * with the measured value; a target whose subjects did not run prints `–` (filtered out) or ✗ (failed).
 */
export interface Target {
  /** What is promised, e.g. `SreBreaker.execute ≤ 2× bare await`. */
  label: string;
  /**
   * The measured value (a ratio, a time) and whether it meets the target; NaN values count as not met.
   * `note` is printed after the value (e.g. the reading's standard error).
   */
  check(m: Medians): { value: number; ok: boolean; unit?: string; note?: string };
}

/** atMost: `subject` takes at most `max` × the time of `than` (ns/op ratio). */
export function atMost(label: string, subject: string, than: string, max: number): Target {
  return {
    label,
    check: (m) => {
      const value = m.ns(subject) / m.ns(than);
      return { value, ok: value <= max, unit: '×' };
    },
  };
}

/**
 * timeTurns runs each turn of an interleaved section once, in order, and answers the ms each took: what
 * one round of such a section measures (each turn's loop its own function, so that no call site is
 * shared between the paths it compares).
 */
export async function timeTurns(turns: Record<string, () => Promise<void>>): Promise<Record<string, number>> {
  const ms: Record<string, number> = {};
  for (const [k, turn] of Object.entries(turns)) {
    const t = performance.now();
    await turn();
    ms[k] = performance.now() - t;
  }
  return ms;
}

/** fasterBy: `subject` is at least `min` × faster than `than` (their time ratio `than / subject` ≥ min). */
export function fasterBy(label: string, subject: string, than: string, min: number): Target {
  return {
    label,
    check: (m) => {
      const value = m.ns(than) / m.ns(subject);
      return { value, ok: value >= min, unit: '× faster' };
    },
  };
}

/** BenchSpec names the subjects of one bench file and the baseline the ratios are taken against. */
export interface BenchSpec {
  baseline?: string;
  subjects: Record<string, () => Subject | Promise<Subject>>;
  /** Measured time per child in ms. Defaults to BENCH_MS or 1 000. */
  durationMs?: number;
  /**
   * Children per subject. Defaults to BENCH_RUNS or 5. An interleaved section whose reading is a median of
   * per-round ratios may run one longer child instead: its median is then taken over every round at once
   * (and its standard error is that of the reading), not a median of a few short runs' medians.
   */
  runs?: number;
  /** The numbers this section promises, checked and printed ✓/✗ after its table. Defaults to none. */
  targets?: Target[];
}

interface Result {
  nsPerOp: number;
  opsPerSec: number;
  extra: Record<string, number>;
}

async function measure(subject: Subject, durationMs: number): Promise<Result> {
  const { op } = subject;
  const isAsync = subject.async === true;
  const batch = subject.batch ?? (isAsync ? 100 : 1_000);
  const runFor = async (ms: number) => {
    let ops = 0;
    const start = performance.now();
    let now = start;
    while (now - start < ms) {
      if (isAsync) for (let i = 0; i < batch; i++) await op();
      else for (let i = 0; i < batch; i++) op();
      ops += batch;
      now = performance.now();
    }
    return { ops, ms: now - start };
  };
  await runFor(Math.min(300, durationMs / 3)); // warm-up: let the JIT settle
  const { ops, ms } = await runFor(durationMs);
  const extra = (await subject.extra?.()) ?? {};
  await subject.teardown?.();
  return { nsPerOp: (ms * 1e6) / ops, opsPerSec: ops / (ms / 1000), extra };
}

/** pinned answers the command that runs node with `args`: under `taskset -c $BENCH_PIN` when it is set. */
function pinned(args: string[]): [string, string[]] {
  const cpus = process.env.BENCH_PIN;
  return cpus ? ['taskset', ['-c', cpus, process.execPath, ...args]] : [process.execPath, args];
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function fmtRate(x: number): string {
  if (x >= 1e6) return `${(x / 1e6).toFixed(2)} M/s`;
  if (x >= 1e3) return `${(x / 1e3).toFixed(1)} k/s`;
  return `${x.toFixed(1)} /s`;
}

function fmtNs(x: number): string {
  return x >= 1e6 ? `${(x / 1e6).toFixed(2)} ms` : x >= 1e3 ? `${(x / 1e3).toFixed(2)} µs` : `${x.toFixed(1)} ns`;
}

/**
 * bench runs the file's subjects. In a child (argv `--child <name>`) it measures that one subject and
 * prints its result as JSON; in the parent it spawns the children and prints the table.
 */
export async function bench(title: string, spec: BenchSpec, file: string = process.argv[1]!): Promise<void> {
  const durationMs = spec.durationMs ?? Number(process.env.BENCH_MS ?? 1_000);
  const childAt = process.argv.indexOf('--child');
  if (childAt >= 0) {
    // A file may hold several bench() sections: the child measures only the one it was spawned for.
    const section = process.argv[process.argv.indexOf('--section') + 1];
    if (section !== title) return;
    const name = process.argv[childAt + 1]!;
    const make = spec.subjects[name];
    if (make === undefined) throw new Error(`no subject ${name}`);
    const result = await measure(await make(), durationMs);
    process.stdout.write(`@@RESULT ${JSON.stringify(result)}\n`);
    process.exit(0);
  }
  const only = process.env.BENCH_SECTION;
  if (only && !title.includes(only)) return;
  const runs = spec.runs ?? Number(process.env.BENCH_RUNS ?? 5);
  const filter = process.env.BENCH_FILTER;
  const names = Object.keys(spec.subjects).filter((n) => !filter || n.includes(filter) || n === spec.baseline);
  const results = new Map<string, Result[]>(names.map((n) => [n, []]));
  const path = file.startsWith('file:') ? fileURLToPath(file) : file;
  process.stdout.write(`\n## ${title}  (${runs} runs × ${durationMs} ms per subject, each in its own process)\n`);
  for (let r = 0; r < runs; r++) {
    for (const name of names) {
      const [command, args] = pinned([...process.execArgv, path, '--child', name, '--section', title]);
      const child = spawnSync(command, args, {
        encoding: 'utf8',
        env: process.env,
        timeout: durationMs * 10 + 60_000,
        maxBuffer: 16 << 20,
      });
      const line = child.stdout.split('\n').find((l) => l.startsWith('@@RESULT '));
      if (child.status !== 0 || line === undefined) {
        process.stdout.write(`  ${name}: child failed (status ${child.status})\n${child.stderr.slice(-2000)}\n`);
        process.exitCode = 1; // a crashed subject fails the run (npm run bench exits non-zero)
        continue;
      }
      results.get(name)!.push(JSON.parse(line.slice(9)) as Result);
    }
  }
  const base = spec.baseline !== undefined ? results.get(spec.baseline) : undefined;
  const baseNs = base && base.length ? median(base.map((x) => x.nsPerOp)) : undefined;
  const rows: string[][] = [['subject', 'median ops/s', 'ns/op', baseNs ? `time vs ${spec.baseline}` : '', 'extra']];
  for (const name of names) {
    const rs = results.get(name)!;
    if (rs.length === 0) {
      rows.push([name, 'failed', '', '', '']);
      continue;
    }
    const ns = median(rs.map((x) => x.nsPerOp));
    const extraKeys = Object.keys(rs[0]!.extra);
    const extra = extraKeys.map((k) => `${k}=${+median(rs.map((x) => x.extra[k] ?? NaN)).toPrecision(4)}`).join(' ');
    rows.push([name, fmtRate(1e9 / ns), fmtNs(ns), baseNs ? `${(ns / baseNs).toFixed(2)}×` : '', extra]);
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  for (const r of rows) process.stdout.write(`  ${r.map((c, i) => c.padEnd(widths[i]!)).join('  ')}\n`);
  if (spec.targets?.length) printTargets(spec.targets, results, names);
}

function printTargets(targets: Target[], results: Map<string, Result[]>, ran: string[]): void {
  const pick = (subject: string, f: (r: Result) => number) => {
    const rs = results.get(subject);
    return rs && rs.length ? median(rs.map(f)) : NaN;
  };
  let missing = false;
  const m: Medians = {
    ns: (s) => {
      if (!ran.includes(s)) missing = true;
      return pick(s, (r) => r.nsPerOp);
    },
    extra: (s, k) => {
      if (!ran.includes(s)) missing = true;
      return pick(s, (r) => r.extra[k] ?? NaN);
    },
  };
  process.stdout.write('  targets:\n');
  for (const t of targets) {
    missing = false;
    const { value, ok, unit = '', note } = t.check(m);
    const mark = missing ? '–' : ok && !Number.isNaN(value) ? '✓' : '✗';
    const shown = Number.isNaN(value) ? (missing ? 'not run' : 'failed') : `${+value.toPrecision(3)}${unit}${note === undefined ? '' : ` ${note}`}`;
    process.stdout.write(`  ${mark} ${t.label}: ${shown}\n`);
  }
}
