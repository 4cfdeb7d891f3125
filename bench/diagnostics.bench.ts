/**
 * diagnostics: what the diagnostics_channel hooks cost on the hot paths when nobody listens — the
 * same code with and without them, in one run, each subject in its own process. "without hooks" is
 * the source of the commit before them (DIAG_BASE, default f1a09bc), extracted with `git archive` and
 * compiled into .tmp/diag-base once; "with hooks" is this tree. Paths: SreBreaker.execute and
 * CircuitBreaker.execute success, TokenLimiter.allow admitting and refusing (the refusal is a publish
 * site), KeyedLimiter.allow, ResilientClient.call (a publish site per call and per attempt); and the
 * client call with a subscriber on every client channel, which is what a tracing agent pays.
 *
 *   npm run bench -- diagnostics        (BENCH_RUNS=3 BENCH_MS=500 while iterating)
 *
 * A second section runs both trees' path in ONE process, alternating batches, and reports the ratio
 * of their median batch times: on a shared, loaded machine the first section's per-process medians
 * move by far more than 2 % between runs of the same code; the interleaved ratio is the number to read.
 *
 * Targets, printed ✓/✗ after each table: with nobody listening, each hot path with hooks at most
 * 1.02× the same path without them.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { subscribe, tracingChannel } from 'node:diagnostics_channel';
import { atMost, bench, type Subject, type Target } from './harness.js';
import * as breakerNow from '../src/breaker/index.js';
import * as limitNow from '../src/limit/index.js';
import * as registryNow from '../src/registry/index.js';
import * as clientNow from '../src/client/index.js';

type Modules = { breaker: typeof breakerNow; limit: typeof limitNow; registry: typeof registryNow; client: typeof clientNow };

/** The repository root: the first folder above this file holding package.json. */
function repoRoot(): string {
  let d = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(d, 'package.json')) || d.endsWith('.tmp')) d = dirname(d);
  return d;
}
const root = repoRoot();
const base = process.env.DIAG_BASE ?? 'f1a09bc';
const baseDir = join(root, '.tmp', 'diag-base');

/** buildBase extracts and compiles the source of `base` once (the parent does it; children only import). */
function buildBase(): void {
  const stamp = join(baseDir, 'commit');
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === base) return;
  rmSync(baseDir, { recursive: true, force: true });
  mkdirSync(baseDir, { recursive: true });
  const tar = execFileSync('git', ['archive', base, 'src'], { cwd: root, maxBuffer: 256 << 20 });
  execFileSync('tar', ['-x', '-C', baseDir], { input: tar });
  writeFileSync(
    join(baseDir, 'tsconfig.json'),
    JSON.stringify({
      extends: '../../tsconfig.json',
      compilerOptions: { rootDir: 'src', outDir: 'out', noEmit: false, declaration: false, sourceMap: false },
      include: ['src'],
      exclude: ['src/**/*.test.ts', 'src/**/test-fixtures.ts'],
    }),
  );
  execFileSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(baseDir, 'tsconfig.json')], { stdio: 'inherit' });
  writeFileSync(stamp, base);
}

async function baseModules(): Promise<Modules> {
  const at = (m: string) => import(pathToFileURL(join(baseDir, 'out', m, 'index.js')).href);
  return { breaker: await at('breaker'), limit: await at('limit'), registry: await at('registry'), client: await at('client') };
}
const nowModules: Modules = { breaker: breakerNow, limit: limitNow, registry: registryNow, client: clientNow };

async function task(): Promise<number> {
  return 1;
}
const BIG = 1e12;

/** The hot paths, built from either tree's modules. */
const paths: Record<string, (m: Modules) => Subject | Promise<Subject>> = {
  'SreBreaker.execute': ({ breaker }) => {
    const b = new breaker.SreBreaker();
    return { op: () => b.execute(task), async: true };
  },
  'CircuitBreaker.execute': ({ breaker }) => {
    const b = new breaker.CircuitBreaker();
    return { op: () => b.execute(task), async: true };
  },
  'TokenLimiter.allow': ({ limit }) => {
    const l = new limit.TokenLimiter({ rate: BIG, burst: BIG });
    return { op: () => l.allow() };
  },
  'TokenLimiter.allow refused': ({ limit }) => {
    const l = new limit.TokenLimiter({ rate: 1e-9, burst: 1 });
    l.allow();
    return { op: () => l.allow() };
  },
  'KeyedLimiter.allow': ({ limit }) => {
    const l = new limit.KeyedLimiter({ rate: BIG, burst: BIG });
    const keys = Array.from({ length: 64 }, (_, i) => `user-${i}`);
    let i = 0;
    return { op: () => l.allow(keys[i++ & 63]!) };
  },
  'ResilientClient.call': async ({ registry, client }) => {
    const r = new registry.MemoryRegistry();
    for (const id of ['a', 'b', 'c']) await r.register({ id, name: 'svc', address: `127.0.0.1:${9000 + id.charCodeAt(0)}` });
    const c = new client.ResilientClient({ registry: r });
    await c.call('svc', task);
    return {
      op: () => c.call('svc', task),
      async: true,
      teardown: async () => {
        await c.close();
        await r.close();
      },
    };
  },
};

const subjects: Record<string, () => Subject | Promise<Subject>> = {};
const targets: Target[] = [];
for (const [name, make] of Object.entries(paths)) {
  subjects[`${name} (without hooks)`] = async () => make(await baseModules());
  subjects[`${name} (with hooks)`] = () => make(nowModules);
  targets.push(atMost(`${name}: with hooks ≤ 1.02× without (nobody listening)`, `${name} (with hooks)`, `${name} (without hooks)`, 1.02));
}
subjects['ResilientClient.call (with hooks, every client channel subscribed)'] = async () => {
  const noop = () => {};
  tracingChannel('bulwark:client:call').subscribe({ start: noop, end: noop, asyncStart: noop, asyncEnd: noop, error: noop });
  subscribe('bulwark:client:attempt', noop);
  return paths['ResilientClient.call']!(nowModules);
};

/**
 * interleaved runs one path of both trees in the same process, alternating batches of `n` calls, and
 * reports the ratio of their median batch times (with hooks / without): machine noise, which moves
 * whole seconds on a shared box, hits both sides of each pair alike.
 */
function interleaved(name: string, n: number): () => Promise<Subject> {
  return async () => {
    const [without, withHooks] = [await paths[name]!(await baseModules()), await paths[name]!(nowModules)];
    const batch = async (s: Subject) => {
      const t = performance.now();
      if (s.async === true) for (let i = 0; i < n; i++) await s.op();
      else for (let i = 0; i < n; i++) s.op();
      return performance.now() - t;
    };
    const a: number[] = [];
    const b: number[] = [];
    return {
      op: async () => {
        a.push(await batch(without));
        b.push(await batch(withHooks));
      },
      async: true,
      batch: 1,
      extra: () => ({ ratio: median(b) / median(a), pairs: a.length }),
      teardown: async () => {
        await without.teardown?.();
        await withHooks.teardown?.();
      },
    };
  };
}

function median(xs: number[]): number {
  const s = [...xs].sort((x, y) => x - y);
  return s[s.length >> 1]!;
}

const sizes: Record<string, number> = {
  'SreBreaker.execute': 2_000,
  'CircuitBreaker.execute': 2_000,
  'TokenLimiter.allow': 20_000,
  'TokenLimiter.allow refused': 20_000,
  'KeyedLimiter.allow': 20_000,
  'ResilientClient.call': 200,
};
const pairs: Record<string, () => Promise<Subject>> = {};
const pairTargets: Target[] = [];
for (const [name, n] of Object.entries(sizes)) {
  pairs[name] = interleaved(name, n);
  pairTargets.push({
    label: `${name}: with hooks ≤ 1.02× without, interleaved in one process (nobody listening)`,
    check: (m) => {
      const value = m.extra(name, 'ratio');
      return { value, ok: value <= 1.02, unit: '×' };
    },
  });
}

if (!process.argv.includes('--child')) buildBase();

await bench('diagnostics: hot paths with and without the diagnostics_channel hooks (nobody listening)', {
  baseline: 'ResilientClient.call (without hooks)',
  targets,
  subjects,
});

await bench('diagnostics: the same paths, with and without hooks alternating in one process (ratio = with / without)', {
  targets: pairTargets,
  subjects: pairs,
});
