/**
 * docs/conventions.md, held by a test over the built package (dist/, built by scripts/test.mjs first when
 * it is stale) and the source tree:
 *
 * 1. Every error a module throws is exported from that module's subpath: for every subpath of package.json's
 *    "exports", each `BulwarkError` subclass that the module's compiled code constructs (`new XxxError(` in
 *    dist/<module>/**.js, or in dist/internal/ files it imports; the root's modules are core, breaker and
 *    policy) is exported by that subpath.
 * 2. Every public method of an exported class (read from the built .d.ts files) is named by a verb of the
 *    conventions' verbs table, or is one of the accessors listed in ACCESSORS below.
 * 3. No file under src/ is named shared, support, common, utils or misc: a file is one concept, named for it.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

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
