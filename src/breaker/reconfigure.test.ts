/**
 * Live reconfiguration of the breakers and of BreakerGroup (core's Reconfigurable): checked as the
 * constructor checks, applied all or nothing, fixed keys refused, and what each keeps across a change.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from '../core/clock.js';
import { CircuitBreaker } from './circuit-breaker.js';
import { SreBreaker } from './sre-breaker.js';
import { BreakerGroup } from './breaker-group.js';
import type { CircuitBreakerOptions, SreBreakerOptions } from './types.js';
import { MemoryFleetStore } from '../fleet/memory-store.js';

const boom = () => new Error('boom');

/** messageOf answers the message `build` throws (a TypeError or RangeError), or fails. */
function messageOf(build: () => unknown): string {
  try {
    build();
  } catch (err) {
    assert.ok(err instanceof TypeError || err instanceof RangeError, String(err));
    return `${err.name}: ${err.message}`;
  }
  assert.fail('did not throw');
}

describe('CircuitBreaker.reconfigure', () => {
  it('answers its options as plain data, and reconfigure(options()) of another breaker makes them equal', () => {
    const a = new CircuitBreaker({ failureRate: 0.3, windowCalls: 20, minimumCalls: 5, openBackoff: { multiplier: 3, maxMs: 90_000 } });
    const b = new CircuitBreaker();
    assert.deepEqual(a.options(), {
      failureRate: 0.3,
      slowCallRate: 1,
      slowCallMs: Infinity,
      minimumCalls: 5,
      windowCalls: 20,
      openMs: 30_000,
      openBackoff: { multiplier: 3, maxMs: 90_000 },
      halfOpenCalls: 5,
      probeTimeoutMs: 10_000,
    });
    b.reconfigure(a.options());
    assert.deepEqual(b.options(), a.options());
    const o = a.options();
    (o.openBackoff as { maxMs: number }).maxMs = 1; // fresh data: changing it changes nothing
    assert.equal(a.options().openBackoff?.maxMs, 90_000);
    b.reconfigure({ windowMs: 5_000 });
    assert.deepEqual([b.options().windowMs, b.options().buckets, b.options().windowCalls], [5_000, 10, undefined], 'a time window replaces the count window');
    b.reconfigure({ openBackoff: undefined, failureRate: undefined });
    assert.deepEqual([b.options().openBackoff, b.options().failureRate], [undefined, 0.5], 'undefined returns a key to its default');
  });

  it('refuses a bad change with the constructor’s message and applies none of it (property: any bad key among good ones)', () => {
    const bad: [keyof CircuitBreakerOptions, unknown][] = [
      ['failureRate', 0],
      ['minimumCalls', 0.5],
      ['openMs', -1],
      ['windowCalls', 0],
      ['buckets', 2.5],
      ['halfOpenCalls', 0],
      ['slowCallRate', 2],
      ['openBackoff', { multiplier: 0.5, maxMs: 60_000 }],
      ['probeTimeoutMs', 'x'],
    ];
    fc.assert(
      fc.property(fc.constantFrom(...bad), fc.double({ min: 0.05, max: 1, noNaN: true }), fc.integer({ min: 1, max: 50 }), ([key, value], rate, openS) => {
        const b = new CircuitBreaker({ clock: new ManualClock() });
        const before = b.options();
        const change = { failureRate: rate, openMs: openS * 1_000, [key]: value } as Partial<CircuitBreakerOptions>;
        const live = messageOf(() => b.reconfigure(change));
        assert.deepEqual(b.options(), before, 'nothing of the change applied');
        assert.equal(b.failureRate, 0.5);
        const merged: CircuitBreakerOptions = { ...before, ...change };
        if (key === 'windowCalls') {
          delete merged.windowMs; // a count window replaces the time window
          delete merged.buckets;
        }
        assert.equal(
          live,
          messageOf(() => new CircuitBreaker(merged)),
          'same text as the constructor',
        );
      }),
      { numRuns: 60 },
    );
  });

  it('refuses the keys a running breaker cannot change, old spellings and unknown keys', () => {
    const clock = new ManualClock();
    const b = new CircuitBreaker({ name: 'pay', clock });
    assert.match(
      messageOf(() => b.reconfigure({ name: 'other' })),
      /^TypeError: CircuitBreaker: name cannot change on a running breaker \(reconfigure\), got "other"$/,
    );
    assert.match(
      messageOf(() => b.reconfigure({ clock: new ManualClock() })),
      /clock cannot change on a running breaker/,
    );
    assert.match(
      messageOf(() => b.reconfigure({ fleet: { store: new MemoryFleetStore() } })),
      /fleet cannot change on a running breaker/,
    );
    assert.match(
      messageOf(() => b.reconfigure({ openBackoff: { factor: 2, maxMs: 60_000 } } as never)),
      /^TypeError: CircuitBreaker: openBackoff\.factor was renamed to openBackoff\.multiplier$/,
    );
    assert.match(
      messageOf(() => b.reconfigure({ window: { calls: 10 } } as never)),
      /window\.calls was renamed to windowCalls/,
    );
    assert.match(
      messageOf(() => b.reconfigure({ failureRat: 0.2 } as never)),
      /failureRat is not an option; the options are name, failureRate/,
    );
    b.reconfigure({ name: 'pay', clock, failureRate: 0.2 }); // unchanged fixed keys are fine
    assert.equal(b.failureRate, 0.2);
  });

  it('keeps its state and window counts across a change; a new window shape starts a fresh window', () => {
    const clock = new ManualClock();
    const b = new CircuitBreaker({ clock, minimumCalls: 10, windowCalls: 20 });
    for (let i = 0; i < 6; i++) b.admit().failure(boom());
    for (let i = 0; i < 2; i++) b.admit().success();
    b.reconfigure({ failureRate: 0.9, openMs: 5_000 });
    assert.deepEqual([b.stats().calls, b.stats().failures], [8, 6], 'same shape: the counts stay');
    b.reconfigure({ minimumCalls: 8, failureRate: 0.5 });
    b.admit().failure(boom()); // judged with the new rule at the next failure: 7 of 9 ≥ 50 %
    assert.equal(b.state, 'open');
    assert.equal(b.stats().failedCalls, 7);
    b.reconfigure({ windowCalls: 50 });
    assert.equal(b.state, 'open', 'the state is kept');
    clock.advance(5_000);
    assert.equal(b.state, 'half-open', 'it tripped after the change: open for the new openMs');
    b.reset();
    b.reconfigure({ windowMs: 10_000, buckets: 5 });
    b.admit().success();
    assert.deepEqual([b.stats().calls, b.stats().failures, b.stats().successfulCalls, b.stats().failedCalls], [1, 0, 3, 7], 'fresh window, counters kept');
  });

  it('an open period in progress keeps its end; a half-open period starts over when halfOpenCalls changes', () => {
    const clock = new ManualClock();
    const b = new CircuitBreaker({ clock, minimumCalls: 1, openMs: 1_000, halfOpenCalls: 2 });
    b.admit().failure(boom());
    b.reconfigure({ openMs: 60_000 });
    clock.advance(1_000);
    assert.equal(b.state, 'half-open');
    const probe = b.admit();
    b.reconfigure({ halfOpenCalls: 1 });
    probe.success(); // a probe of the period that ended: not counted
    assert.equal(b.state, 'half-open');
    b.admit().success();
    assert.equal(b.state, 'closed', 'one probe of the new count closes it');
    b.admit().failure(boom());
    clock.advance(59_999);
    assert.equal(b.state, 'open', 'the next trip uses the new openMs');
  });

  it('turning slow-call detection on does not count calls admitted untimed as slow', () => {
    const clock = new ManualClock(1_000_000);
    const b = new CircuitBreaker({ clock, minimumCalls: 1, slowCallRate: 0.5 });
    const t = b.admit();
    b.reconfigure({ slowCallMs: 100 });
    t.success();
    assert.equal(b.stats().slowCalls, 0);
    assert.equal(b.state, 'closed');
    const u = b.admit();
    clock.advance(100);
    u.success();
    assert.equal(b.state, 'open', 'a call admitted after the change is timed');
  });
});

describe('SreBreaker.reconfigure', () => {
  it('answers its options, refuses bad ones with the constructor’s message and applies all or nothing', () => {
    const b = new SreBreaker({ clock: new ManualClock(), k: 2 });
    assert.deepEqual(b.options(), { windowMs: 10_000, buckets: 40, k: 2, protection: 5, forcePassMs: 1_000, countRejections: false });
    const before = b.options();
    const bad: Partial<SreBreakerOptions>[] = [{ k: 3, protection: -1 }, { k: 3, buckets: 0 }, { k: 0.5 }, { k: 3, countRejections: 1 as never }];
    for (const change of bad) {
      assert.equal(
        messageOf(() => b.reconfigure(change)),
        messageOf(() => new SreBreaker({ ...before, ...change })),
      );
      assert.deepEqual(b.options(), before);
      assert.equal(b.k, 2);
    }
    assert.match(
      messageOf(() => b.reconfigure({ random: () => 0 })),
      /^TypeError: SreBreaker: random cannot change on a running breaker/,
    );
    assert.match(
      messageOf(() => b.reconfigure({ name: 'x' })),
      /name cannot change/,
    );
    b.reconfigure({ k: 1.1, protection: 0 });
    assert.deepEqual([b.k, b.protection], [1.1, 0]);
  });

  it('keeps its window across a change of k, starts a fresh one when its shape changes, and keeps its counters', () => {
    const clock = new ManualClock();
    const b = new SreBreaker({ clock, protection: 0, random: () => 0, forcePassMs: 1e9 });
    for (let i = 0; i < 10; i++) b.markFailure(boom());
    b.tryAdmit()?.release(); // the force pass of the first drop decision
    b.reconfigure({ k: 2 });
    assert.equal(b.stats().failures, 10);
    assert.equal(b.tryAdmit(), undefined, 'still dropping on the kept window');
    b.reconfigure({ windowMs: 2_000, buckets: 4 });
    assert.deepEqual([b.stats().failures, b.stats().drops], [0, 0], 'a fresh window');
    assert.deepEqual([b.stats().failedCalls, b.stats().notPermittedCalls], [10, 1], 'counters kept');
    assert.notEqual(b.tryAdmit(), undefined, 'nothing dropped on an empty window');
  });
});

describe('BreakerGroup.reconfigure', () => {
  it('changes idleMs and maxBreakers, refuses the fixed keys, and leaves its members alone', () => {
    const clock = new ManualClock();
    const group = new BreakerGroup<CircuitBreaker>({ clock, idleMs: 1_000, maxBreakers: 10, factory: (name) => new CircuitBreaker({ name, clock }) });
    assert.deepEqual(group.options(), { idleMs: 1_000, maxBreakers: 10 });
    for (let i = 0; i < 8; i++) group.get(`b${i}`);
    group.get('b0')!.reconfigure({ failureRate: 0.1 });
    assert.match(
      messageOf(() => group.reconfigure({ factory: () => new CircuitBreaker() })),
      /^TypeError: BreakerGroup: factory cannot change on a running group/,
    );
    assert.match(
      messageOf(() => group.reconfigure({ maxBreakers: 0 })),
      /^RangeError: BreakerGroup: maxBreakers.*0/,
    );
    assert.match(
      messageOf(() => group.reconfigure({ idleMs: 5_000, maxBreakers: 0.5 })),
      /maxBreakers/,
    );
    assert.equal(group.idleMs, 1_000, 'all or nothing');
    group.reconfigure({ maxBreakers: 4 });
    assert.ok(group.size < 4, `evicted down to the new bound at once: ${group.size}`);
    assert.equal(group.maxBreakers, 4);
    clock.advance(900);
    group.get('late');
    group.reconfigure({ idleMs: 10_000, maxBreakers: 100 });
    clock.advance(5_000);
    for (let i = 0; i < 14; i++) group.get(`n${i}`); // creations sweep: nothing is idle under the new idleMs
    assert.ok(group.has('late'), 'a new idleMs restarts idle time');
    assert.equal(group.evicted, 5);
  });

  it('onCreate hears each breaker it makes before get answers it, so a rule applies from the first call', () => {
    const clock = new ManualClock();
    const group = new BreakerGroup<CircuitBreaker>({ clock, factory: (name) => new CircuitBreaker({ name, clock }) });
    const seen: string[] = [];
    const off = group.onCreate(({ name, breaker }) => {
      seen.push(name);
      if (name.startsWith('pay/')) breaker.isolate('drain pay');
    });
    assert.equal(group.get('pay/1')!.tryAdmit(), undefined, 'isolated before its first call');
    group.get('pay/1');
    group.get('shop/1');
    off();
    group.get('pay/2');
    assert.deepEqual(seen, ['pay/1', 'shop/1']);
  });
});
