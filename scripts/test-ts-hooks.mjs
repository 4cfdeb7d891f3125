// Module hooks (registered by scripts/test-ts.mjs) that run the project's TypeScript under plain node, for the
// tests: what tsx did for them, without loading tsx (~0.3 CPU-s per process, in the main thread and again in
// the hooks thread) in each of the ~100 processes a run starts.
//
// - resolve: `./x.js` written in a .ts file (nodenext style) is `./x.ts` when no x.js exists.
// - load: a .ts file is ES module JavaScript with its types stripped, read from .tmp/ts-js/<stamp>/<path>.js, which
//   scripts/test.mjs compiles (compileTs below) for every .ts file in src/ and test/ that changed since, before
//   a run; a file missing there or older than its source is compiled here instead (esbuild is loaded only
//   then). Its URL stays the .ts file's, so `import.meta.url` and paths relative to it are what they are
//   under tsx; an inline source map (naming the .ts file by its absolute path) sends stack traces to the .ts lines.
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { dirname, join, relative } from 'node:path';

const root = fileURLToPath(new URL('..', import.meta.url));
const requireFromTsx = createRequire(createRequire(import.meta.url).resolve('tsx/package.json'));
const outBase = join(root, '.tmp', 'ts-js');
// The compiled files are kept under a name for this file's text and esbuild's version: a change to either
// (to OPTIONS, say) compiles everything again instead of loading files compiled the old way.
const stamp = createHash('sha1')
  .update(readFileSync(fileURLToPath(import.meta.url)))
  .update(JSON.parse(readFileSync(requireFromTsx.resolve('esbuild/package.json'), 'utf8')).version)
  .digest('hex')
  .slice(0, 10);
const out = join(outBase, stamp);

/** OPTIONS are esbuild's, the same for the batch in scripts/test.mjs and for one file here. */
export const OPTIONS = {
  loader: 'ts',
  format: 'esm',
  target: 'node20',
  platform: 'node',
  sourcemap: 'inline',
  sourcesContent: false,
  tsconfigRaw: { compilerOptions: { verbatimModuleSyntax: true, useDefineForClassFields: true } },
};

/** loadEsbuild answers esbuild's API: tsx's own dependency (the version tsx was tested with). */
const loadEsbuild = () => requireFromTsx('esbuild');

let esbuild;
function compile(path) {
  esbuild ??= loadEsbuild();
  return esbuild.transformSync(readFileSync(path, 'utf8'), { ...OPTIONS, sourcefile: path }).code;
}

/** compiledPath answers where the compiled JavaScript of a .ts file under the project is kept. */
export const compiledPath = (path) => join(out, `${relative(root, path).slice(0, -3)}.js`);

/**
 * compileTs compiles each of `paths` (absolute .ts paths under the project) whose compiled file is missing or
 * older than it, all at once on esbuild's service; answers how many it compiled.
 */
export async function compileTs(paths) {
  const stale = paths.filter((p) => {
    try {
      return statSync(compiledPath(p)).mtimeMs < statSync(p).mtimeMs;
    } catch {
      return true;
    }
  });
  for (const old of existsSync(outBase) ? readdirSync(outBase) : []) if (old !== stamp) rmSync(join(outBase, old), { recursive: true, force: true });
  if (stale.length === 0) return 0;
  const { transform } = loadEsbuild();
  await Promise.all(
    stale.map(async (p) => {
      const { code } = await transform(await readFile(p, 'utf8'), { ...OPTIONS, sourcefile: p });
      const to = compiledPath(p);
      await mkdir(dirname(to), { recursive: true });
      await writeFile(`${to}.${process.pid}`, code);
      await rename(`${to}.${process.pid}`, to); // whole or not at all for a process loading it now
    }),
  );
  return stale.length;
}

const isTs = (url) => url.startsWith('file:') && url.endsWith('.ts') && !url.endsWith('.d.ts');

export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context);
  } catch (err) {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !specifier.endsWith('.js') || context.parentURL === undefined || !isTs(context.parentURL)) throw err;
    return next(`${specifier.slice(0, -3)}.ts`, context);
  }
}

export async function load(url, context, next) {
  if (!isTs(url)) return next(url, context);
  const path = fileURLToPath(url);
  const rel = relative(root, path);
  let source;
  if (!rel.startsWith('..')) {
    const compiled = compiledPath(path);
    try {
      if (statSync(compiled).mtimeMs >= statSync(path).mtimeMs) source = readFileSync(compiled, 'utf8');
    } catch {
      // not compiled: below
    }
  }
  return { format: 'module', source: source ?? compile(path), shortCircuit: true };
}
