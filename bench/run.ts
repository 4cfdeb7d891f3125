/**
 * npm run bench: runs every bench/*.bench.ts (or those whose names contain an argument) one after another.
 *   npm run bench -- breaker limit
 */
import { readdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const dir = dirname(fileURLToPath(import.meta.url));
const filters = process.argv.slice(2);
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.bench.ts'))
  .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
  .sort();
let failed = 0;
for (const f of files) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(dir, f)], { stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
