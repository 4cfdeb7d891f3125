import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from '../core/clock.js';
import type { ServiceInstance } from '../registry/types.js';
import { InstanceTable, type Entry } from './instance-table.js';
import { P2C } from './p2c.js';
import { RingHash } from './ring-hash.js';
import type { Picker } from './types.js';
import { RoundRobin } from './round-robin.js';

interface Counted extends Entry {
  /** Which make call created the entry (state that must survive while its id stays listed). */
  born: number;
  /** How many times make updated it. */
  updates: number;
}

const inst = (id: string, v = 0): ServiceInstance => Object.freeze({ id, name: 'svc', address: `${id}:${v}` });

function table(clock?: ManualClock, sliceSize?: number, onReady?: (list: readonly ServiceInstance[]) => void) {
  let births = 0;
  return new InstanceTable<Counted>(
    (instance, prev) => {
      if (prev === undefined) return { instance, seen: 0, index: 0, born: births++, updates: 0 };
      prev.instance = instance;
      prev.updates++;
      return prev;
    },
    { clock, sliceSize, onReady },
  );
}

/** expected answers what a table built from scratch holds for `list`: one instance per id, in order of first appearance, the last object. */
function expected(list: readonly ServiceInstance[]): ServiceInstance[] {
  const byId = new Map<string, ServiceInstance>();
  const order: string[] = [];
  for (const x of list) {
    if (!byId.has(x.id)) order.push(x.id);
    byId.set(x.id, x);
  }
  return order.map((id) => byId.get(id)!);
}

describe('InstanceTable', () => {
  it('after any sequence of lists and timer turns, holds what a table built from scratch holds, keeping the state of ids that stay (property)', () => {
    // Instances: ids from a small pool, each in a few versions (objects), so lists share objects, ids, both or neither.
    const pool = Array.from({ length: 12 }, (_, i) => [0, 1, 2].map((v) => inst(`i${i}`, v)));
    const list = fc.array(fc.tuple(fc.nat(11), fc.nat(2)), { maxLength: 16 }).map((xs) => xs.map(([i, v]) => pool[i]![v]!));
    const op = fc.oneof(
      fc.record({ kind: fc.constant('list' as const), list }),
      fc.record({ kind: fc.constant('again' as const) }), // the same array once more
      fc.record({ kind: fc.constant('tick' as const) }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 200 }), fc.array(op, { minLength: 1, maxLength: 30 }), (sliceSize, ops) => {
        const clock = new ManualClock();
        const ready: (readonly ServiceInstance[])[] = [];
        const t = table(clock, sliceSize, (l) => ready.push(l));
        let current: readonly ServiceInstance[] = []; // the list the table has taken in
        let last: readonly ServiceInstance[] = [];
        let state = new Map<string, Counted>(); // the entry of each id of `current`
        const check = (entries: readonly Counted[], synced: boolean) => {
          if (t.source === last && !t.pending) {
            // taken in: what a fresh table holds, in order, same objects
            assert.deepEqual(
              entries.map((e) => e.instance),
              expected(last),
            );
            const next = new Map<string, Counted>();
            for (const [k, e] of entries.entries()) {
              assert.equal(e.index, k);
              assert.equal(t.get(e.instance.id), e);
              const before = state.get(e.instance.id);
              if (before !== undefined) assert.equal(e, before, 'an id that stays keeps its entry');
              next.set(e.instance.id, e);
            }
            if (synced) {
              // what it reports changed (a sync of the list taken in already reports nothing new)
              for (const e of t.removed) assert.ok(!next.has(e.instance.id) && state.has(e.instance.id));
              for (const e of t.added) assert.ok(!state.has(e.instance.id) && next.has(e.instance.id));
              assert.equal(state.size + t.added.length - t.removed.length, next.size);
            }
            for (const id of state.keys()) if (!next.has(id)) assert.equal(t.get(id), undefined, `${id} left`);
            state = next;
            current = last;
          } else {
            // still taking it in: the entries of the list taken in before, nothing reported changed
            assert.ok(t.pending);
            assert.deepEqual(
              entries.map((e) => e.instance),
              expected(current),
            );
            assert.equal(t.added.length + t.removed.length + t.updated.length, 0);
          }
        };
        for (const o of ops) {
          if (o.kind === 'tick') {
            clock.advance(1);
            continue;
          }
          if (o.kind === 'list') last = o.list;
          const before = t.source;
          check(t.sync(last), before !== last);
        }
        for (let turns = 0; t.pending; turns++) {
          assert.ok(turns < 1_000, 'a sliced sync completes');
          clock.advance(1);
          const before = t.source;
          check(t.sync(last), before !== last);
        }
        assert.equal(clock.pendingTimers, 0);
        assert.ok(ready.every((l) => l !== undefined));
      }),
      { numRuns: 500 },
    );
  });

  it('takes a list differing in thousands of instances in in slices, one per timer turn, picks using the old entries meanwhile', () => {
    const clock = new ManualClock();
    const ready: (readonly ServiceInstance[])[] = [];
    const t = table(clock, 1 << 14, (l) => ready.push(l));
    const a = Array.from({ length: 5_000 }, (_, i) => inst(`a${i}`));
    t.sync(a); // a first list is synced at once: there are no entries to pick from meanwhile
    assert.equal(t.entries.length, 5_000);
    assert.equal(t.pending, false);
    const b = Array.from({ length: 5_000 }, (_, i) => inst(`b${i}`));
    const during = t.sync(b);
    assert.equal(during[0]!.instance, a[0], 'the old entries');
    assert.equal(t.pending, true);
    assert.equal(t.source, b, 'a picker comparing its list with source picks from the old entries at no cost');
    let turns = 0;
    while (ready.length === 0) {
      clock.advance(1);
      turns++;
    }
    // 5 000 × (1 + 8 + 32) units in slices of 2^14: 13 slices, the first in the sync itself; onReady on a turn of its own.
    assert.equal(turns, 13);
    assert.equal(ready[0], b);
    assert.equal(t.source, undefined, 'the next sync of the list takes it over');
    const after = t.sync(b);
    assert.equal(after.length, 5_000);
    assert.equal(after[0]!.instance, b[0]);
    assert.equal(t.added.length, 5_000);
    assert.equal(t.removed.length, 5_000);
    assert.equal(t.get('a0'), undefined, 'an id that left answers no get at once');
    // 5 000 ids left: more than one turn's worth, so the id map drops them on the next turns (1 024 a turn).
    assert.equal(clock.pendingTimers, 1);
    for (let k = 0; k < 5; k++) clock.advance(1);
    assert.equal(clock.pendingTimers, 0);
    assert.equal(t.get('a4999'), undefined);
    assert.equal(t.get('b4999')?.instance, b[4_999]);
  });

  it('applies a small change at once, and a new list replaces one being taken in', () => {
    const clock = new ManualClock();
    const t = table(clock, 1 << 14);
    const a = Array.from({ length: 5_000 }, (_, i) => inst(`a${i}`));
    t.sync(a);
    const grown = [...a, inst('x')];
    t.sync(grown);
    assert.equal(t.pending, false);
    assert.deepEqual(
      t.added.map((e) => e.instance.id),
      ['x'],
    );
    const b = Array.from({ length: 5_000 }, (_, i) => inst(`b${i}`));
    t.sync(b);
    assert.equal(t.pending, true);
    clock.advance(1);
    t.sync(a); // back to a list close to the one taken in: at once, the walk of b dropped
    assert.equal(t.pending, false);
    assert.deepEqual(
      t.removed.map((e) => e.instance.id),
      ['x'],
    );
    assert.equal(t.get('b0'), undefined, 'what the dropped walk made is forgotten');
    assert.equal(clock.pendingTimers, 0);
    t.sync(b);
    t.close();
    assert.equal(t.pending, false);
    assert.equal(clock.pendingTimers, 0);
    t.sync(b); // after close, at once
    assert.equal(t.entries[0]!.instance, b[0]);
  });

  it('leaves the table as it was when a list holds a bad instance, at once or in a slice (the next sync then throws)', () => {
    const clock = new ManualClock();
    const t = table(clock, 1 << 12);
    const a = Array.from({ length: 2_000 }, (_, i) => inst(`a${i}`));
    t.sync(a);
    const early = [inst('x'), null as never, ...a];
    assert.throws(() => t.sync(early), TypeError);
    assert.equal(t.get('x'), undefined);
    const late = [...Array.from({ length: 2_000 }, (_, i) => inst(`b${i}`)), null as never];
    t.sync(late); // sliced: the bad instance is met on a timer turn
    for (let k = 0; k < 100 && clock.pendingTimers > 0; k++) clock.advance(1);
    assert.equal(t.pending, false);
    assert.equal(t.get('b0'), undefined);
    assert.throws(() => t.sync(late), TypeError);
    const grown = [...a, inst('y')];
    t.sync(grown);
    assert.deepEqual(
      t.entries.map((e) => e.instance),
      grown,
    );
    assert.deepEqual(
      t.entries.map((e) => e.index),
      grown.map((_, k) => k),
    );
    assert.deepEqual(
      t.added.map((e) => e.instance.id),
      ['y'],
    );
  });

  it('lets RoundRobin and P2C pick from the previous list while a new one is taken in (sliceLists), then from the new one', () => {
    const clock = new ManualClock();
    for (const p of [new RoundRobin({ clock, sliceLists: true }), new P2C({ clock, sliceLists: true })]) {
      const a = Array.from({ length: 4_000 }, (_, i) => inst(`a${i}`));
      const b = Array.from({ length: 4_000 }, (_, i) => inst(`b${i}`));
      p.pick(a);
      assert.match(p.pick(b).id, /^a/);
      for (let k = 0; k < 100 && clock.pendingTimers > 0; k++) clock.advance(1);
      assert.equal(clock.pendingTimers, 0);
      for (let k = 0; k < 20; k++) assert.match(p.pick(b).id, /^b/);
    }
  });

  it('without sliceLists a picker takes any list in at once: every pick is one of the instances it is handed', () => {
    const clock = new ManualClock();
    for (const p of [new RoundRobin({ clock }), new P2C({ clock }), new RingHash({ clock })] as Picker[]) {
      const a = Array.from({ length: 4_000 }, (_, i) => inst(`a${i}`));
      const b = Array.from({ length: 4_000 }, (_, i) => inst(`b${i}`));
      p.pick(a, 'k');
      for (let k = 0; k < 20; k++) assert.match(p.pick(b, `k${k}`).id, /^b/);
      void p.close?.();
    }
    assert.throws(() => new RoundRobin({ sliceLists: 'yes' as never }), TypeError);
  });
});
