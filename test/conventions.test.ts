/**
 * docs/conventions.md, held by a test over the built package (dist/, built by scripts/test.mjs first when
 * it is stale) and the source tree:
 *
 * 1. Every error a module throws is exported from that module's subpath: for every subpath of package.json's
 *    "exports", each `BulwarkError` subclass that the module's compiled code constructs (`new XxxError(` in
 *    dist/<module>/**.js, or in dist/internal/ files it imports; the root's modules are core, breaker and
 *    policy) is exported by that subpath.
 * 2. Every public method of an exported class (read from the built .d.ts files) is named by a verb of the
 *    conventions' verbs table (an exact name, or a family written `pre…` / `…Suf`), or is a reading:
 *    one of ACCESSORS below, a predicate `is…` / `has…`, or `…Of`.
 * 3. No file under src/ is named shared, support, common, utils or misc: a file is one concept, named for it.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';

const root = new URL('..', import.meta.url).pathname;
const dist = join(root, 'dist');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  name: string;
  exports: Record<string, string | { types: string; default: string }>;
};

/** The subpaths of "exports" but package.json: the subpath, its built entry and its declarations. */
const subpaths = Object.entries(pkg.exports)
  .filter(([k]) => k !== './package.json')
  .map(([k, v]) => {
    if (typeof v === 'string') throw new Error(`exports["${k}"] has no "types"`);
    return { name: k === '.' ? pkg.name : `${pkg.name}/${k.slice(2)}`, js: join(root, v.default), dts: join(root, v.types) };
  });

/** The modules a subpath's own code lives in: dist/<module>/; the root re-exports core, breaker and policy. */
function moduleDirs(entry: string): string[] {
  const dir = dirname(entry);
  return dir === dist ? ['core', 'breaker', 'policy'].map((m) => join(dist, m)) : [dir];
}

function jsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return jsFiles(p);
    return e.name.endsWith('.js') && !e.name.includes('.test.') ? [p] : [];
  });
}

/** The names of the classes that extend BulwarkError (directly or not), from the compiled code. */
function bulwarkErrors(): Set<string> {
  const parent = new Map<string, string>();
  for (const f of jsFiles(dist)) {
    for (const m of readFileSync(f, 'utf8').matchAll(/class (\w+) extends (\w+)/g)) parent.set(m[1]!, m[2]!);
  }
  const out = new Set<string>(['BulwarkError']);
  for (const name of parent.keys()) {
    for (let p: string | undefined = name, n = 0; p !== undefined && n < 20; p = parent.get(p), n++) {
      if (p === 'BulwarkError') {
        out.add(name);
        break;
      }
    }
  }
  return out;
}

/** The files of a module's code: its own, and the dist/internal/ files they import. */
function moduleFiles(entry: string): string[] {
  const own = moduleDirs(entry).flatMap(jsFiles);
  const internal = join(dist, 'internal');
  const extra = new Set<string>();
  for (const f of own) {
    for (const m of readFileSync(f, 'utf8').matchAll(/from '(\.[^']+)'/g)) {
      const p = resolve(dirname(f), m[1]!);
      if (p.startsWith(internal + '/')) extra.add(p);
    }
  }
  return [...own, ...extra];
}

/**
 * ACCESSORS are the public methods that are readings, not verbs: they answer a value and change nothing
 * (a noun or a predicate), or are hooks another library calls. Besides these names, `is…` and `has…`
 * (predicates) and `…Of` (a reading of one key or id) count as readings.
 */
const ACCESSORS = new Set([
  // state and status, read fresh each call (docs/conventions.md: `stats()` is a method)
  'stats',
  'options',
  'describeMetrics',
  'snapshot',
  'cacheStats',
  'metrics',
  'metricsBuffer',
  'health',
  'healthy',
  'status',
  'read',
  'ready',
  'idle',
  // the members of a collection or of a component's parts
  'instances',
  'members',
  'names',
  'breakers',
  'peers',
  'services',
  'tracked',
  'service',
  'openServices',
  'budget',
  'owner',
  'handler',
  'tokens',
  'channelOptions',
  'keysByRecency',
  'peek',
  'peer',
  // the options a component runs now (the live-reconfiguration protocol's reading)
  'options',
  'serviceOptions',
  // last-seen and next-due values
  'lastFailures',
  'lastRejection',
  'nextExpiry',
  'nextTimerAt',
  'expiresAt',
  'addedAt',
  'timesEjected',
  'currentWeight',
  'next',
  // a hash ring's and a byte view's readings
  'position',
  'shares',
  'memberAt',
  'memberIndexAt',
  'pointsAt',
  'at',
  'bytes',
  'binary',
  'equals',
  'toString',
  'sum',
  'reduce',
  // the client's per-service state: answers for one call (a wrapped task, a Retry, a breaker), changing nothing
  'avoids',
  'retryFor',
  'instanceBreaker',
  // live settings, history and feeds: a component's options and weights now, a feed's latest frame and its history, the metrics' histograms
  'options',
  'weights',
  'latest',
  'history',
  'histograms',
  // a factory that binds what it makes (Rules.breakerFactory)
  'breakerFactory',
  // grpc-js calls these on GrpcDiscovery (its resolver and load-balancer hooks)
  'newPicker',
  'instance',
  'addBalancer',
]);

/** The verbs of docs/conventions.md's table: exact names, and families written `pre…` or `…Suf`. */
function verbs(): { exact: Set<string>; prefixes: string[]; suffixes: string[] } {
  const doc = readFileSync(join(root, 'docs', 'conventions.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Verbs'), doc.indexOf('\n## ', doc.indexOf('## Verbs') + 1));
  const exact = new Set<string>();
  const prefixes: string[] = [];
  const suffixes: string[] = [];
  for (const line of section.split('\n')) {
    if (!line.startsWith('| `')) continue;
    const cell = line.split('|')[1]!;
    for (const m of cell.matchAll(/`([^`]+)`/g)) {
      const name = m[1]!.replace(/\(.*$/, '').trim();
      if (name.endsWith('…')) prefixes.push(name.slice(0, -1));
      else if (name.startsWith('…')) suffixes.push(name.slice(1));
      else exact.add(name);
    }
  }
  return { exact, prefixes, suffixes };
}

/** The public methods of every class a subpath exports, from the built declarations: name → classes. */
function publicMethods(): Map<string, Set<string>> {
  const program = ts.createProgram(
    subpaths.map((s) => s.dts),
    { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, strict: true, noEmit: true, skipLibCheck: true },
  );
  const checker = program.getTypeChecker();
  const out = new Map<string, Set<string>>();
  for (const s of subpaths) {
    const file = program.getSourceFile(s.dts);
    assert.ok(file !== undefined, `${s.dts} is built`);
    const mod = checker.getSymbolAtLocation(file)!;
    for (let sym of checker.getExportsOfModule(mod)) {
      if (sym.flags & ts.SymbolFlags.Alias) sym = checker.getAliasedSymbol(sym);
      if (!(sym.flags & ts.SymbolFlags.Class)) continue;
      for (const p of checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(sym))) {
        const d = p.declarations?.[0];
        if (d === undefined || !ts.isMethodDeclaration(d) || p.name.startsWith('__@')) continue; // [Symbol.asyncDispose] and kin
        if (ts.getCombinedModifierFlags(d) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) continue;
        const classes = out.get(p.name) ?? new Set<string>();
        classes.add(sym.name);
        out.set(p.name, classes);
      }
    }
  }
  return out;
}

describe('conventions', () => {
  it('each module exports every BulwarkError subclass its code throws', async () => {
    assert.ok(existsSync(join(dist, 'index.js')), 'dist/ is built (scripts/test.mjs builds it first)');
    const errors = bulwarkErrors();
    assert.ok(errors.has('RegistryPendingError') && errors.has('AbortedError'), `BulwarkError subclasses found: ${[...errors].join(', ')}`);
    const missing: string[] = [];
    let checked = 0;
    for (const s of subpaths) {
      const exported = (await import(pathToFileURL(s.js).href)) as Record<string, unknown>;
      const thrown = new Map<string, string>();
      for (const f of moduleFiles(s.js)) {
        for (const m of readFileSync(f, 'utf8').matchAll(/new (\w+)\(/g)) {
          if (errors.has(m[1]!) && !thrown.has(m[1]!)) thrown.set(m[1]!, relative(root, f));
        }
      }
      for (const [name, file] of thrown) {
        checked++;
        if (typeof exported[name] !== 'function') missing.push(`${s.name} does not export ${name} (constructed in ${file})`);
      }
    }
    assert.ok(checked > 20, `only ${checked} (subpath, error) pairs found: is the scan reading the build?`);
    assert.deepEqual(missing, []);
  });

  it('every public method of an exported class is a verb of docs/conventions.md or a reading', () => {
    const { exact, prefixes, suffixes } = verbs();
    assert.ok(exact.has('allow') && exact.has('close') && prefixes.includes('on'), 'the verbs table is read');
    const methods = publicMethods();
    assert.ok(methods.has('execute') && methods.has('stats'), `public methods found: ${[...methods.keys()].join(', ')}`);
    const covered = (name: string): boolean =>
      exact.has(name) ||
      ACCESSORS.has(name) ||
      /^(is|has)([A-Z]|$)/.test(name) ||
      /[a-z]Of$/.test(name) ||
      prefixes.some((p) => name === p || (name.startsWith(p) && /^[A-Z]/.test(name.slice(p.length)))) ||
      suffixes.some((x) => name.endsWith(x) && name.length > x.length);
    const unnamed = [...methods].filter(([name]) => !covered(name)).map(([name, classes]) => `${name} (${[...classes].join(', ')})`);
    assert.deepEqual(unnamed, [], 'add each to the verbs table of docs/conventions.md, or to ACCESSORS if it is a reading');
  });

  it('no file under src/ is named shared, support, common, utils or misc', () => {
    const bad: string[] = [];
    const walk = (dir: string): void => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const p = join(dir, e.name);
        if (/(^|[-_.])(shared|support|common|utils?|misc)([-_.]|$)/i.test(e.name)) bad.push(relative(root, p));
        if (e.isDirectory()) walk(p);
      }
    };
    walk(join(root, 'src'));
    assert.deepEqual(bad, []);
  });
});
