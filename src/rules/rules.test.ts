import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { ManualClock } from '../core/clock.js';
import { ClosedError } from '../core/errors.js';
import { diagnosticsChannels, type RulesRefusedMessage } from '../core/diagnostics.js';
import { TokenLimiter, type TokenLimiterOptions } from '../limit/token-limiter.js';
import { BreakerGroup } from '../breaker/breaker-group.js';
import { CircuitBreaker } from '../breaker/circuit-breaker.js';
import { ResilientClient } from '../client/resilient-client.js';
import { MemoryRegistry } from '../registry/memory-registry.js';
import { MemoryRuleStore } from './memory-rule-store.js';
import { checkRule } from './check-rule.js';
import { Rules } from './rules.js';
import type { RuleChange, RuleListing, RuleStore } from './types.js';

/**
 * FakeLimiter keeps the Reconfigurable contract over TokenLimiter's own validation (a throwaway per
 * change), so refusals carry the constructor's text: the binder's logic is tested here, each
 * component's `reconfigure` beside the component.
 */
class FakeLimiter {
  runs: Partial<TokenLimiterOptions>;
  closed = false;
  changes = 0;
  constructor(options: Partial<TokenLimiterOptions>) {
    this.runs = { ...options };
  }
  reconfigure(partial: Partial<TokenLimiterOptions>): void {
    if (this.closed) throw new ClosedError('closed');
    const next = { ...this.runs, ...partial };
    new TokenLimiter(next as TokenLimiterOptions); // throws the constructor's TypeError / RangeError
    this.runs = next;
    this.changes++;
  }
  options(): Partial<TokenLimiterOptions> {
    return { ...this.runs };
  }
}

/** FakeBreaker records isolate / reset calls. */
class FakeBreaker extends FakeLimiter {
  calls: string[] = [];
  isolate(reason?: string): void {
    this.calls.push(`isolate:${reason}`);
  }
  reset(): void {
    this.calls.push('reset');
  }
}

/** FakeClient records weights and faults per service. */
class FakeClient {
  weights = new Map<string, Record<string, number> | undefined>();
  faults = new Map<string, Record<string, unknown> | undefined>();
  setWeights(service: string, overrides: Record<string, number> | undefined): void {
    if (overrides !== undefined && Object.values(overrides).every((w) => w === 0)) throw new RangeError('Balancer: weights must leave one instance above 0');
    this.weights.set(service, overrides);
  }
  setFault(service: string, fault: Record<string, unknown> | undefined): void {
    this.faults.set(service, fault);
  }
}

async function setup(instance = 'i-1') {
  const clock = new ManualClock();
  const store = new MemoryRuleStore({ clock });
  const rules = new Rules({ store, service: 'orders', instance, clock });
  await rules.start();
  const put = (key: string, doc: object, ttlMs?: number) => store.put(key, JSON.stringify(doc), ttlMs === undefined ? undefined : { ttlMs });
  return { clock, store, rules, put };
}

describe('Rules: options', () => {
  it('lays the service rule, then the instance rule, over the built options, and falls back when they are deleted', async () => {
    const { store, rules, put } = await setup();
    const l = new FakeLimiter({ rate: 10, burst: 20 });
    rules.bind('token-limiter', 'api', l);
    await put('orders/token-limiter/api', { set: { rate: 5 } });
    assert.deepEqual(l.runs, { rate: 5, burst: 20 });
    await put('orders@i-1/token-limiter/api', { set: { rate: 4, burst: 7 } }); // the instance's rate over the service's
    assert.deepEqual(l.runs, { rate: 4, burst: 7 });
    await put('orders@i-2/token-limiter/api', { set: { burst: 99 } }); // another instance's
    await put('payments/token-limiter/api', { set: { rate: 99 } }); // another service's
    assert.deepEqual(l.runs, { rate: 4, burst: 7 });
    await store.remove('orders@i-1/token-limiter/api');
    assert.deepEqual(l.runs, { rate: 5, burst: 20 });
    await store.remove('orders/token-limiter/api');
    assert.deepEqual(l.runs, { rate: 10, burst: 20 });
    assert.equal(rules.status()[0]!.revision, store.revision);
  });

  it('replaces a rule by its new version (not laid over the old one)', async () => {
    const { rules, put } = await setup();
    const l = new FakeLimiter({ rate: 10, burst: 20 });
    rules.bind('token-limiter', 'api', l);
    await put('orders/token-limiter/api', { set: { rate: 5, burst: 6 } });
    await put('orders/token-limiter/api', { set: { rate: 4 } });
    assert.deepEqual(l.runs, { rate: 4, burst: 20 });
  });

  it('refuses an invalid rule with the component’s own message and keeps the last good settings', async () => {
    const { store, rules, put } = await setup();
    const seen: RulesRefusedMessage[] = [];
    const listener = (m: unknown) => seen.push(m as RulesRefusedMessage);
    subscribe(diagnosticsChannels.rulesRefused, listener);
    try {
      const l = new FakeLimiter({ rate: 10 });
      rules.bind('token-limiter', 'api', l);
      await put('orders/token-limiter/api', { set: { rate: 5 } });
      const bad = await put('orders/token-limiter/api', { set: { rate: -1 } });
      assert.deepEqual(l.runs, { rate: 5 });
      let expected = '';
      try {
        new TokenLimiter({ rate: -1 });
      } catch (err) {
        expected = (err as Error).message;
      }
      const [status] = rules.status();
      assert.deepEqual(status!.refused, [{ key: 'orders/token-limiter/api', revision: bad, field: 'rate', message: expected, code: 'ERR_RULE_REFUSED' }]);
      assert.equal(seen.length, 1);
      assert.equal(seen[0]!.message, expected);
      assert.equal(rules.stats().refused, 1);
      // bad JSON and an unknown key: refused too, still on the last good
      await store.put('orders/token-limiter/api', '{"set": {');
      assert.equal(rules.status()[0]!.refused[0]!.code, 'ERR_RULE_INVALID');
      await put('orders/token-limiter/api', { set: { rat: 5 } });
      assert.match(rules.status()[0]!.refused[0]!.message, /rat is not an option/);
      assert.equal(rules.status()[0]!.refused[0]!.field, 'rat');
      assert.deepEqual(l.runs, { rate: 5 });
      // a good version clears the refusal
      await put('orders/token-limiter/api', { set: { rate: 3 } });
      assert.deepEqual(l.runs, { rate: 3 });
      assert.deepEqual(rules.status()[0]!.refused, []);
    } finally {
      unsubscribe(diagnosticsChannels.rulesRefused, listener);
    }
  });

  it('refuses a document over 64 KiB', async () => {
    const { rules, put } = await setup();
    const l = new FakeLimiter({ rate: 10 });
    rules.bind('token-limiter', 'api', l);
    await put('orders/token-limiter/api', { set: { rate: 5 }, pad: 'x'.repeat(70_000) });
    assert.match(rules.status()[0]!.refused[0]!.message, /at most 65536 bytes/);
    assert.deepEqual(l.runs, { rate: 10 });
  });

  it('applies all keys of one revision together, and one at a time when their combination is refused', async () => {
    const { store, rules } = await setup();
    const l = new FakeLimiter({ rate: 10, burst: 20 });
    rules.bind('token-limiter', 'api', l);
    await store.apply({ 'orders/token-limiter/api': '{"set":{"rate":5}}', 'orders@i-1/token-limiter/api': '{"set":{"burst":7}}' });
    assert.deepEqual(l.runs, { rate: 5, burst: 7 });
    assert.equal(l.changes, 1, 'one reconfigure for the revision');
    await store.apply({ 'orders/token-limiter/api': '{"set":{"rate":6}}', 'orders@i-1/token-limiter/api': '{"set":{"burst":-3}}' });
    assert.deepEqual(l.runs, { rate: 6, burst: 7 });
    assert.deepEqual(
      rules.status()[0]!.refused.map((r) => r.key),
      ['orders@i-1/token-limiter/api'],
    );
  });

  it('after a restart runs the built options plus every valid rule, and reports the refused ones', async () => {
    const clock = new ManualClock();
    const store = new MemoryRuleStore({ clock });
    await store.put('orders/token-limiter/api', '{"set":{"rate":5}}');
    await store.put('orders@i-1/token-limiter/api', '{"set":{"burst":0.5}}');
    const rules = new Rules({ store, service: 'orders', instance: 'i-1', clock });
    const l = new FakeLimiter({ rate: 10, burst: 20 });
    rules.bind('token-limiter', 'api', l);
    await rules.start();
    assert.deepEqual(l.runs, { rate: 5, burst: 20 });
    assert.deepEqual(
      rules.status()[0]!.refused.map((r) => [r.key, r.field]),
      [['orders@i-1/token-limiter/api', 'burst']],
    );
  });

  it('applies rules to a component bound after they were written', async () => {
    const { rules, put } = await setup();
    await put('orders/token-limiter/api', { set: { rate: 5 } });
    const l = new FakeLimiter({ rate: 10 });
    rules.bind('token-limiter', 'api', l);
    assert.deepEqual(l.runs, { rate: 5 });
  });

  it('learns its scopes from identify() (an announced instance)', async () => {
    const clock = new ManualClock();
    const store = new MemoryRuleStore({ clock });
    await store.put('orders@i-9/token-limiter/api', '{"set":{"rate":2}}');
    const rules = new Rules({ store, clock });
    await rules.start();
    const l = new FakeLimiter({ rate: 10 });
    rules.bind('token-limiter', 'api', l);
    assert.deepEqual(l.runs, { rate: 10 });
    rules.identify({ name: 'orders', id: 'i-9' });
    assert.deepEqual(l.runs, { rate: 2 });
  });

  it('drops the rules of the instance it was when identify() names another', async () => {
    const clock = new ManualClock();
    const store = new MemoryRuleStore({ clock });
    await store.put('orders@i-8/token-limiter/api', '{"set":{"rate":2}}');
    await store.put('orders@i-9/token-limiter/api', '{"set":{"burst":3}}');
    const rules = new Rules({ store, service: 'orders', instance: 'i-8', clock });
    await rules.start();
    const l = new FakeLimiter({ rate: 10, burst: 10 });
    rules.bind('token-limiter', 'api', l);
    assert.deepEqual(l.runs, { rate: 2, burst: 10 });
    rules.identify({ name: 'orders', id: 'i-9' });
    assert.deepEqual(l.runs, { rate: 10, burst: 3 });
    assert.deepEqual(rules.status()[0]!.rules, ['orders@i-9/token-limiter/api']);
  });

  it('on a resync (compaction) replaces its view: a rule deleted meanwhile falls back, one changed applies', async () => {
    const clock = new ManualClock();
    const inner = new MemoryRuleStore({ clock });
    let push: ((c: RuleChange) => void) | undefined;
    const store: RuleStore = {
      list: () => inner.list(),
      get: (k) => inner.get(k),
      put: (k, v, o) => inner.put(k, v, o),
      remove: (k, o) => inner.remove(k, o),
      watch: (from, l) => ((push = l), inner.watch(from, l)),
      close: () => inner.close(),
    };
    await inner.put('orders/token-limiter/api', '{"set":{"rate":5}}');
    await inner.put('orders/token-limiter/web', '{"set":{"rate":6}}');
    const rules = new Rules({ store, service: 'orders', clock });
    await rules.start();
    const api = new FakeLimiter({ rate: 10 });
    const web = new FakeLimiter({ rate: 10 });
    rules.bind('token-limiter', 'api', api);
    rules.bind('token-limiter', 'web', web);
    assert.deepEqual([api.runs, web.runs], [{ rate: 5 }, { rate: 6 }]);
    push!({ type: 'resync', revision: 50, records: [{ key: 'orders/token-limiter/web', value: '{"set":{"rate":7}}', revision: 49 }] });
    assert.deepEqual([api.runs, web.runs], [{ rate: 10 }, { rate: 7 }]);
    assert.equal(rules.stats().resyncs, 2);
    assert.equal(rules.stats().revision, 50);
    push!({ type: 'changes', revision: 40, changes: [{ key: 'orders/token-limiter/web', value: '{"set":{"rate":1}}', revision: 40 }] });
    assert.deepEqual(web.runs, { rate: 7 }, 'a change older than what was applied is not applied again');
  });

  it('keeps the built options while the store cannot be listed, and catches up when it answers', async () => {
    const clock = new ManualClock();
    const inner = new MemoryRuleStore({ clock });
    await inner.put('orders/token-limiter/api', '{"set":{"rate":5}}');
    let down = true;
    const store: RuleStore = {
      list: (): Promise<RuleListing> => (down ? Promise.reject(new Error('unreachable')) : inner.list()),
      get: (k) => inner.get(k),
      put: (k, v, o) => inner.put(k, v, o),
      remove: (k, o) => inner.remove(k, o),
      watch: (from, l) => inner.watch(from, l),
      close: () => inner.close(),
    };
    const rules = new Rules({ store, service: 'orders', clock });
    const l = new FakeLimiter({ rate: 10 });
    rules.bind('token-limiter', 'api', l);
    void rules.start();
    await clock.advanceAsync(1000);
    assert.deepEqual(l.runs, { rate: 10 });
    assert.ok(rules.stats().storeErrors >= 1);
    down = false;
    await clock.advanceAsync(10_000);
    await rules.ready();
    assert.deepEqual(l.runs, { rate: 5 });
  });
});

describe('Rules: a large listing', () => {
  it('is applied a slice per turn, and a change arriving meanwhile waits its turn: none lost, revisions in order', async () => {
    const clock = new ManualClock();
    const store = new MemoryRuleStore({ clock });
    const N = 100;
    const writes: Record<string, string> = {};
    for (let i = 0; i < N; i++) {
      writes[`orders/token-limiter/api-${i}`] = JSON.stringify({ set: { rate: 100 + i } });
      writes[`orders@i-1/token-limiter/api-${i}`] = JSON.stringify({ set: { burst: 1000 + i } });
    }
    const listed = await store.apply(writes);
    // applySliceMs 0 on a ManualClock: every turn applies the fewest components a turn does (32)
    const rules = new Rules({ store, service: 'orders', instance: 'i-1', clock, applySliceMs: 0 });
    let turn = 0;
    let ticking = true;
    const tick = () => {
      turn++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const turns: number[] = [];
    let written: Promise<number> | undefined;
    const limiters = Array.from({ length: N }, (_, i) => {
      const l = new FakeLimiter({ rate: 1, burst: 1 });
      const reconfigure = l.reconfigure.bind(l);
      l.reconfigure = (partial) => {
        reconfigure(partial);
        turns.push(turn);
        // From inside the listing's first slice: a change of a component already applied and of one not yet.
        if (i === 3 && written === undefined) {
          written = store.apply({ 'orders/token-limiter/api-1': JSON.stringify({ set: { rate: 7 } }), 'orders@i-1/token-limiter/api-90': undefined });
        }
      };
      rules.bind('token-limiter', `api-${i}`, l);
      return l;
    });
    const applied = new Map<string, number[]>();
    const onApplied = (m: unknown) => {
      const a = m as { name: string; revision: number };
      applied.set(a.name, [...(applied.get(a.name) ?? []), a.revision]);
    };
    subscribe(diagnosticsChannels.rulesApplied, onApplied);
    try {
      await rules.start();
      const after = await written!;
      ticking = false;
      assert.equal(after, listed + 1);
      assert.ok(new Set(turns).size >= Math.ceil(N / 32), `applied over ${new Set(turns).size} turns: ${[...new Set(turns)].join(', ')}`);
      for (let i = 0; i < N; i++) {
        const want = i === 1 ? { rate: 7, burst: 1001 } : i === 90 ? { rate: 190, burst: 1 } : { rate: 100 + i, burst: 1000 + i };
        assert.deepEqual(limiters[i]!.runs, want, `api-${i}`);
      }
      assert.deepEqual(applied.get('api-1'), [listed, after]);
      assert.deepEqual(applied.get('api-90'), [listed, after]);
      assert.deepEqual(applied.get('api-50'), [listed]);
      assert.equal(rules.stats().revision, after);
    } finally {
      ticking = false;
      unsubscribe(diagnosticsChannels.rulesApplied, onApplied);
      await rules.close();
    }
  });

  it('refuses an applySliceMs that is not a number ≥ 0', () => {
    assert.throws(() => new Rules({ store: new MemoryRuleStore(), applySliceMs: -1 }), /^RangeError: Rules: applySliceMs/);
  });
});

describe('Rules: breakers', () => {
  it('isolates with the reason until the rule is removed, then resets', async () => {
    const { store, rules, put } = await setup();
    const b = new FakeBreaker({ rate: 1 });
    rules.bind('circuit-breaker', 'payments', b);
    await put('orders/isolate/payments', { reason: 'db melting, INC-42' });
    assert.deepEqual(b.calls, ['isolate:db melting, INC-42']);
    assert.equal(rules.status()[0]!.isolated, 'db melting, INC-42');
    await put('orders@i-1/isolate/payments', { reason: 'this one only' });
    assert.deepEqual(b.calls.at(-1), 'isolate:this one only');
    await store.remove('orders@i-1/isolate/payments');
    assert.deepEqual(b.calls.at(-1), 'isolate:db melting, INC-42');
    await store.remove('orders/isolate/payments');
    assert.deepEqual(b.calls.at(-1), 'reset');
    assert.equal(rules.status()[0]!.isolated, undefined);
  });

  it('resets once per revision a reset rule is written at, and an isolate outlasts it', async () => {
    const { store, rules, put } = await setup();
    await put('orders/reset/payments', {}); // written before the breaker existed: not acted on
    const b = new FakeBreaker({ rate: 1 });
    rules.bind('circuit-breaker', 'payments', b);
    assert.deepEqual(b.calls, []);
    await put('orders/reset/payments', {});
    assert.deepEqual(b.calls, ['reset']);
    await put('orders/token-limiter/other', { set: { rate: 2 } }); // other changes do not repeat it
    assert.deepEqual(b.calls, ['reset']);
    await put('orders/isolate/payments', { reason: 'hold' });
    await put('orders/reset/payments', {});
    assert.deepEqual(b.calls, ['reset', 'isolate:hold', 'reset', 'isolate:hold']);
    await store.remove('orders/reset/payments');
    assert.equal(b.calls.length, 4);
  });

  it('does not act on a reset rule it meets when identify() names its scope (written before, as at bind)', async () => {
    const { rules, put } = await setup();
    await put('orders@i-9/reset/payments', {});
    const b = new FakeBreaker({ rate: 1 });
    rules.bind('circuit-breaker', 'payments', b);
    rules.identify({ name: 'orders', id: 'i-9' });
    assert.deepEqual(b.calls, []);
    await put('orders@i-9/reset/payments', {});
    assert.deepEqual(b.calls, ['reset']);
  });

  it('binds the breakers a group makes lazily (a client’s <service>/<instance> breakers)', async () => {
    const { rules, put } = await setup();
    await put('orders/isolate/payments/10.0.0.1:80', { reason: 'bad host' });
    const group = new BreakerGroup<CircuitBreaker>({ factory: rules.breakerFactory('circuit-breaker', (name) => new CircuitBreaker({ name })) });
    const made = group.get('payments/10.0.0.1:80')!;
    assert.equal(made.state, 'open');
    assert.equal(made.isolated, true);
    const other = group.get('payments/10.0.0.2:80')!;
    assert.equal(other.state, 'closed');
    assert.equal(rules.stats().bindings, 2);
  });
});

describe('Rules: weights and faults', () => {
  it('sets weight overrides (instance rule over service rule), refuses what the balancer refuses, drops them when deleted', async () => {
    const { store, rules, put } = await setup();
    const c = new FakeClient();
    rules.bind('client', 'payments', c);
    await put('orders/weights/payments', { weights: { a: 95, b: 5 } });
    assert.deepEqual(c.weights.get('payments'), { a: 95, b: 5 });
    await put('orders@i-1/weights/payments', { weights: { b: 0 } });
    assert.deepEqual(c.weights.get('payments'), { a: 95, b: 0 });
    await put('orders@i-1/weights/payments', { weights: { a: 0, b: 0 } });
    assert.deepEqual(c.weights.get('payments'), { a: 95, b: 0 });
    assert.match(rules.status()[0]!.refused[0]!.message, /leave one instance above 0/);
    await put('orders/weights/payments', { weights: { a: -1 } });
    assert.equal(rules.status()[0]!.refused.find((r) => r.key === 'orders/weights/payments')!.field, 'weights.a');
    await store.remove('orders@i-1/weights/payments');
    await store.remove('orders/weights/payments');
    assert.equal(c.weights.get('payments'), undefined);
    assert.ok(c.weights.has('payments'));
  });

  it('injects a fault until its life ends on the store’s clock, and refuses one without a life', async () => {
    const { clock, store, rules, put } = await setup();
    const c = new FakeClient();
    rules.bind('client', 'payments', c);
    await put('orders/fault/payments', { fault: { delay: { ms: 200, percent: 50 } } });
    assert.equal(c.faults.get('payments'), undefined);
    assert.equal(rules.status()[0]!.refused[0]!.field, 'ttlMs');
    await store.remove('orders/fault/payments');
    await put('orders/fault/payments', { fault: { delay: { ms: 200, percent: 50 } }, ttlMs: 60_000 }, 60_000);
    assert.deepEqual(c.faults.get('payments'), { delay: { ms: 200, percent: 50 } });
    clock.advance(59_999);
    assert.ok(c.faults.get('payments') !== undefined);
    clock.advance(1);
    assert.equal(c.faults.get('payments'), undefined);
  });
});

describe('Rules: a ResilientClient', () => {
  it('bound as client under a service name: its rules set that service’s live options, deleting them returns to the built ones', async () => {
    const { store, rules, put, clock } = await setup();
    const client = new ResilientClient({ registry: new MemoryRegistry(), clock, timeoutMs: 1_000 });
    try {
      const built = client.serviceOptions('payments');
      rules.bind('client', 'payments', client);
      await put('orders/client/payments', { set: { timeoutMs: 250, bulkhead: { maxConcurrent: 4 } } });
      assert.equal(client.serviceOptions('payments').timeoutMs, 250);
      assert.equal(client.serviceOptions('payments').bulkhead.maxConcurrent, 4);
      assert.equal(client.serviceOptions('other').timeoutMs, 1_000, 'only the named service');
      await put('orders@i-1/client/payments', { set: { timeoutMs: 100 } });
      assert.equal(client.serviceOptions('payments').timeoutMs, 100);
      await put('orders/client/payments', { set: { registry: 'x' } });
      assert.match(rules.status()[0]!.refused[0]!.message, /registry cannot change on a running client/);
      assert.equal(client.serviceOptions('payments').timeoutMs, 100, 'the last good settings');
      await store.remove('orders@i-1/client/payments');
      await store.remove('orders/client/payments');
      assert.equal(client.serviceOptions('payments').timeoutMs, 1_000);
      assert.deepEqual(client.serviceOptions('payments'), built);
    } finally {
      await client.close();
    }
  });

  it('checks a client rule offline as a running client does: live options only, with its message', async () => {
    await checkRule(JSON.stringify({ scope: 'orders', kind: 'client', name: 'payments', set: { maxAttempts: 2 } }));
    await assert.rejects(
      checkRule(JSON.stringify({ scope: 'orders', kind: 'client', name: 'payments', set: { maxServices: 3 } })),
      /maxServices cannot change on a running client/,
    );
    await assert.rejects(
      checkRule(JSON.stringify({ scope: 'orders', kind: 'client', name: 'payments', set: { timeoutMs: -1 } })),
      /ResilientClient: timeoutMs/,
    );
  });
});

describe('Rules: an HttpGuard', () => {
  it('takes the fault rules of its route’s name, as setFault(fault), and no other', async () => {
    const { rules, put } = await setup();
    const faults: (Record<string, unknown> | undefined)[] = [];
    const guard = { setFault: (fault: Record<string, unknown> | undefined) => void faults.push(fault) };
    rules.bind('http-guard', 'checkout', guard);
    await put('orders/fault/payments', { fault: { abort: { percent: 10 } }, ttlMs: 60_000 }, 60_000);
    assert.deepEqual(faults, []);
    await put('orders/fault/checkout', { fault: { abort: { percent: 10, status: 503 } }, ttlMs: 60_000 }, 60_000);
    assert.deepEqual(faults, [{ abort: { percent: 10, status: 503 } }]);
  });
});

describe('Rules: reporting', () => {
  it('describes its metrics from stats() and puts every component’s status in its snapshot', async () => {
    const { rules, put } = await setup();
    const l = new FakeLimiter({ rate: 10 });
    rules.bind('token-limiter', 'api', l);
    await put('orders/token-limiter/api', { set: { rate: 5 } });
    await put('orders/token-limiter/api', { set: { rate: -5 } });
    const d = rules.describeMetrics({ instanceLabel: undefined, name: () => 'rules' });
    const got: Record<string, number> = {};
    d.collect!(Object.assign((family: string, _labels: object, value: number) => void (got[family] = value)));
    assert.deepEqual(got, {
      rules_revision: 2,
      rules_bindings: 1,
      rules_refused: 1,
      rules_applied_total: 1,
      rules_refused_total: 1,
      rules_resyncs_total: 1,
      rules_store_errors_total: 0,
    });
    assert.deepEqual(d.families.map((f) => f.name).sort(), Object.keys(got).sort());
    const snap = d.snapshot!() as { components: Array<{ name: string; revision: number; refused: unknown[] }> };
    assert.deepEqual(
      snap.components.map((c) => [c.name, c.revision, c.refused.length]),
      [['api', 1, 1]],
    );
    await rules.close();
    assert.equal(d.closed!(), true);
  });
});

describe('Rules: bounds', () => {
  it('releases the binding of a closed component when it answers ClosedError', async () => {
    const { rules, put } = await setup();
    const l = new FakeLimiter({ rate: 10 });
    rules.bind('token-limiter', 'api', l);
    l.closed = true;
    await put('orders/token-limiter/api', { set: { rate: 5 } });
    assert.equal(rules.stats().bindings, 0);
  });

  it('leaves the heap flat over 10 000 bind/close cycles', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const { rules, put } = await setup();
    await put('orders/circuit-breaker/b', { set: {} });
    const cycle = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const b = new CircuitBreaker({ name: 'b' });
        const unbind = rules.bind('circuit-breaker', 'b', new FakeBreaker({ rate: 1 }));
        if (i % 2 === 0) unbind();
        await b.close();
      }
    };
    await cycle(2_000);
    for (let i = 0; i < 5; i++) {
      gc();
      await new Promise((r) => setImmediate(r));
    }
    const before = process.memoryUsage().heapUsed;
    await cycle(10_000);
    for (let i = 0; i < 5; i++) {
      gc();
      await new Promise((r) => setImmediate(r));
    }
    const after = process.memoryUsage().heapUsed;
    assert.ok(rules.stats().bindings <= 10, `bindings released, ${rules.stats().bindings} left`);
    assert.ok(after - before < 1_000_000, `heap grew ${after - before} bytes over 10 000 cycles`);
  });
});
