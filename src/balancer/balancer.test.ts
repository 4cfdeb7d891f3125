import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from '../core/clock.js';
import { ClosedError, NoInstanceError, RegistryUnavailableError } from '../core/errors.js';
import type { ServiceInstance } from '../registry/types.js';
import { Balancer, type BalancerEvent } from './balancer.js';
import { P2C } from './p2c.js';
import { RingHash } from './ring-hash.js';
import type { Picker } from './types.js';
import { FakeRegistry, inst, instances, seeded, settle } from './test-fixtures.js';

const ids = (list: readonly ServiceInstance[]) => list.map((i) => i.id).sort();

describe('Balancer', () => {
  it('follows the registry: the first listing, then create, update and delete events', async () => {
    const reg = new FakeRegistry();
    await reg.register(inst('a'));
    await reg.register(inst('b'));
    const b = new Balancer({ registry: reg, service: 'svc', strategy: 'round-robin', random: seeded(1) });
    await b.ready();
    assert.deepEqual(ids(b.instances()), ['a', 'b']);
    await settle();
    await reg.register(inst('c'));
    await reg.register(inst('x', undefined, { name: 'other' })); // another service: ignored
    await settle();
    assert.deepEqual(ids(b.instances()), ['a', 'b', 'c']);
    const moved = inst('a', undefined, { address: '127.0.0.1:9' });
    await reg.register(moved);
    await reg.deregister(inst('b'));
    await settle();
    assert.deepEqual(ids(b.instances()), ['a', 'c']);
    assert.ok(b.instances().includes(moved));
    const seen = new Set(Array.from({ length: 4 }, () => b.pick().id));
    assert.deepEqual([...seen].sort(), ['a', 'c']);
    await b.close();
    assert.equal(reg.watches.size, 0, 'the watch ended');
  });

  it('takes a list differing in thousands of instances in in slices on timer turns, the previous list answering meanwhile', async () => {
    const clock = new ManualClock();
    const a = instances(3_000, 'a');
    const b = new Balancer({ instances: a, strategy: 'round-robin', clock, outlier: false });
    assert.equal(b.instances().length, 3_000, 'a first list read before its slices are done is taken in at once');
    const events: BalancerEvent[] = [];
    b.onChange((e) => events.push(e));
    const next = instances(3_000, 'b');
    b.update(next);
    assert.equal(b.instances().length, 3_000);
    assert.equal(b.instances()[0]!.id, 'a0', 'the previous list until it is taken in');
    assert.match(b.pick().id, /^a/);
    const last = [...next.slice(1), inst('c')]; // a newer list replaces the one being taken in
    b.update(last);
    let turns = 0;
    while (clock.pendingTimers > 0) {
      clock.advance(1);
      turns++;
      b.pick();
    }
    assert.ok(turns >= 2, `${turns} turns`);
    assert.deepEqual(b.instances(), last);
    assert.ok(b.pick().id !== 'b0');
    assert.deepEqual(events, [{ type: 'instances', count: 3_000 }]);
    await b.close();
  });

  it('starts and drops the health state of thousands of instances over timer turns, in order with later changes', async () => {
    const clock = new ManualClock();
    const a = instances(5_000, 'a');
    const b = new Balancer({ instances: a, strategy: 'round-robin', clock, outlier: { consecutiveFailures: 1, maxEjectionPercent: 100 } });
    b.report(a[0]!, { ok: false, latencyMs: 1 });
    assert.equal(b.stats().ejected, 1);
    const next = instances(5_000, 'b');
    b.update(next);
    while (clock.pendingTimers > 0 && b.instances()[0] !== next[0]) clock.advance(1);
    assert.equal(b.instances()[0], next[0], 'taken in');
    assert.ok(clock.pendingTimers > 0, 'health bookkeeping still running on timers');
    b.update([...next, inst('c')]); // a small change meanwhile: the earlier batch is completed first
    assert.equal(b.stats().ejected, 0, 'the ejected instance that left was dropped');
    b.report(next[4_999]!, { ok: false, latencyMs: 1 });
    assert.equal(b.stats().ejected, 1, 'a new instance is tracked');
    b.report(inst('c'), { ok: false, latencyMs: 1 });
    assert.equal(b.stats().ejected, 2);
    while (clock.pendingTimers > 0) clock.advance(1);
    assert.equal(b.stats().ejected, 2);
    await b.close();
  });

  it('answers NoInstanceError for a service without instances, and picks once one registers', async () => {
    const reg = new FakeRegistry();
    const b = new Balancer({ registry: reg, service: 'svc' });
    await b.ready();
    assert.throws(() => b.pick(), NoInstanceError);
    await settle();
    await reg.register(inst('a'));
    await settle();
    assert.equal(b.pick().id, 'a');
    await b.close();
  });

  it('rejects ready() when the first listing fails, and recovers in the background', async () => {
    const reg = new FakeRegistry();
    await reg.register(inst('a'));
    reg.listFailures.push(new RegistryUnavailableError('down'));
    const clock = new ManualClock();
    const b = new Balancer({ registry: reg, service: 'svc', clock, random: () => 0 }); // backoff waits 0 ms (a timer of 1 ms)
    await assert.rejects(b.ready(), RegistryUnavailableError);
    assert.equal(b.instances().length, 0);
    await clock.advanceAsync(1);
    assert.deepEqual(ids(b.instances()), ['a']);
    await b.ready();
    await b.close();
  });

  it('lists again and watches again after the watch breaks, catching up on missed changes', async () => {
    const reg = new FakeRegistry();
    await reg.register(inst('a'));
    const clock = new ManualClock();
    const b = new Balancer({ registry: reg, service: 'svc', clock, random: () => 0 });
    await b.ready();
    await settle();
    reg.byId.set('b', inst('b')); // a change the watch never reports…
    reg.emit(new Error('stream reset')); // …because it breaks
    await clock.advanceAsync(1);
    assert.deepEqual(ids(b.instances()), ['a', 'b']);
    assert.equal(reg.lists, 2);
    await b.close();
  });

  it('backs off between attempts when every watch breaks at once, instead of listing in a hot loop', async () => {
    const reg = new FakeRegistry();
    await reg.register(inst('a'));
    reg.watch = () => ({
      [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(new Error('watch refused')) }),
    });
    const clock = new ManualClock();
    const b = new Balancer({ registry: reg, service: 'svc', clock, random: () => 0.01 }); // full jitter: waits 1, 2, 4, 8, 16, 32 … ms
    await b.ready();
    assert.equal(reg.lists, 1);
    await clock.advanceAsync(50);
    // Lists at 0, then after waits of 1, 2, 4, 8 and 16 ms (at 1, 3, 7, 15 and 31 ms); the next is at 63 ms.
    assert.equal(reg.lists, 6, `listed ${reg.lists} times in 50 ms`);
    await b.close();
  });

  it('keeps the list (and the strategy state) when a re-listing changes nothing', async () => {
    const reg = new FakeRegistry();
    await reg.register(inst('a'));
    await reg.register(inst('b'));
    const clock = new ManualClock();
    const b = new Balancer({ registry: reg, service: 'svc', clock, random: () => 0 });
    await b.ready();
    const before = b.instances();
    await settle();
    reg.emit(new Error('stream reset'));
    await clock.advanceAsync(1);
    await settle();
    assert.equal(reg.lists, 2);
    assert.equal(b.instances(), before);
    await reg.register({ ...inst('a') }); // an update event with the same content
    await settle();
    assert.equal(b.instances(), before);
    await b.close();
  });

  it('ejects an instance after 5 failed calls and brings it back after 30 s', async () => {
    const clock = new ManualClock();
    const b = new Balancer({ instances: instances(3), strategy: 'round-robin', clock, random: seeded(2) });
    const events: BalancerEvent[] = [];
    b.onChange((e) => events.push(e));
    const bad = b.instances()[1]!;
    for (let i = 0; i < 5; i++) b.report(bad, { ok: false, latencyMs: 1 });
    assert.deepEqual(ids(b.healthy()), ['i0', 'i2']);
    for (let i = 0; i < 20; i++) assert.notEqual(b.pick().id, 'i1');
    assert.deepEqual(
      b.health().map((h) => h.ejected),
      [false, true, false],
    );
    clock.advance(30_000);
    const seen = new Set(Array.from({ length: 6 }, () => b.pick().id));
    assert.ok(seen.has('i1'));
    assert.deepEqual(
      events.map((e) => e.type),
      ['ejected', 'returned'],
    );
    await b.close();
  });

  it('goes into panic mode below 50 % healthy and picks among all instances', async () => {
    const down = new Set<string>();
    const b = new Balancer({
      instances: instances(4),
      strategy: 'round-robin',
      activeHealth: { intervalMs: 3_600_000, unhealthyThreshold: 1, probe: async (i) => !down.has(i.id) },
    });
    down.add('i0');
    down.add('i1');
    await b.checkNow();
    assert.equal(b.panic, false); // 2 of 4 healthy is not fewer than 50 %
    assert.deepEqual(ids(b.healthy()), ['i2', 'i3']);
    down.add('i2');
    await b.checkNow();
    assert.equal(b.panic, true);
    assert.deepEqual(ids(b.healthy()), ['i0', 'i1', 'i2', 'i3']);
    const seen = new Set(Array.from({ length: 8 }, () => b.pick().id));
    assert.equal(seen.size, 4);
    down.clear();
    await b.checkNow();
    await b.checkNow(); // 2 successes to come back up
    assert.equal(b.panic, false);
    await b.close();
  });

  it('panicThreshold 0 never panics: with every instance down there is nothing to pick', async () => {
    const b = new Balancer({
      instances: instances(2),
      panicThreshold: 0,
      activeHealth: { intervalMs: 3_600_000, unhealthyThreshold: 1, probe: async () => false },
    });
    await b.checkNow();
    assert.throws(() => b.pick(), NoInstanceError);
    await b.close();
  });

  it('hands the strategy the same array until something changes, and drops state of removed instances', async () => {
    const lists: (readonly ServiceInstance[])[] = [];
    const spy: Picker = { pick: (list) => (lists.push(list), list[0]!) };
    const clock = new ManualClock();
    const b = new Balancer({ instances: instances(4), strategy: spy, clock });
    b.pick();
    b.pick();
    assert.equal(lists[0], lists[1]);
    const i1 = b.instances()[1]!;
    for (let i = 0; i < 5; i++) b.report(i1, { ok: false, latencyMs: 1 });
    b.pick();
    assert.notEqual(lists[2], lists[1]);
    assert.equal(b.health()[1]!.timesEjected, 1);
    b.update(instances(4).filter((i) => i.id !== 'i1'));
    b.update(instances(4));
    assert.equal(b.health()[1]!.timesEjected, 0, 'i1 came back as new');
    assert.equal(b.health()[1]!.ejected, false);
    await b.close();
  });

  it('closes its picker on close: a custom one once, and a RingHash rebuilding in slices finishes its rebuild', async () => {
    let closes = 0;
    const custom: Picker = { pick: (l) => l[0]!, close: () => void closes++ };
    const a = new Balancer({ instances: instances(2), strategy: custom });
    await a.close();
    await a.close();
    assert.equal(closes, 1, 'closed once, however often the balancer is');

    const clock = new ManualClock();
    const ring = new RingHash({ clock, sliceSize: 1_000 });
    const b = new Balancer({ instances: instances(50), strategy: ring, clock, outlier: false });
    b.pick('user:1'); // hands the picker its first list: a rebuild in slices starts
    assert.equal(ring.stats().rebuilding, true);
    assert.ok(clock.pendingTimers > 0);
    await b.close();
    assert.equal(ring.stats().rebuilding, false, 'the rebuild was finished, not left on a timer');
    assert.equal(clock.pendingTimers, 0);
    assert.equal(ring.ring.size, 50);
  });

  it('avoids excluded instances while others are available', async () => {
    const b = new Balancer({ instances: instances(3), strategy: 'ring-hash' });
    const first = b.pick('user:1');
    const second = b.pick('user:1', new Set([first.id]));
    assert.notEqual(second.id, first.id);
    const third = b.pick('user:1', new Set([first.id, second.id]));
    assert.equal(new Set([first.id, second.id, third.id]).size, 3);
    const all = new Set(b.instances().map((i) => i.id));
    assert.ok(all.has(b.pick('user:1', all).id), 'everything excluded: still an answer');
    await b.close();
  });

  it('avoids excluded instances by the strategy itself, for every built-in strategy (property)', () => {
    const strategies = ['round-robin', 'random', 'weighted-round-robin', 'ring-hash', 'p2c', 'least-request'] as const;
    fc.assert(
      fc.property(
        fc.constantFrom(...strategies),
        fc.integer({ min: 1, max: 6 }),
        fc.array(fc.nat(5), { maxLength: 6 }),
        fc.option(fc.string()),
        fc.integer(),
        (strategy, n, ex, key, seed) => {
          const b = new Balancer({ instances: instances(n), strategy, random: seeded(seed), outlier: false });
          const exclude = new Set(ex.filter((i) => i < n).map((i) => `i${i}`));
          for (let k = 0; k < 10; k++) {
            const x = b.pick(key ?? undefined, exclude);
            if (exclude.size < n) assert.ok(!exclude.has(x.id), `${strategy} picked excluded ${x.id}`);
            b.release(x);
          }
        },
      ),
    );
  });

  it('sends a call that avoids a cheap-looking excluded instance to the cheaper of the others, not round the list (P2C)', async () => {
    // The e2e case: an instance whose breaker is open looks idle and cheap, so P2C's first choice is
    // often it; the retry pick must then be P2C among the others, which almost never means the slow one.
    const clock = new ManualClock();
    const list = [inst('open'), inst('fast'), inst('slow')];
    const p2c = new P2C({ clock, random: seeded(5), decayMs: 1 });
    const b = new Balancer({ instances: list, strategy: p2c, outlier: false });
    const lat: Record<string, number> = { open: 1, fast: 5, slow: 200 };
    b.pick(); // the strategy meets the list
    clock.advance(10);
    for (const i of list) p2c.report(i, { ok: true, latencyMs: lat[i.id]! });
    const exclude = new Set(['open']);
    const counts = new Map<string, number>();
    for (let k = 0; k < 3_000; k++) {
      let x = b.pick();
      if (exclude.has(x.id)) {
        b.release(x);
        x = b.pick(undefined, exclude);
      }
      counts.set(x.id, (counts.get(x.id) ?? 0) + 1);
      b.release(x);
    }
    assert.equal(counts.get('open'), undefined);
    assert.ok((counts.get('slow') ?? 0) < 30, `the slow instance got ${counts.get('slow')} of 3 000 picks`);
    await b.close();
  });

  it('counts in-flight calls through pick and report (P2C)', async () => {
    const b = new Balancer({ instances: instances(2), strategy: 'p2c', random: seeded(3) });
    const a = b.pick();
    const picker = b.picker as import('./p2c.js').P2C;
    assert.equal(picker.inFlightOf(a.id), 1);
    b.report(a, { ok: true, latencyMs: 3 });
    assert.equal(picker.inFlightOf(a.id), 0);
    const c = b.pick();
    b.release(c); // never sent: in-flight ends, latency untouched
    assert.equal(picker.inFlightOf(c.id), 0);
    await b.close();
  });

  it('lets the last of duplicate ids win', async () => {
    const later = inst('a', undefined, { address: '127.0.0.1:2' });
    const b = new Balancer({ instances: [inst('a'), inst('b'), later] });
    assert.equal(b.instances().length, 2);
    assert.ok(b.instances().includes(later));
    await b.close();
  });

  it('throws ClosedError after close and rejects bad options and reports', async () => {
    const b = new Balancer({ instances: instances(1) });
    assert.throws(() => b.report(null as never, { ok: true, latencyMs: 1 }), TypeError);
    assert.throws(() => b.report(b.instances()[0]!, {} as never), TypeError);
    await b.close();
    assert.throws(() => b.pick(), ClosedError);
    assert.throws(() => new Balancer({ registry: {} as never, service: 'svc' }), TypeError);
    assert.throws(() => new Balancer({ registry: new FakeRegistry() }), TypeError);
    assert.throws(() => new Balancer({ instances: [], strategy: 'fastest' as never }), RangeError);
    assert.throws(() => new Balancer({ instances: [], panicThreshold: 2 }), RangeError);
    assert.throws(() => new Balancer({ instances: [], activeHealth: { path: 'health' } }), TypeError);
    assert.throws(() => new Balancer({ instances: 'a' as never }), TypeError);
  });

  it('keeps its invariants under any sequence of list changes, reports and time (property)', () => {
    const pool = instances(6);
    const op = fc.oneof(
      fc.record({ kind: fc.constant('update' as const), keep: fc.subarray(pool.map((_, i) => i)) }),
      fc.record({ kind: fc.constant('report' as const), at: fc.nat(5), ok: fc.boolean(), times: fc.integer({ min: 1, max: 6 }) }),
      fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 120_000 }) }),
      fc.record({ kind: fc.constant('pick' as const), key: fc.option(fc.string(), { nil: undefined }) }),
    );
    const strategy = fc.constantFrom('round-robin', 'random', 'weighted-round-robin', 'ring-hash', 'p2c', 'least-request' as const);
    fc.assert(
      fc.property(strategy, fc.array(op, { maxLength: 60 }), (name, ops) => {
        const clock = new ManualClock();
        const b = new Balancer({ instances: pool, strategy: name, clock, random: seeded(9) });
        for (const o of ops) {
          if (o.kind === 'update') b.update(o.keep.map((i) => pool[i]!));
          else if (o.kind === 'advance') clock.advance(o.ms);
          else if (o.kind === 'report') {
            const target = b.instances()[o.at % Math.max(1, b.instances().length)];
            if (target !== undefined) for (let k = 0; k < o.times; k++) b.report(target, { ok: o.ok, latencyMs: 5 });
          } else if (b.instances().length === 0) assert.throws(() => b.pick(o.key), NoInstanceError);
          else {
            const x = b.pick(o.key);
            assert.ok(b.instances().includes(x), 'picks only known instances');
            b.report(x, { ok: true, latencyMs: 1 });
          }
          const all = b.instances();
          const healthy = b.healthy();
          const ejected = b.health().filter((h) => h.ejected).length;
          assert.ok(ejected <= all.length / 2, 'never more than half ejected');
          assert.ok(
            healthy.every((h) => all.includes(h)),
            'healthy ⊆ all',
          );
          assert.equal(b.panic, healthy.length === all.length && ejected > 0);
          if (!b.panic) assert.equal(healthy.length, all.length - ejected);
        }
        void b.close();
      }),
      { numRuns: 150 },
    );
  });
});
