/**
 * The examples in docs/*.md, checked three ways. Examples import the built package: scripts/test.mjs (`npm test`) builds dist/ first when it is stale.
 *
 * 1. **They run.** Every ```ts block is a complete program, run with node against the built package
 *    (imports of 'bulwark' and 'bulwark/<module>' resolve to dist/ through the package's own exports
 *    map); it must exit 0. TypeScript strips its types first (`ts.transpileModule`, as tsx would with
 *    esbuild, without tsx's ~0.3 s of CPU per process to load itself); its types are checked in 3. A block whose first line is `// requires: etcd` or `// requires: redis`
 *    gets a real server started for it, its address in ETCD_ENDPOINT or REDIS_URL.
 *
 * 2. **They print what they say.** A line of a runnable block that ends with `// → text` states one
 *    line the program prints on stdout (a comment line holding only `// → text` works too, for a
 *    statement that prints several lines). When a block has at least one, the lines it prints must
 *    equal the `// →` texts, in order and in number — a missing, extra or different line fails, with
 *    a line-by-line diff. Within a text, `…` stands for any run of characters (for what changes from run
 *    to run: a port, a duration). A block with no `// →` line is run, but what it prints is not checked.
 *
 * 3. **They type-check.** Every block is type-checked, runnable ones (1 strips their types unchecked) and
 *    ```ts no-run fragments (shown, never run) alike: each is written to .tmp/docs-check/ as a module
 *    of its own and one TypeScript program (docs-typecheck.ts, a process of its own started before the
 *    examples run, so the two overlap) checks them all, with 'bulwark' and 'bulwark/<module>'
 *    mapped to the built declarations (dist/…/index.d.ts: the API a user's compiler sees, and half the
 *    work of checking src/ again) (unused names are allowed). A fragment may use
 *    names it does not define when it declares them, in either of two ways:
 *      - leading lines `// declare: const app: import('express').Express` (shown to the reader as a
 *        comment saying what the fragment assumes) become `declare const app: import('express').Express;`;
 *      - or the fragment writes top-level `declare` statements itself.
 *    A fragment must be TypeScript: a bare signature line is not (write it as an `interface`).
 *
 * Examples known to fail for now are listed in PENDING, with why (see there).
 *
 * Every page under docs/ but those that describe no module (conventions.md, README.md, reliability.md) has at least
 * one runnable block. `DOCS_PAGES=http,errors node scripts/test.mjs docs` checks only those pages.
 */
import { after, before, describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import ts from 'typescript';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { redisBinary, startRedis, type RedisServer } from './support/redis.js';
import { tsNodeArgs } from './support/ts-node.js';
import type { CheckFragment } from './docs-typecheck.js';

const root = new URL('..', import.meta.url).pathname;
const docsDir = join(root, 'docs');
const scratch = join(root, '.tmp', 'docs');
const checkDir = join(root, '.tmp', 'docs-check');
const CHECKER = join(root, 'test', 'docs-typecheck.ts');

/** Pages that describe no module, so need no runnable example. */
const NOT_MODULE_PAGES = new Set(['conventions.md', 'architecture.md', 'README.md', 'reliability.md']);

/**
 * PENDING lists the examples known to fail for now, each with why, found by page and a string its block
 * contains. Such an example is still checked: while it fails it is reported as a todo (the run stays
 * green); once it passes, or once no block contains the string, the test fails until the entry is deleted.
 */
const PENDING: ReadonlyArray<{ page: string; contains: string; checks: ReadonlyArray<Check>; reason: string }> = [];

/** Check is what is checked of an example: that it runs (and prints its `// →` lines), or that it type-checks. */
type Check = 'run' | 'type-check';

/** Expected is one `// →` line: the text and the page line it is written on. */
interface Expected {
  text: string;
  line: number;
}

interface Example {
  page: string;
  /** index among the page's ```ts blocks, runnable and fragments together (1-based in names). */
  index: number;
  /** page line of the block's first code line. */
  line: number;
  code: string;
  runnable: boolean;
  requires: string[];
  expected: Expected[];
}

const ARROW = /(?:^|\s)\/\/ →(?: (.*))?$/;

/** examples reads every ```ts and ```ts no-run block of every page. */
function examples(): Example[] {
  const out: Example[] = [];
  const only = process.env.DOCS_PAGES?.split(',').map((p) => (p.endsWith('.md') ? p : `${p}.md`));
  for (const page of readdirSync(docsDir)
    .filter((f) => f.endsWith('.md') && (only === undefined || only.includes(f)))
    .sort()) {
    const lines = readFileSync(join(docsDir, page), 'utf8').split('\n');
    let fence: 'run' | 'no-run' | undefined;
    let start = 0;
    let buf: string[] = [];
    let n = 0;
    for (let i = 0; i < lines.length; i++) {
      const l = lines[i]!;
      const open = fence === undefined ? /^```ts(\s+no-run)?\s*$/.exec(l) : null;
      if (open !== null) {
        fence = open[1] === undefined ? 'run' : 'no-run';
        start = i + 1;
        buf = [];
      } else if (fence !== undefined && /^```\s*$/.test(l)) {
        const expected: Expected[] = [];
        buf.forEach((codeLine, k) => {
          const m = ARROW.exec(codeLine);
          if (m !== null) expected.push({ text: (m[1] ?? '').trimEnd(), line: start + k + 1 });
        });
        const req = /^\/\/ requires: (.+)$/.exec(buf[0] ?? '');
        out.push({
          page,
          index: n++,
          line: start + 1,
          code: buf.join('\n'),
          runnable: fence === 'run',
          requires: req ? req[1]!.split(/[ ,]+/) : [],
          expected,
        });
        fence = undefined;
      } else if (fence !== undefined) buf.push(l);
    }
  }
  return out;
}

const pendingOf = (ex: Example, what: Check) => PENDING.find((p) => p.page === ex.page && ex.code.includes(p.contains) && p.checks.includes(what));

/** checked runs `check` under the example's PENDING entry for `what`, if it has one (see PENDING). */
async function checked(t: TestContext, ex: Example, what: Check, check: () => unknown): Promise<void> {
  const pending = pendingOf(ex, what);
  if (pending === undefined) {
    await check();
    return;
  }
  try {
    await check();
  } catch (err) {
    t.todo(`pending: ${pending.reason}`);
    throw err;
  }
  assert.fail(`${name(ex)} passes now: delete its PENDING entry (${pending.reason})`);
}

const name = (ex: Example) => `docs/${ex.page} example ${ex.index + 1} (line ${ex.line})`;

/** matches tells whether a printed line is what a `// →` text states (`…` matching any run of characters). */
function matches(text: string, printed: string): boolean {
  if (!text.includes('…')) return text === printed;
  const re = text
    .split('…')
    .map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
  return new RegExp(`^${re}$`, 's').test(printed);
}

/** outputDiff answers undefined when `printed` is what `expected` states, else a line-by-line diff. */
function outputDiff(where: string, expected: Expected[], printed: string[]): string | undefined {
  const n = Math.max(expected.length, printed.length);
  let ok = expected.length === printed.length;
  const rows: string[] = [];
  for (let i = 0; i < n; i++) {
    const e = expected[i];
    const p = printed[i];
    if (e !== undefined && p !== undefined && matches(e.text, p)) {
      rows.push(`  ✓ ${p}`);
      continue;
    }
    ok = false;
    rows.push(`  ✗ expected ${e === undefined ? '(no more lines)' : `${JSON.stringify(e.text)}  (line ${e.line})`}`);
    rows.push(`    printed  ${p === undefined ? '(no more lines)' : JSON.stringify(p)}`);
  }
  if (ok) return undefined;
  return `${where} printed ${printed.length} line(s) where its \`// →\` comments state ${expected.length}:\n${rows.join('\n')}`;
}

/** printedLines splits stdout into lines (a final newline ends the last line, it does not add one). */
function printedLines(stdout: string): string[] {
  if (stdout === '') return [];
  const lines = stdout.replace(/\r\n/g, '\n').split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** toJavaScript strips an example's types: the ES module node runs (ES2022, as the package's own build). */
function toJavaScript(code: string): string {
  return ts.transpileModule(code, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;
}

/** run runs a program to its end (killed after `timeoutMs`) and answers its exit status and output. */
function run(args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const timer = setTimeout(() => {
      stderr += `\n(killed after ${timeoutMs} ms)`;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

/** Fragment is a block as the module TypeScript checks: its file and how its lines map back to the page. */
interface Fragment {
  ex: Example;
  file: string;
  /** lines added before the block's first line (the `declare` prelude). */
  offset: number;
}

/** fragmentSource turns leading `// declare: …` lines into declarations and makes the block a module. */
function fragmentSource(code: string): { source: string; offset: number } {
  const lines = code.split('\n');
  const prelude: string[] = [];
  for (const l of lines) {
    const m = /^\/\/ declare: (.+?);?\s*$/.exec(l);
    if (m === null) break;
    prelude.push(`declare ${m[1]};`);
  }
  // The declarations go on the lines before the block (the `// declare:` lines stay as comments), and
  // `export {}` after it, so that line numbers inside the block do not move.
  return { source: [...prelude, code, 'export {};', ''].join('\n'), offset: prelude.length };
}

/**
 * typeCheck runs docs-typecheck.ts over every fragment in a process of its own (see there) and answers
 * the diagnostics of each, by file.
 */
function typeCheck(fragments: Fragment[]): Promise<Map<string, string[]>> {
  const input: CheckFragment[] = fragments.map((f) => ({
    file: f.file,
    source: fragmentSource(f.ex.code).source,
    page: f.ex.page,
    line: f.ex.line,
    offset: f.offset,
  }));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, tsNodeArgs(CHECKER), { cwd: root, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    child.on('error', reject);
    child.on('close', (status) => {
      if (status !== 0) return reject(new Error(`the type check exited ${status}:\n${stderr}`));
      resolve(new Map(Object.entries(JSON.parse(stdout) as Record<string, string[]>)));
    });
    child.stdin.end(JSON.stringify({ dir: checkDir, fragments: input }));
  });
}

// Two at a time: each example is a process of its own, mostly waiting on its start-up, timers and servers.
// (Four at a time was no faster on a busy machine, and there some examples' own deadlines and clock-second
// boundaries — grpc.md's 2 s deadline, http.md's retry-after — no longer held.)
describe('docs examples', { concurrency: 2 }, () => {
  const all = examples();
  const unchecked: string[] = [];
  after(() => {
    if (unchecked.length > 0) {
      console.log(`docs: ${unchecked.length} runnable example(s) state no \`// →\` output, so what they print is not checked:`);
      for (const u of unchecked) console.log(`  ${u}`);
    }
  });

  it('PENDING names examples that exist', () => {
    if (process.env.DOCS_PAGES !== undefined) return;
    for (const p of PENDING) {
      assert.ok(
        all.some((e) => e.page === p.page && e.code.includes(p.contains)),
        `no example of docs/${p.page} contains ${JSON.stringify(p.contains)}: delete its PENDING entry`,
      );
    }
  });

  it('exist: every module page has at least one runnable example', () => {
    const pages = new Set(all.filter((e) => e.runnable).map((e) => e.page));
    const only = process.env.DOCS_PAGES === undefined ? undefined : new Set(all.map((e) => e.page));
    for (const page of readdirSync(docsDir).filter((f) => f.endsWith('.md') && !NOT_MODULE_PAGES.has(f) && (only?.has(f) ?? true))) {
      assert.ok(pages.has(page), `docs/${page} has no runnable \`\`\`ts example`);
    }
  });

  for (const ex of all.filter((e) => e.runnable)) {
    const needsEtcd = ex.requires.includes('etcd');
    const needsRedis = ex.requires.includes('redis');
    const skip = (needsEtcd && etcdBinary === undefined) || (needsRedis && redisBinary === undefined);
    if (ex.expected.length === 0) unchecked.push(name(ex));
    const what = ex.expected.length > 0 ? `runs and prints its ${ex.expected.length} \`// →\` line(s)` : 'runs';
    it(`${name(ex)} ${what}`, { skip: skip ? 'server not installed' : false }, (t) =>
      checked(t, ex, 'run', async () => {
        mkdirSync(scratch, { recursive: true });
        const file = join(scratch, `${ex.page.replace(/\.md$/, '')}-${ex.index + 1}.mjs`);
        writeFileSync(file, toJavaScript(ex.code));
        let etcd: EtcdServer | undefined;
        let redis: RedisServer | undefined;
        try {
          const env: NodeJS.ProcessEnv = { ...process.env };
          if (needsEtcd) env.ETCD_ENDPOINT = (etcd = await startEtcd()).endpoint;
          if (needsRedis) env.REDIS_URL = (redis = await startRedis()).url;
          const r = await run([file], env, 60_000);
          assert.equal(r.status, 0, `docs/${ex.page}:${ex.line} exited ${r.status}\n${r.stdout}\n${r.stderr}`);
          if (ex.expected.length > 0) {
            const diff = outputDiff(`docs/${ex.page}:${ex.line}`, ex.expected, printedLines(r.stdout));
            if (diff !== undefined) assert.fail(diff);
          }
        } finally {
          await etcd?.stop();
          await redis?.stop();
          rmSync(file, { force: true });
        }
      }),
    );
  }

  const fragments: Fragment[] = all.map((ex) => ({ ex, file: `${ex.page.replace(/\.md$/, '')}-${ex.index + 1}.ts`, offset: fragmentSource(ex.code).offset }));
  // Started before the first example runs, checked by the tests at the end.
  let checking: Promise<Map<string, string[]>> | undefined;
  before(() => {
    checking = typeCheck(fragments);
    checking.catch(() => {}); // reported by the tests that await it
  });
  for (const f of fragments) {
    it(`${name(f.ex)} type-checks${f.ex.runnable ? '' : ' (no-run)'}`, (t) =>
      checked(t, f.ex, 'type-check', async () => {
        const diagnostics = await checking!;
        const errors = [...(diagnostics.get(f.file) ?? []), ...(diagnostics.get('*') ?? [])];
        assert.equal(errors.length, 0, `${name(f.ex)} does not type-check:\n${errors.join('\n')}`);
      }));
  }
});

describe('docs test: the `// →` rule', () => {
  const e = (...texts: string[]): Expected[] => texts.map((text, i) => ({ text, line: 10 + i }));
  it('passes when the printed lines equal the texts, in order and in number', () => {
    assert.equal(outputDiff('x', e('a', 'b'), ['a', 'b']), undefined);
  });
  it('fails on a different, a missing or an extra line, naming the page line', () => {
    assert.match(outputDiff('docs/x.md:3', e('a', 'b'), ['a', 'c'])!, /✗ expected "b" {2}\(line 11\)\n {4}printed {2}"c"/);
    assert.match(outputDiff('x', e('a', 'b'), ['a'])!, /printed 1 line\(s\) where .* state 2[\s\S]*printed {2}\(no more lines\)/);
    assert.match(outputDiff('x', e('a'), ['a', 'b'])!, /expected \(no more lines\)\n {4}printed {2}"b"/);
    assert.notEqual(outputDiff('x', e('b', 'a'), ['a', 'b']), undefined, 'order counts');
  });
  it('lets … stand for any run of characters, and only there', () => {
    assert.equal(matches('listening on 127.0.0.1:…', 'listening on 127.0.0.1:40123'), true);
    assert.equal(matches('took … ms (x)', 'took 3.2 ms (x)'), true);
    assert.equal(matches('a.c', 'abc'), false, 'other characters are literal');
    assert.equal(matches('x…', 'y1'), false);
  });
  it('reads `// →` at the end of a code line or alone on a comment line', () => {
    assert.deepEqual(
      ['console.log(1); // → 1', '// → two words ', 'const a = 1; // not → this', '// →'].map((l) => ARROW.exec(l)?.[1] ?? (ARROW.test(l) ? '' : null)),
      ['1', 'two words ', null, ''],
    );
  });
  it("turns leading `// declare:` lines into declarations without moving the block's lines", () => {
    const { source, offset } = fragmentSource('// declare: const app: { use(x: unknown): void }\napp.use(1);');
    assert.equal(offset, 1);
    assert.equal(source, 'declare const app: { use(x: unknown): void };\n// declare: const app: { use(x: unknown): void }\napp.use(1);\nexport {};\n');
  });
});
