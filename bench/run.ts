/**
 * npm run bench: compiles src/ and bench/ with tsc (into .tmp/bench) and runs every *.bench.js there, or
 * those whose names contain an argument, one after another:
 *   npm run bench -- breaker limit
 * Benchmarks run compiled JavaScript, not through tsx: tsx's esbuild `keepNames` wraps every named
 * closure in `__name()`, which costs more than some of the code being measured.
 */
import { readdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const dir = dirname(fileURLToPath(import.meta.url));
const ext = import.meta.url.endsWith('.ts') ? '.bench.ts' : '.bench.js';
const loader = ext === '.bench.ts' ? ['--import', 'tsx'] : [];
const filters = process.argv.slice(2);
const files = readdirSync(dir)
  .filter((f) => f.endsWith(ext))
  .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
  .sort();
let failed = 0;
for (const f of files) {
  const r = spawnSync(process.execPath, [...loader, join(dir, f)], { stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
