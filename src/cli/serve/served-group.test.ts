import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { HttpPool } from '../../cache/index.js';
import { LoadError, ManualClock, NotFoundError } from '../../core/index.js';
import { ServedGroup } from './served-group.js';

function served(load: (key: string) => Promise<string>, clock: ManualClock, o: { staleBytes?: number; ttlMs?: number } = {}) {
  const pool = new HttpPool({ self: 'http://127.0.0.1:1' });
  return new ServedGroup({
    name: 'g',
    cacheBytes: 1 << 16,
    hotCacheBytes: 1 << 13,
    ttlMs: o.ttlMs ?? 1_000,
    negativeTtlMs: 1_000,
    loadTimeoutMs: 5_000,
    staleBytes: o.staleBytes ?? 1 << 16,
    staleMaxAgeMs: 60_000,
    pool,
    load: (key) => load(key),
    clock,
  });
}

describe('ServedGroup', () => {
  it('says origin for a load and main for a hit, with the age since the load', async () => {
    const clock = new ManualClock();
    const g = served(async (k) => `v:${k}`, clock);
    const a = await g.get('k', undefined);
    assert.deepEqual([a.source, a.value.toString(), a.ageMs], ['origin', 'v:k', 0]);
    clock.advance(250);
    const b = await g.get('k', undefined);
    assert.deepEqual([b.source, b.ageMs], ['main', 250]);
  });

  it('callers sharing one load all say origin', async () => {
    const clock = new ManualClock();
    let release!: (v: string) => void;
    const g = served(() => new Promise((r) => (release = r)), clock);
    const both = Promise.all([g.get('k', undefined), g.get('k', undefined)]);
    await new Promise((r) => setImmediate(r));
    release('v');
    assert.deepEqual(
      (await both).map((a) => a.source),
      ['origin', 'origin'],
    );
  });

  it('answers the last good value, marked stale, when a load fails after the TTL; not past stale-max-age', async () => {
    const clock = new ManualClock();
    let fail = false;
    const g = served(async (k) => {
      if (fail) throw new LoadError('origin down');
      return `v:${k}`;
    }, clock);
    await g.get('k', undefined);
    fail = true;
    clock.advance(2_000); // past the 1 s TTL (±10 %)
    const s = await g.get('k', undefined);
    assert.deepEqual([s.source, s.value.toString(), s.ageMs], ['stale', 'v:k', 2_000]);
    assert.equal(g.stats().staleAnswers, 1);
    await assert.rejects(g.get('never', undefined), LoadError);
    clock.advance(60_000);
    await assert.rejects(g.get('k', undefined), LoadError);
  });

  it('does not answer stale for "not found", nor after remove, nor with --stale-bytes 0', async () => {
    const clock = new ManualClock();
    let mode: 'up' | 'missing' | 'down' = 'up';
    const load = async (k: string) => {
      if (mode === 'missing') throw new NotFoundError('gone');
      if (mode === 'down') throw new LoadError('down');
      return `v:${k}`;
    };
    const g = served(load, clock);
    await g.get('a', undefined);
    await g.get('b', undefined);
    clock.advance(2_000);
    mode = 'missing';
    await assert.rejects(g.get('a', undefined), NotFoundError);
    mode = 'down';
    await g.remove('b');
    await assert.rejects(g.get('b', undefined), LoadError);
    const off = served(
      async (k) => {
        if (mode === 'down') throw new LoadError('down');
        return k;
      },
      clock,
      { staleBytes: 0 },
    );
    mode = 'up';
    await off.get('c', undefined);
    clock.advance(2_000);
    mode = 'down';
    await assert.rejects(off.get('c', undefined), LoadError);
  });
});
