/**
 * Rules at start (issue 27): 1 000 rules over 100 components applied when a process starts, against
 * building those 100 components with the same options directly. Each of 100 TokenLimiters (`api-<n>`)
 * has 10 rules in a MemoryRuleStore: its service's, its instance's, and 8 of other instances (listed,
 * not applied here). Timed, in this process's CPU time (so that waiting for a core on a shared machine
 * does not count), rounds interleaved:
 *
 * - start-up: building the limiters with their built options, binding them and `rules.start()` (list,
 *   parse, apply) — goal ≤ 2× the direct build;
 * - direct: building them with the effective options (the mean of 20 builds of the 100);
 * - the floor: JSON.parse of the same 1 000 documents (and of the 200 of this instance's scopes), which
 *   no binder can skip for rules it applies;
 * - the longest synchronous stretch while starting, between two turns of a setImmediate ticker (goal
 *   ≤ 5 ms): the lesser of the process's CPU time and the wall time between them — the CPU time counts
 *   V8's compiler and GC threads running beside the main one, the wall time a wait for a core on a
 *   shared machine, and the main thread's stretch is at most either; with `monitorEventLoopDelay`'s longest delay beside it, and the longest
 *   garbage-collector pause that fell within a start-up (a stretch it lengthens is V8's, not the binder's).
 *
 * Round 0 runs cold (nothing compiled yet, as in a process that just started): it is printed on its own
 * and left out of the medians and maxima.
 *
 *   npm run bench -- rules
 */
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { TokenLimiter } from '../src/limit/index.js';
import { MemoryRuleStore, Rules, type RuleTarget } from '../src/rules/index.js';

const COMPONENTS = 100;
const REPS = 20;
const ROUNDS = Number(process.env.RULES_ROUNDS ?? 31);
/** CPU milliseconds of this process (user + system): on a machine shared with other jobs, waiting for a core is not counted. */
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

if (typeof (TokenLimiter.prototype as { reconfigure?: unknown }).reconfigure !== 'function') {
  console.log('rules: TokenLimiter has no reconfigure() in this build; nothing to measure');
  process.exit(0);
}

const writes: Record<string, string> = {};
for (let i = 0; i < COMPONENTS; i++) {
  writes[`orders/token-limiter/api-${i}`] = JSON.stringify({ set: { rate: 50 + i } });
  writes[`orders@i-1/token-limiter/api-${i}`] = JSON.stringify({ set: { burst: 200 + i } });
  for (let j = 2; j < 10; j++) writes[`orders@i-${j}/token-limiter/api-${i}`] = JSON.stringify({ set: { burst: j } });
}
const documents = Object.values(writes);
const ownDocuments = Object.entries(writes)
  .filter(([k]) => k.startsWith('orders/') || k.startsWith('orders@i-1/'))
  .map(([, v]) => v);

/** Ticker measures the longest stretch between two turns of the event loop, in CPU and in wall time. */
class Ticker {
  maxCpu = 0;
  maxWall = 0;
  /** The longest stretch: per stretch, the lesser of its CPU and wall time. */
  max = 0;
  private running = true;
  private lastCpu = cpuMs();
  private lastWall = performance.now();
  constructor() {
    setImmediate(this.tick);
  }
  private tick = () => {
    const c = cpuMs();
    const w = performance.now();
    this.maxCpu = Math.max(this.maxCpu, c - this.lastCpu);
    this.maxWall = Math.max(this.maxWall, w - this.lastWall);
    this.max = Math.max(this.max, Math.min(c - this.lastCpu, w - this.lastWall));
    this.lastCpu = c;
    this.lastWall = w;
    if (this.running) setImmediate(this.tick);
  };
  stop(): Promise<void> {
    return new Promise((resolve) =>
      setImmediate(() => {
        this.running = false;
        resolve();
      }),
    );
  }
}

async function withRules(s: MemoryRuleStore): Promise<{ ms: number; turn: number; turnCpu: number; turnWall: number }> {
  const ticker = new Ticker();
  const t0 = cpuMs();
  const rules = new Rules({ store: s, service: 'orders', instance: 'i-1' });
  const kept: TokenLimiter[] = [];
  for (let i = 0; i < COMPONENTS; i++) {
    const l = new TokenLimiter({ rate: 10, burst: 10 });
    kept.push(l);
    rules.bind('token-limiter', `api-${i}`, l as unknown as RuleTarget);
  }
  await rules.start();
  const ms = cpuMs() - t0;
  await ticker.stop();
  if (kept[7]!.rate !== 57 || (kept[99] as unknown as { burst: number }).burst !== 299) throw new Error('rules not applied');
  await rules.close();
  return { ms, turn: ticker.max, turnCpu: ticker.maxCpu, turnWall: ticker.maxWall };
}

function direct(): number {
  const t0 = cpuMs();
  let kept: TokenLimiter[] = [];
  for (let r = 0; r < REPS; r++) {
    kept = [];
    for (let i = 0; i < COMPONENTS; i++) kept.push(new TokenLimiter({ rate: 50 + i, burst: 200 + i }));
  }
  return (cpuMs() - t0) / REPS + (kept.length - COMPONENTS);
}

function floor(docs: string[]): number {
  const t0 = cpuMs();
  let n = 0;
  for (let r = 0; r < REPS; r++) for (const d of docs) n += (JSON.parse(d) as object) === null ? 1 : 0;
  return (cpuMs() - t0) / REPS + n;
}

const s = new MemoryRuleStore();
await s.apply(writes);
/** GC pauses, and the start-ups (warm rounds), on the performance timeline: matched at the end. */
const pauses: Array<{ at: number; ms: number }> = [];
const windows: Array<[number, number]> = [];
const gcs = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) pauses.push({ at: e.startTime, ms: e.duration });
});
gcs.observe({ entryTypes: ['gc'] });
let cold: { ms: number; turn: number } | undefined;
const h = monitorEventLoopDelay({ resolution: 1 });
const startups: number[] = [];
const directs: number[] = [];
const floors: number[] = [];
const ownFloors: number[] = [];
const ratios: number[] = [];
const turns: number[] = [];
let turn = 0;
let turnCpu = 0;
let turnWall = 0;
for (let r = 0; r < ROUNDS; r++) {
  const first = r % 2 === 0;
  const d1 = first ? direct() : 0;
  const f = floor(documents);
  ownFloors.push(floor(ownDocuments));
  if (r === 1) h.enable(); // round 0 warms up (compiles) both paths
  await new Promise((resolve) => setTimeout(resolve, 5)); // let the delay monitor's timer run between rounds
  const from = performance.now();
  const w = await withRules(s);
  if (r > 0) windows.push([from, performance.now()]);
  if (r === 0) cold = w;
  if (process.env.RULES_DEBUG)
    console.log(`round ${r}: ${w.ms.toFixed(2)} ms, turn ${w.turn.toFixed(2)} (${w.turnCpu.toFixed(2)} cpu, ${w.turnWall.toFixed(2)} wall)`);
  const d = first ? d1 : direct();
  if (r > 0) {
    turns.push(w.turn);
    turn = Math.max(turn, w.turn);
    turnCpu = Math.max(turnCpu, w.turnCpu);
    turnWall = Math.max(turnWall, w.turnWall);
  }
  if (r === 0) continue;
  startups.push(w.ms);
  directs.push(d);
  floors.push(f);
  ratios.push(w.ms / d);
}
await new Promise((resolve) => setImmediate(resolve)); // the last GC entries
gcs.disconnect();
let gcInStartup = 0;
if (process.env.RULES_DEBUG)
  console.log(`gc pauses ${pauses.length}, longest ${Math.max(0, ...pauses.map((p) => p.ms)).toFixed(2)} ms; windows ${windows.length}`);
for (const p of pauses) if (windows.some(([a, b]) => p.at >= a && p.at <= b)) gcInStartup = Math.max(gcInStartup, p.ms);
h.disable();
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
const mark = (ok: boolean) => (ok ? '✓' : '✗');
const ratio = median(ratios);
console.log(
  `rules: ${COMPONENTS} components, ${documents.length} rules (${ownDocuments.length} of this instance's scopes), ${ROUNDS - 1} warm rounds, CPU ms; cold round 0: start-up ${cold!.ms.toFixed(2)} ms, longest stretch ${cold!.turn.toFixed(2)} ms`,
);
console.log(
  `  start-up (build, bind, list, parse, apply): median ${median(startups).toFixed(3)} ms; built directly: median ${median(directs).toFixed(3)} ms; floor (JSON.parse of the ${documents.length} documents): median ${median(floors).toFixed(3)} ms (of the ${ownDocuments.length}: ${median(ownFloors).toFixed(3)} ms)`,
);
console.log(
  `  ratio start-up / direct: median ${ratio.toFixed(2)} (range ${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}) ${mark(ratio <= 2)} goal ≤ 2×; floor / direct ${(median(floors) / median(directs)).toFixed(2)}, start-up / floor ${(median(startups) / median(floors)).toFixed(2)}`,
);
console.log(
  `  longest synchronous stretch while starting: ${turn.toFixed(2)} ms ${mark(turn <= 5)} goal ≤ 5 ms, median over rounds ${median(turns).toFixed(2)} ms (the longest in CPU alone ${turnCpu.toFixed(2)} ms, in wall time alone ${turnWall.toFixed(2)} ms; monitorEventLoopDelay max ${(h.max / 1e6).toFixed(2)} ms; longest GC pause within a start-up ${gcInStartup.toFixed(2)} ms)`,
);
await s.close();
