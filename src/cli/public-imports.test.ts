import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** srcRoot finds src/ above this file (the tests also run from a compiled copy under .tmp/). */
function srcRoot(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    if (dir.endsWith('/src') && readdirSync(dir).includes('cli')) return dir;
    if (dirname(dir) === dir) throw new Error('src/ not found above the test');
  }
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sources(p);
    return e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') ? [p] : [];
  });
}

describe('the CLI', () => {
  it("uses the library through its public modules only (each module's index), never a file inside one", () => {
    const src = srcRoot();
    const cli = join(src, 'cli');
    const reaching: string[] = [];
    for (const file of sources(cli)) {
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/from '(\.[^']+)'/g)) {
        const target = relative(src, resolve(dirname(file), m[1]!));
        if (target.startsWith('cli/')) continue;
        // internal/ is the package's own, shared by modules above core and not exported (docs/architecture.md).
        if (/^[a-z]+\/index\.js$/.test(target) || target.startsWith('internal/')) continue;
        reaching.push(`${relative(src, file)} imports ${target}`);
      }
    }
    assert.deepEqual(reaching, []);
  });
});
