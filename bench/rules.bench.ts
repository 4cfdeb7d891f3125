/**
 * Rules at start (issue 27): 1 000 rules over 100 components applied when a process starts, against
 * building those 100 components with the same options directly. Each of 100 TokenLimiters (`api-<n>`)
 * has 10 rules in a MemoryRuleStore: its service's, its instance's, and 8 of other instances (listed,
 * parsed, not applied here). Timed: `rules.start()` (list, parse, apply) plus building the limiters with
 * their built options, over building them with the effective options directly; and the longest
 * event-loop turn meanwhile (`monitorEventLoopDelay`, goal ≤ 5 ms). Rounds interleave the two; times
 * are this process's CPU time, so that waiting for a core on a shared machine does not count.
 *
 *   npm run bench -- rules
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { TokenLimiter } from '../src/limit/index.js';
import { MemoryRuleStore, Rules, type RuleTarget } from '../src/rules/index.js';

const COMPONENTS = 100;
const ROUNDS = Number(process.env.RULES_ROUNDS ?? 11);
/** CPU milliseconds of this process (user + system): on a machine shared with other jobs, waiting for a core is not counted. */
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

if (typeof (TokenLimiter.prototype as { reconfigure?: unknown }).reconfigure !== 'function') {
  console.log('rules: TokenLimiter has no reconfigure() in this build; nothing to measure');
  process.exit(0);
}

async function store(): Promise<MemoryRuleStore> {
  const s = new MemoryRuleStore();
  const writes: Record<string, string> = {};
  for (let i = 0; i < COMPONENTS; i++) {
    writes[`orders/token-limiter/api-${i}`] = JSON.stringify({ set: { rate: 50 + i } });
    writes[`orders@i-1/token-limiter/api-${i}`] = JSON.stringify({ set: { burst: 200 + i } });
    for (let j = 2; j < 10; j++) writes[`orders@i-${j}/token-limiter/api-${i}`] = JSON.stringify({ set: { burst: j } });
  }
  await s.apply(writes);
  return s;
}

async function withRules(s: MemoryRuleStore): Promise<number> {
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
  if (kept[7]!.rate !== 57) throw new Error('rules not applied');
  await rules.close();
  return ms;
}

function direct(): number {
  const t0 = cpuMs();
  const kept: TokenLimiter[] = [];
  for (let i = 0; i < COMPONENTS; i++) kept.push(new TokenLimiter({ rate: 50 + i, burst: 200 + i }));
  return cpuMs() - t0 + (kept.length - COMPONENTS);
}

const s = await store();
const h = monitorEventLoopDelay({ resolution: 1 });
const ratios: number[] = [];
const a: number[] = [];
const b: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const first = r % 2 === 0;
  const d1 = first ? direct() : 0;
  if (r === 1) h.enable();
  await new Promise((r) => setTimeout(r, 5)); // let the delay monitor's timer run between rounds
  const w = await withRules(s);
  const d = first ? d1 : direct();
  a.push(d);
  b.push(w);
  ratios.push(w / d);
}
h.disable();
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
console.log(`rules: ${COMPONENTS} components, ${COMPONENTS * 10} rules, ${ROUNDS} rounds`);
console.log(`  built directly: median ${median(a).toFixed(2)} ms; through rules (list, parse, apply): median ${median(b).toFixed(2)} ms`);
console.log(
  `  ratio median ${median(ratios).toFixed(2)} (range ${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}); longest event-loop turn ${(h.max / 1e6).toFixed(2)} ms`,
);
await s.close();
