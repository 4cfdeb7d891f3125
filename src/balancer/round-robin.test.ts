import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { NoInstanceError } from '../core/errors.js';
import { LeastRequest } from './least-request.js';
import type { ServiceInstance } from '../registry/types.js';
import { Random } from './random.js';
import { RoundRobin } from './round-robin.js';
import { inst, instances, seeded } from './test-fixtures.js';
import { weightOf } from './instance-table.js';

describe('RoundRobin', () => {
  it('takes instances in turn from a random starting point', () => {
    const list = instances(3);
    const p = new RoundRobin({ random: () => 0.5 }); // offset 512 → 512 % 3 = 2
    assert.deepEqual(
      Array.from({ length: 6 }, () => p.pick(list).id),
      ['i2', 'i0', 'i1', 'i2', 'i0', 'i1'],
    );
  });

  it('gives every instance the same count over whole rounds, through list changes', () => {
    const p = new RoundRobin({ random: seeded(1) });
    let list = instances(5);
    for (let i = 0; i < 7; i++) p.pick(list); // stop mid-round
    list = instances(4);
    const after = new Map<string, number>();
    for (let i = 0; i < 400; i++) {
      const id = p.pick(list).id;
      after.set(id, (after.get(id) ?? 0) + 1);
    }
    assert.deepEqual([...after.values()], [100, 100, 100, 100]);
  });

  it('lets the last of duplicate ids win and throws NoInstanceError when empty', () => {
    const p = new RoundRobin();
    const b2 = inst('b', undefined, { address: '127.0.0.1:2' });
    const list = [inst('a'), inst('b'), b2];
    const seen = new Set(Array.from({ length: 4 }, () => p.pick(list)));
    assert.deepEqual(new Set([...seen].map((x) => x.id)), new Set(['a', 'b']));
    assert.ok(seen.has(b2));
    assert.throws(() => p.pick([]), NoInstanceError);
  });
});

describe('Random', () => {
  it('spreads picks about evenly with an injected random source', () => {
    const p = new Random({ random: seeded(2) });
    const list = instances(4);
    const counts = new Map<string, number>();
    for (let i = 0; i < 40_000; i++) {
      const id = p.pick(list).id;
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    for (const c of counts.values()) assert.ok(c > 9_000 && c < 11_000, `count ${c}`);
  });

  it('is driven entirely by random()', () => {
    const list = instances(4);
    assert.equal(new Random({ random: () => 0 }).pick(list).id, 'i0');
    assert.equal(new Random({ random: () => 0.99 }).pick(list).id, 'i3');
    assert.equal(new Random({ random: () => 1 }).pick(list).id, 'i3'); // out of range: still a real instance
    assert.throws(() => new Random({ random: 'x' as never }), TypeError);
    assert.throws(() => new Random().pick([]), NoInstanceError);
  });
});

describe('LeastRequest', () => {
  it('picks the one with fewer calls in flight of the two it draws', () => {
    const list = instances(4);
    // Every pick draws i0, then i1: with i0 busy, each goes to i1.
    const draws = [0, 0.3];
    let k = 0;
    const p = new LeastRequest({ random: () => draws[k++ % draws.length]! });
    p.pick(list); // learns the list
    k = 0;
    p.start(list[0]!);
    for (let i = 0; i < 3; i++) assert.equal(p.pick(list).id, 'i1');
    p.report(list[0]!, { ok: true, latencyMs: 1 });
    assert.equal(p.inFlightOf('i0'), 0);
    assert.equal(p.pick(list).id, 'i0', 'idle and drawn first: ties go to the first drawn');
  });

  it('keeps in-flight counts even under load: the busiest stays near the mean (power of two choices)', () => {
    const list = instances(100);
    const p = new LeastRequest({ random: seeded(5) });
    const random = seeded(6);
    const open: ServiceInstance[] = [];
    for (let i = 0; i < 50_000; i++) {
      const x = p.pick(list);
      p.start(x);
      open.push(x);
      if (open.length > 1_000) {
        const j = Math.floor(random() * open.length);
        p.report(open[j]!, { ok: true, latencyMs: 1 });
        open[j] = open[open.length - 1]!;
        open.pop();
      }
    }
    const loads = list.map((x) => p.inFlightOf(x.id)!);
    assert.equal(
      loads.reduce((a, b) => a + b, 0),
      open.length,
    );
    assert.ok(Math.max(...loads) <= 10 + 4, `busiest ${Math.max(...loads)} with mean 10`);
    assert.deepEqual(p.stats(), { instances: 100, inFlight: open.length });
  });

  it('avoids excluded instances while others are available, and rejects bad options', () => {
    const list = instances(5);
    const p = new LeastRequest({ random: seeded(2) });
    const exclude = new Set(['i0', 'i1', 'i2', 'i3']);
    for (let i = 0; i < 20; i++) assert.equal(p.pick(list, undefined, exclude).id, 'i4');
    assert.throws(() => new LeastRequest({ choiceCount: 1 }), RangeError);
    assert.throws(() => new LeastRequest({ random: 3 as never }), TypeError);
  });

  it('never counts below zero and throws NoInstanceError when empty', () => {
    const p = new LeastRequest();
    const list = instances(2);
    p.pick(list);
    p.report(list[0]!, { ok: true, latencyMs: 1 });
    assert.equal(p.inFlightOf('i0'), 0);
    assert.throws(() => p.pick([]), NoInstanceError);
  });
});

describe('weightOf', () => {
  const table: [string | undefined, number, boolean][] = [
    [undefined, 1, false],
    ['3', 3, false],
    ['2.5', 2.5, false],
    ['0', 1, true],
    ['-4', 1, true],
    ['abc', 1, true],
    ['', 1, true],
    ['NaN', 1, true],
    ['Infinity', 1, true],
    ['1e9', 1_000_000, true],
  ];
  for (const [raw, want, warns] of table) {
    it(`reads weight ${JSON.stringify(raw)} as ${want}${warns ? ' with a warning' : ''}`, () => {
      const warnings: string[] = [];
      assert.equal(
        weightOf(inst('x', raw), (m) => warnings.push(m)),
        want,
      );
      assert.equal(warnings.length, warns ? 1 : 0);
    });
  }
});
