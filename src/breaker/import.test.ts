/**
 * The package declares `"sideEffects": false`: importing bulwark/breaker must do no work. (The breakers
 * warm `admit()` up on their first construction; before, they did it at import, which set timers.)
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const index = fileURLToPath(new URL('./index.ts', import.meta.url));

describe('bulwark/breaker at import', () => {
  it('sets no timer and makes no breaker until one is constructed', () => {
    const program = `
      let timers = 0;
      const real = globalThis.setInterval;
      globalThis.setInterval = (...args) => { timers++; return real(...args); };
      const m = await import(${JSON.stringify(index)});
      const atImport = timers;
      const b = new m.SreBreaker();
      await b.execute(() => 1);
      console.log(JSON.stringify({ atImport, afterUse: timers }));
    `;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', program], { encoding: 'utf8', timeout: 30_000 });
    assert.equal(r.status, 0, r.stderr);
    const { atImport, afterUse } = JSON.parse(r.stdout.trim()) as { atImport: number; afterUse: number };
    assert.equal(atImport, 0, 'importing set a timer');
    assert.ok(afterUse > 0, 'the probe counts timers (the coarse clock starts one on first use)');
  });
});
