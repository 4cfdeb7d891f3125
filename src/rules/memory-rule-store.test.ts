import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../core/clock.js';
import { ClosedError, RuleConflictError } from '../core/errors.js';
import { MemoryRuleStore } from './memory-rule-store.js';
import type { RuleChange } from './types.js';

describe('MemoryRuleStore', () => {
  it('numbers every write with the next revision and compare-and-swaps on a key’s revision', async () => {
    const store = new MemoryRuleStore({ clock: new ManualClock() });
    const r1 = await store.put('o/timeout/a', '1', { ifRevision: 0 });
    assert.equal(r1, 1);
    await assert.rejects(store.put('o/timeout/a', '2', { ifRevision: 0 }), (err: unknown) => err instanceof RuleConflictError && err.revision === 1);
    assert.equal(await store.put('o/timeout/a', '2', { ifRevision: 1 }), 2);
    await assert.rejects(store.remove('o/timeout/a', { ifRevision: 1 }), RuleConflictError);
    assert.equal(await store.remove('o/timeout/a', { ifRevision: 2 }), 3);
    assert.deepEqual(await store.history('o/timeout/a'), [
      { key: 'o/timeout/a', revision: 1, value: '1' },
      { key: 'o/timeout/a', revision: 2, value: '2' },
      { key: 'o/timeout/a', revision: 3, value: undefined },
    ]);
    assert.equal(await store.at('o/timeout/a', 1), '1');
    assert.equal(await store.at('o/timeout/a', 3), undefined);
  });

  it('replays what a watch missed, and resyncs one from a compacted revision', async () => {
    const store = new MemoryRuleStore({ clock: new ManualClock() });
    await store.put('o/timeout/a', '1');
    await store.apply({ 'o/timeout/b': '2', 'o/timeout/c': '3' });
    const seen: RuleChange[] = [];
    const w = store.watch(1, (c) => seen.push(c));
    await store.remove('o/timeout/a');
    assert.deepEqual(
      seen.map((c) => [c.revision, c.type === 'changes' ? c.changes.map((x) => x.key) : []]),
      [
        [2, ['o/timeout/b', 'o/timeout/c']],
        [3, ['o/timeout/a']],
      ],
    );
    await w.close();
    store.compact(2);
    const late: RuleChange[] = [];
    store.watch(1, (c) => late.push(c));
    assert.equal(late[0]!.type, 'resync');
    assert.deepEqual(late[0]!.type === 'resync' ? late[0].records.map((r) => r.key) : [], ['o/timeout/b', 'o/timeout/c']);
  });

  it('deletes a rule when its life ends on the clock, unless it was written again', async () => {
    const clock = new ManualClock();
    const store = new MemoryRuleStore({ clock });
    await store.put('o/fault/p', 'x', { ttlMs: 1000 });
    assert.deepEqual(await store.get('o/fault/p'), { key: 'o/fault/p', value: 'x', revision: 1, leased: true, expiresAt: 1000 });
    clock.advance(500);
    await store.put('o/fault/p', 'y', { ttlMs: 1000 });
    clock.advance(999);
    assert.equal((await store.get('o/fault/p'))?.value, 'y');
    clock.advance(1);
    assert.equal(await store.get('o/fault/p'), undefined);
    assert.equal(store.revision, 3);
  });

  it('rejects calls after close()', async () => {
    const store = new MemoryRuleStore();
    await store.close();
    await assert.rejects(store.list(), ClosedError);
  });
});
