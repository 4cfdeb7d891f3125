import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../core/clock.js';
import { BreakerOpenError, ClosedError } from '../core/errors.js';
import { BreakerGroup, getDefaultBreakerGroup, setDefaultBreakerGroup } from './breaker-group.js';
import { CircuitBreaker } from './circuit-breaker.js';
import { SreBreaker } from './sre-breaker.js';
import { neverAborted } from '../core/guard.js';
import type { Breaker } from './types.js';

describe('BreakerGroup', () => {
  it('makes one breaker per name on first use and reuses it', () => {
    const made: string[] = [];
    const g = new BreakerGroup({
      factory: (name) => {
        made.push(name);
        return new CircuitBreaker({ name });
      },
    });
    const a = g.get('payments/10.0.0.1:443');
    assert.equal(g.get('payments/10.0.0.1:443'), a);
    g.get('inventory');
    assert.deepEqual(made, ['payments/10.0.0.1:443', 'inventory']);
    assert.equal(a?.name, 'payments/10.0.0.1:443');
    assert.equal(g.size, 2);
  });

  it('defaults to SreBreakers (go-zero)', () => {
    assert.ok(new BreakerGroup().get('x') instanceof SreBreaker);
  });

  it('execute guards each name with its own breaker', async () => {
    const g = new BreakerGroup({ factory: (name) => new CircuitBreaker({ name, minimumCalls: 2 }) });
    for (let i = 0; i < 2; i++) await g.execute('down', () => Promise.reject(new Error('x'))).catch(() => {});
    await assert.rejects(
      g.execute('down', async () => 1),
      BreakerOpenError,
    );
    assert.equal(await g.execute('up', async () => 2), 2);
  });

  it('runs the calls of excluded names unguarded (list or predicate), sync throws included', async () => {
    const byList = new BreakerGroup({ exclude: ['health'] });
    const byFn = new BreakerGroup({ exclude: (n) => n.startsWith('internal/') });
    assert.equal(await byList.execute('health', () => 'ok'), 'ok');
    assert.equal(await byFn.execute('internal/metrics', async () => 'ok'), 'ok');
    await assert.rejects(
      byList.execute('health', () => {
        throw new Error('sync');
      }),
      /sync/,
    );
    assert.equal(byList.get('health'), undefined);
    assert.equal(byList.size + byFn.size, 0);
  });

  it('evicts breakers idle for idleMs when new ones are made', () => {
    const clock = new ManualClock();
    const g = new BreakerGroup({ clock, idleMs: 1_000, maxBreakers: 16 }); // sweeps every max/16 creations
    g.get('a');
    g.get('b');
    clock.advance(600);
    g.get('a'); // used again: stays
    clock.advance(600);
    g.get('c'); // 'b' has been idle 1 200 ms
    assert.deepEqual(g.names().sort(), ['a', 'c']);
    assert.equal(g.evicted, 1);
  });

  it('judges idleness in slices of idleMs / 16: never before idleMs, at most one slice after', () => {
    const clock = new ManualClock();
    const g = new BreakerGroup({ clock, idleMs: 1_600, maxBreakers: 16 }); // one slice = 100 ms
    g.get('a');
    clock.advance(1_599);
    g.get('b'); // a sweep: 'a' is idle 1 599 ms, under idleMs
    assert.ok(g.has('a'));
    clock.advance(101 + 100); // 'a' idle 1 800 ms: past idleMs plus one slice
    g.get('c');
    assert.ok(!g.has('a'));
    assert.ok(g.has('b'));
  });

  it('keeps working when the slice numbers are renumbered (after 2^30 slices)', () => {
    const clock = new ManualClock();
    const g = new BreakerGroup({ clock, idleMs: 16, maxBreakers: 16 }); // one slice = 1 ms
    const hot = g.get('hot');
    g.get('cold');
    clock.advance(2 ** 30 + 5);
    assert.equal(g.get('hot'), hot); // renumbers here
    clock.advance(10);
    assert.equal(g.get('hot'), hot);
    clock.advance(10);
    g.get('new'); // 'cold' idle for 2^30 ms, 'hot' used 10 ms ago
    assert.deepEqual(g.names().sort(), ['hot', 'new']);
    clock.advance(40);
    g.get('newer');
    assert.deepEqual(g.names().sort(), ['newer']);
  });

  it('never evicts an isolated breaker for idleness', () => {
    const clock = new ManualClock();
    const g = new BreakerGroup({ clock, idleMs: 1_000, factory: (name) => new CircuitBreaker({ name, clock }) });
    g.get('pinned')!.isolate();
    clock.advance(5_000);
    g.get('other');
    assert.ok(g.has('pinned'));
    assert.equal(g.get('pinned')!.state, 'open');
  });

  it('stays bounded by maxBreakers however many distinct names arrive (a million)', () => {
    const clock = new ManualClock();
    // A featherweight breaker: the bound is the group's, whatever the breakers weigh.
    const stub: Breaker = { name: 'stub', admit: () => ({ success() {}, failure() {}, release() {} }), execute: (fn) => Promise.resolve(fn(neverAborted)) };
    const g = new BreakerGroup({ clock, maxBreakers: 1_000, factory: () => stub });
    let max = 0;
    for (let i = 0; i < 1_000_000; i++) {
      if (i % 1_000 === 0) clock.advance(1);
      g.get(`user-${i}`);
      if (g.size > max) max = g.size;
    }
    assert.ok(max <= 1_000, `held ${max}`);
    assert.equal(g.evicted + g.size, 1_000_000);
  });

  it('keeps the breakers in use when a flood of new names hits the bound', () => {
    const clock = new ManualClock();
    const g = new BreakerGroup({ clock, maxBreakers: 100, idleMs: 60_000 });
    const hot = g.get('payments');
    for (let i = 0; i < 10_000; i++) {
      clock.advance(1);
      g.get(`scan-${i}`);
      if (i % 10 === 0) assert.equal(g.get('payments'), hot, `lost the hot breaker after ${i} names`);
    }
  });

  it('rejects a non-string name and a factory that returns no breaker', async () => {
    await assert.rejects(
      new BreakerGroup().execute(42 as never, () => 1),
      TypeError,
    );
    await assert.rejects(
      new BreakerGroup({ factory: () => ({}) as never }).execute('x', () => 1),
      /factory must return a Breaker/,
    );
  });

  it('has a lazy, replaceable process-wide default', () => {
    const first = getDefaultBreakerGroup();
    assert.equal(getDefaultBreakerGroup(), first);
    const mine = new BreakerGroup();
    setDefaultBreakerGroup(mine);
    assert.equal(getDefaultBreakerGroup(), mine);
    setDefaultBreakerGroup(undefined);
    assert.notEqual(getDefaultBreakerGroup(), mine);
    assert.throws(() => setDefaultBreakerGroup({} as never), TypeError);
  });

  it('takes a factory: a group of CircuitBreakers needs one, and hands out what it makes', () => {
    // @ts-expect-error without a factory the group would make SreBreakers, which are not CircuitBreakers
    assert.throws(() => new BreakerGroup<CircuitBreaker>().get('x')!.onStateChange(() => {}), TypeError);
    const g = new BreakerGroup({ factory: (name) => new CircuitBreaker({ name }) });
    const b: CircuitBreaker | undefined = g.get('payments');
    assert.ok(b instanceof CircuitBreaker);
    assert.equal(typeof b.onStateChange, 'function');
  });

  it('stats() counts breakers held, made and evicted', () => {
    const clock = new ManualClock();
    const g = new BreakerGroup({ clock, idleMs: 1_000, maxBreakers: 16 });
    g.get('a');
    g.get('b');
    clock.advance(2_000);
    g.get('c');
    const st = g.stats();
    assert.deepEqual(st, { size: 1, created: 3, evicted: 2 });
    assert.notEqual(g.stats(), st, 'a fresh object each time');
  });

  it('close() closes every breaker it holds and refuses later calls with ClosedError', async () => {
    const g = new BreakerGroup({ factory: (name) => new CircuitBreaker({ name }) });
    const b = g.get('a')!;
    await g[Symbol.asyncDispose]();
    await g.close();
    assert.equal(g.size, 0);
    assert.throws(() => b.admit(), ClosedError);
    assert.throws(() => g.get('a'), ClosedError);
    await assert.rejects(
      g.execute('b', () => 1),
      ClosedError,
    );
  });

  it('refuses a frozen breaker from the factory (it marks its use on each breaker)', () => {
    const frozen = Object.freeze({
      name: 'f',
      admit: () => ({ success() {}, failure() {}, release() {} }),
      execute: (fn: () => unknown) => Promise.resolve(fn()),
    });
    assert.throws(() => new BreakerGroup({ factory: () => frozen as never }).get('x'), /extensible/);
  });

  it('rejects a task that is not a function for an excluded name too', async () => {
    await assert.rejects(new BreakerGroup({ exclude: ['x'] }).execute('x', undefined as never), TypeError);
  });
});
