/**
 * The published package, as a user's project gets it. `npm pack` makes the tarball from the built dist/
 * (scripts/test.mjs builds it first when stale); a project in a temp directory outside the repository gets
 * it in node_modules/bulwark — extracted, the way `npm install <tarball>` lays it out — and its
 * dependencies linked from the repository's node_modules, so nothing is fetched: it runs on a fresh CI
 * clone after `npm ci`, offline. Only the package's `dependencies` and `peerDependencies` (and @types/node)
 * are linked, so a published file that needs a package the user was never told to install fails here.
 *
 * 1. Every subpath of package.json's "exports" is imported by one TypeScript file, checked with what
 *    careful teams run: `strict`, `moduleResolution: nodenext`, `skipLibCheck: false` (so every published
 *    .d.ts the imports reach is checked: a declaration left dangling by `stripInternal` fails).
 * 2. The emitted JavaScript runs, one line per subpath, and prints what that line says it prints.
 * 3. Each subpath exports the types its API hands out: every type named by the public part (a parameter, a
 *    result, a property; private members and `extends` clauses aside) of a declaration the subpath exports
 *    from its own module (dist/<module>/; the root's are core, breaker and policy) is exported by that
 *    subpath, or by `bulwark/core`, home of the shared types (docs/conventions.md). A type of another module
 *    is checked one level deep: `bulwark/client` exports `ServiceInstance`, which its balancer hands out,
 *    and `bulwark/registry` exports the types `ServiceInstance` names in turn.
 * 4. The tarball holds what it should: every file "exports", "main", "types" and "bin" name, no tests,
 *    and source maps that resolve (each source inlined, or a file in the package).
 *
 * Nothing here skips: a missing `npm` or `tar`, or a dependency not installed, fails the file.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import ts from 'typescript';

const root = new URL('..', import.meta.url).pathname;
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  name: string;
  main: string;
  types: string;
  bin: Record<string, string>;
  exports: Record<string, string | { types?: string; default: string }>;
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
};

/** The subpaths a user imports: every "exports" key but package.json itself. */
const subpaths = Object.keys(pkg.exports)
  .filter((k) => k !== './package.json')
  .map((k) => (k === '.' ? pkg.name : `${pkg.name}/${k.slice(2)}`));

/**
 * RUN holds one line per subpath that runs at run time: an expression over the subpath's namespace (`m`),
 * awaited, and what it prints. A subpath added to "exports" without a line here fails the check.
 */
const RUN: Record<string, { expr: string; prints: string }> = {
  bulwark: { expr: `new m.ManualClock(5).now()`, prints: '5' },
  'bulwark/core': { expr: `m.hash32('a') === m.hash32('a')`, prints: 'true' },
  'bulwark/breaker': { expr: `new m.CircuitBreaker({ name: 'db' }).state`, prints: 'closed' },
  'bulwark/policy': { expr: `await new m.Bulkhead({ maxConcurrent: 1 }).execute(async () => 'ran')`, prints: 'ran' },
  'bulwark/limit': { expr: `new m.TokenLimiter({ rate: 1, burst: 1 }).allow()`, prints: 'true' },
  'bulwark/registry': {
    expr: `await (async () => { const r = new m.MemoryRegistry(); await r.register({ id: 'a', name: 'pay', address: '127.0.0.1:1' }); const n = (await r.getService('pay')).length; await r.close(); return n; })()`,
    prints: '1',
  },
  'bulwark/balancer': { expr: `new m.RoundRobin().pick([{ id: 'a', name: 'pay', address: '127.0.0.1:1' }]).id`, prints: 'a' },
  'bulwark/client': { expr: `typeof m.ResilientClient`, prints: 'function' },
  'bulwark/cache': { expr: `(() => { const c = new m.LruCache<string>({ maxBytes: 64 }); c.add('k', 'v'); return c.get('k'); })()`, prints: 'v' },
  'bulwark/http': { expr: `m.JSON_TYPE`, prints: 'application/json; charset=utf-8' },
  'bulwark/grpc': { expr: `m.SUPPORTED_GRPC_JS`, prints: '~1.14' },
  'bulwark/metrics': { expr: `typeof (await new m.BulwarkMetrics().metrics())`, prints: 'string' },
  'bulwark/dashboard': {
    expr: `await (async () => { const h = m.dashboardHandler({ snapshot: () => ({ at: '', components: [] }) }); await h.close(); return h.path; })()`,
    prints: '/dashboard',
  },
  'bulwark/fleet': { expr: `m.neededQuorum(10, undefined)`, prints: '5' },
  'bulwark/rules': { expr: `m.parseRule('{"set":{"rate":5}}', 'orders/token-limiter/api').kind`, prints: 'token-limiter' },
};

const alias = (p: string) => `m${subpaths.indexOf(p)}`;

let work: string;
let project: string;
let installed: string;
let files: string[];
let program: ts.Program;
let emitted: string;

/** filesUnder lists the files below `dir`, relative to it. */
function filesUnder(dir: string, out: string[] = [], base = dir): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) filesUnder(p, out, base);
    else out.push(relative(base, p));
  }
  return out;
}

/** link makes `name` (a dependency) resolvable from the project: a link to the repository's copy. */
function link(name: string): void {
  const from = join(root, 'node_modules', name);
  assert.ok(existsSync(from), `${name} is not installed in the repository's node_modules: run npm ci`);
  const to = join(project, 'node_modules', name);
  mkdirSync(dirname(to), { recursive: true });
  symlinkSync(from, to, 'dir');
}

before(() => {
  work = mkdtempSync(join(tmpdir(), 'bulwark-consumer-'));
  const out = execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', work], { cwd: root, encoding: 'utf8' });
  const [packed] = JSON.parse(out) as [{ filename: string; files: Array<{ path: string }> }];
  files = packed.files.map((f) => f.path).sort();
  project = join(work, 'project');
  installed = join(project, 'node_modules', pkg.name);
  mkdirSync(installed, { recursive: true });
  execFileSync('tar', ['-xzf', join(work, packed.filename), '-C', installed, '--strip-components=1']);
  for (const dep of [...Object.keys(pkg.dependencies), ...Object.keys(pkg.peerDependencies), '@types/node']) link(dep);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  const missing = subpaths.filter((p) => !RUN[p]);
  assert.deepEqual(missing, [], `give each subpath in "exports" a line in RUN`);
  const source = [
    ...subpaths.map((p) => `import * as ${alias(p)} from '${p}';`),
    ...subpaths.map((p) => `{ const m = ${alias(p)}; console.log(String(${RUN[p]!.expr})); }`),
  ].join('\n');
  writeFileSync(join(project, 'index.ts'), source + '\n');
  emitted = join(project, 'out');
  program = ts.createProgram([join(project, 'index.ts')], {
    strict: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    skipLibCheck: false,
    types: ['node'],
    typeRoots: [join(project, 'node_modules', '@types')],
    outDir: emitted,
  });
});

after(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('the packed package in a project of its own', () => {
  it('type-checks an import of every subpath export with strict, nodenext and skipLibCheck false', () => {
    const diagnostics = ts.getPreEmitDiagnostics(program);
    const text = ts.formatDiagnostics(diagnostics, {
      getCanonicalFileName: (f) => f,
      getCurrentDirectory: () => project,
      getNewLine: () => '\n',
    });
    assert.equal(text, '', 'the published declarations do not compile for a consumer');
  });

  it('runs one line of every subpath export', () => {
    const result = program.emit();
    assert.equal(result.emitSkipped, false);
    const printed = execFileSync(process.execPath, [join(emitted, 'index.js')], { cwd: project, encoding: 'utf8' });
    assert.deepEqual(
      printed.trimEnd().split('\n'),
      subpaths.map((p) => RUN[p]!.prints),
    );
  });

  it('exports from each subpath the types its API hands out', () => {
    const checker = program.getTypeChecker();
    const entry = program.getSourceFile(join(project, 'index.ts'))!;
    const inPackage = (d: ts.Node) => d.getSourceFile().fileName.startsWith(installed + '/');
    const resolved = (s: ts.Symbol) => (s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s);
    const exportsOf = new Map<string, ts.Symbol[]>();
    for (const st of entry.statements) {
      if (!ts.isImportDeclaration(st) || !ts.isStringLiteral(st.moduleSpecifier)) continue;
      const moduleSymbol = checker.getSymbolAtLocation(st.moduleSpecifier);
      assert.ok(moduleSymbol, `${st.moduleSpecifier.text} did not resolve`);
      exportsOf.set(st.moduleSpecifier.text, checker.getExportsOfModule(moduleSymbol).map(resolved));
    }
    const shared = new Set(exportsOf.get(`${pkg.name}/core`));
    /** homeOf answers the module a declaration belongs to: its directory under dist/. */
    const homeOf = (d: ts.Node) => relative(join(installed, 'dist'), d.getSourceFile().fileName).split('/')[0];
    const missing: string[] = [];
    for (const [subpath, exported] of exportsOf) {
      const own = new Set(exported);
      const homes = subpath === pkg.name ? ['core', 'breaker', 'policy'] : [subpath.slice(pkg.name.length + 1)];
      const reported = new Set<ts.Symbol>();
      const named = (node: ts.TypeReferenceNode | ts.ImportTypeNode): ts.Symbol | undefined => {
        if (ts.isTypeReferenceNode(node)) {
          const name = ts.isQualifiedName(node.typeName) ? node.typeName.right : node.typeName;
          return checker.getSymbolAtLocation(name);
        }
        const type = checker.getTypeFromTypeNode(node);
        return type.aliasSymbol ?? type.getSymbol();
      };
      const visit = (node: ts.Node, via: string): void => {
        if (ts.isHeritageClause(node)) return;
        if (ts.canHaveModifiers(node) && ts.getModifiers(node)?.some((m) => m.kind === ts.SyntaxKind.PrivateKeyword)) return;
        if (ts.isTypeReferenceNode(node) || ts.isImportTypeNode(node)) {
          const found = named(node);
          const symbol = found && resolved(found);
          const decl = symbol?.declarations?.[0];
          if (symbol && decl && inPackage(decl) && !ts.isTypeParameterDeclaration(decl) && !own.has(symbol) && !shared.has(symbol) && !reported.has(symbol)) {
            reported.add(symbol);
            missing.push(`${subpath} does not export ${symbol.name} (${relative(installed, decl.getSourceFile().fileName)}), named by ${via}`);
          }
        }
        ts.forEachChild(node, (child) => visit(child, via));
      };
      for (const symbol of exported) {
        for (const decl of symbol.declarations ?? []) if (inPackage(decl) && homes.includes(homeOf(decl))) visit(decl, symbol.name);
      }
    }
    assert.deepEqual(missing, []);
  });
});

describe('the tarball', () => {
  it('holds every file package.json names, and no tests', () => {
    const named = [pkg.main, pkg.types, ...Object.values(pkg.bin)];
    for (const target of Object.values(pkg.exports)) {
      if (typeof target === 'string') named.push(target);
      else named.push(target.default, ...(target.types ? [target.types] : []));
    }
    const inTarball = new Set(files);
    assert.deepEqual(
      named.map((f) => f.replace(/^\.\//, '')).filter((f) => !inTarball.has(f)),
      [],
    );
    assert.deepEqual(
      files.filter((f) => /\.test\.|test-fixtures|tsbuildinfo/.test(f)),
      [],
    );
    assert.deepEqual(
      files.filter((f) => !/^(package\.json|README\.md|LICENSE|dist\/|docs\/|proto\/|ops\/)/.test(f)),
      [],
    );
  });

  it('ships source maps whose every source resolves: inlined, or a file in the package', () => {
    const maps = filesUnder(installed).filter((f) => f.endsWith('.map'));
    assert.ok(maps.length > 0, 'no source maps in the package');
    const unresolved: string[] = [];
    for (const map of maps) {
      const m = JSON.parse(readFileSync(join(installed, map), 'utf8')) as { sourceRoot?: string; sources: string[]; sourcesContent?: Array<string | null> };
      m.sources.forEach((source, i) => {
        if (typeof m.sourcesContent?.[i] === 'string') return;
        if (!existsSync(join(installed, dirname(map), m.sourceRoot ?? '', source))) unresolved.push(`${map}: ${source}`);
      });
    }
    assert.deepEqual(unresolved.slice(0, 5), [], `${unresolved.length} of the maps' sources resolve to nothing`);
  });
});
