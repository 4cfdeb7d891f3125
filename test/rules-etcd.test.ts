/**
 * EtcdRuleStore and the Rules binder against a real etcd (single member): records and revisions,
 * compare-and-swap, a watch that delivers in revision order with the keys of one transaction together,
 * a compacted revision → resync, etcd killed and restarted → the binder keeps what it runs and catches
 * up, a fault rule on a lease that etcd ends, history and reads at past revisions, and a rule written
 * straight into etcd that the component refuses (kept on its last good settings, reported).
 * Tests that kill or compact etcd get an etcd of their own.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Etcd3 } from 'etcd3';
import { ClosedError, RuleConflictError } from '../src/core/errors.js';
import { TokenLimiter, type TokenLimiterOptions } from '../src/limit/token-limiter.js';
import { EtcdRuleStore } from '../src/rules/etcd-rule-store.js';
import { Rules } from '../src/rules/rules.js';
import type { RuleChange } from '../src/rules/types.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { skipReason, waitFor } from './support/servers.js';

const skip = skipReason(etcdBinary, 'etcd');
let etcd: EtcdServer;
let raw: Etcd3;
let n = 0;
const prefix = () => `/bulwark-rules-test/${process.pid}-${++n}/`;
const open: Array<{ close(): Promise<void> }> = [];
// Generous deadlines: a loaded machine's etcd can take seconds to answer right after it starts.
const store = (p: string, endpoint = etcd.endpoint, dialTimeoutMs = 15_000) => {
  const s = new EtcdRuleStore({ hosts: endpoint, prefix: p, dialTimeoutMs, attemptTimeoutMs: 5_000 });
  open.push(s);
  return s;
};

/** FakeLimiter keeps the Reconfigurable contract over TokenLimiter's own validation (the binder is what is tested). */
class FakeLimiter {
  runs: Partial<TokenLimiterOptions>;
  applied = 0;
  constructor(options: Partial<TokenLimiterOptions>) {
    this.runs = { ...options };
  }
  reconfigure(partial: Partial<TokenLimiterOptions>): void {
    const next = { ...this.runs, ...partial };
    new TokenLimiter(next as TokenLimiterOptions);
    this.runs = next;
    this.applied++;
  }
  options(): Partial<TokenLimiterOptions> {
    return { ...this.runs };
  }
}

describe('EtcdRuleStore on a real etcd', { skip }, () => {
  before(async () => {
    etcd = await startEtcd();
    raw = new Etcd3({ hosts: etcd.endpoint });
  });
  after(async () => {
    await Promise.all(open.map((o) => o.close().catch(() => undefined)));
    raw?.close();
    await etcd?.stop();
  });

  it('writes, reads and lists rules with etcd revisions, and compare-and-swaps on them', async () => {
    const p = prefix();
    const s = store(p);
    const r1 = await s.put('orders/token-limiter/api', '{"set":{"rate":5}}');
    const got = await s.get('orders/token-limiter/api');
    assert.deepEqual(got, { key: 'orders/token-limiter/api', value: '{"set":{"rate":5}}', revision: r1 });
    assert.equal(await raw.get(`${p}orders/token-limiter/api`).string(), '{"set":{"rate":5}}');
    await assert.rejects(
      s.put('orders/token-limiter/api', '{"set":{"rate":6}}', { ifRevision: r1 - 1 }),
      (err: unknown) => err instanceof RuleConflictError && err.revision === r1,
    );
    await assert.rejects(s.put('orders/token-limiter/api', 'x', { ifRevision: 0 }), RuleConflictError);
    const r2 = await s.put('orders/token-limiter/api', '{"set":{"rate":6}}', { ifRevision: r1 });
    assert.ok(r2 > r1);
    const r3 = await s.put('orders/isolate/payments', '{}', { ifRevision: 0 });
    const listing = await s.list();
    assert.deepEqual(
      listing.records.map((r) => [r.key, r.revision]),
      [
        ['orders/isolate/payments', r3],
        ['orders/token-limiter/api', r2],
      ],
    );
    assert.ok(listing.revision >= r3);
    await assert.rejects(s.remove('orders/isolate/payments', { ifRevision: r2 }), RuleConflictError);
    await s.remove('orders/isolate/payments', { ifRevision: r3 });
    assert.equal(await s.get('orders/isolate/payments'), undefined);
    const history = await s.history('orders/token-limiter/api');
    assert.deepEqual(
      history.map((h) => [h.revision, h.value]),
      [
        [r1, '{"set":{"rate":5}}'],
        [r2, '{"set":{"rate":6}}'],
      ],
    );
    assert.equal(await s.at('orders/token-limiter/api', r1), '{"set":{"rate":5}}');
  });

  it('watches in revision order, the keys of one transaction in one change, nothing repeated', async () => {
    const p = prefix();
    const s = store(p);
    const from = await s.put('orders/timeout/t', '{"set":{"timeoutMs":100}}');
    const seen: RuleChange[] = [];
    const w = s.watch(from, (c) => seen.push(c));
    await raw
      .if(`${p}x`, 'Create', '==', 0)
      .then(raw.put(`${p}orders/timeout/a`).value('{"set":{}}'), raw.put(`${p}orders/timeout/b`).value('{"set":{}}'))
      .commit();
    await s.remove('orders/timeout/t');
    await s.put('orders/timeout/a', '{"set":{"timeoutMs":5}}');
    await waitFor('three changes', () => seen.length >= 3);
    await w.close();
    assert.deepEqual(
      seen.map((c) => (c.type === 'changes' ? c.changes.map((x) => `${x.key}=${x.value ?? '∅'}`) : 'resync')),
      [['orders/timeout/a={"set":{}}', 'orders/timeout/b={"set":{}}'], ['orders/timeout/t=∅'], ['orders/timeout/a={"set":{"timeoutMs":5}}']],
    );
    const revisions = seen.map((c) => c.revision);
    assert.deepEqual(
      revisions,
      [...revisions].sort((a, b) => a - b),
    );
  });

  it('resyncs a watch whose revision was compacted', async () => {
    const own = await startEtcd();
    const c = new Etcd3({ hosts: own.endpoint });
    try {
      const p = prefix();
      const s = store(p, own.endpoint);
      const first = await s.put('orders/retry/r', '{"set":{"maxAttempts":2}}');
      await s.put('orders/retry/q', '{"set":{"maxAttempts":3}}');
      await s.remove('orders/retry/r');
      const head = await c.get('anything').exec();
      await c.kv.compact({ revision: head.header.revision, physical: true });
      const seen: RuleChange[] = [];
      const w = s.watch(first - 1, (ch) => seen.push(ch));
      await waitFor('a resync', () => seen.length >= 1);
      assert.equal(seen[0]!.type, 'resync');
      assert.deepEqual(seen[0]!.type === 'resync' ? seen[0].records.map((r) => r.key) : [], ['orders/retry/q']);
      await s.put('orders/retry/z', '{"set":{}}');
      await waitFor('the change after it', () => seen.length >= 2);
      assert.equal(seen[1]!.type, 'changes');
      assert.equal(s.stats().resyncs, 1);
      await w.close();
    } finally {
      c.close();
      await own.stop();
    }
  });

  it('keeps what runs while etcd is down, and catches up from where it was when etcd is back', async () => {
    const own = await startEtcd();
    try {
      const p = prefix();
      const s = store(p, own.endpoint);
      await s.put('orders/token-limiter/api', '{"set":{"rate":5}}');
      const rules = new Rules({ store: s, service: 'orders', instance: 'i-1' });
      open.push(rules);
      const l = new FakeLimiter({ rate: 10 });
      rules.bind('token-limiter', 'api', l);
      await rules.start();
      assert.deepEqual(l.runs, { rate: 5 });
      await own.kill();
      await assert.rejects(store(p, own.endpoint, 1_500).put('orders/token-limiter/api', '{"set":{"rate":1}}'));
      assert.deepEqual(l.runs, { rate: 5 });
      await own.restart();
      const writer = store(p, own.endpoint);
      await waitFor(
        'etcd to take writes again',
        () =>
          writer.put('orders@i-1/token-limiter/api', '{"set":{"rate":7}}').then(
            () => true,
            () => false,
          ),
        15_000,
      );
      await waitFor('the instance rule after the restart', () => l.runs.rate === 7, 15_000);
      assert.equal(rules.stats().resyncs, 1, 'resumed from its revision: no resync');
      assert.equal(l.applied, 2);
    } finally {
      await own.stop();
    }
  });

  it('puts a fault rule on a lease that etcd ends, and the binder ends the fault', async () => {
    const p = prefix();
    const s = store(p);
    const rules = new Rules({ store: s, service: 'orders' });
    open.push(rules);
    const faults: Array<Record<string, unknown> | undefined> = [];
    rules.bind('http-guard', 'payments', { setFault: (f: Record<string, unknown> | undefined) => void faults.push(f) });
    await rules.start();
    const started = Date.now();
    await s.put('orders/fault/payments', '{"fault":{"delay":{"ms":200,"percent":50}},"ttlMs":2000}', { ttlMs: 2000 });
    await waitFor('the fault', () => faults.length === 1);
    assert.deepEqual(faults[0], { delay: { ms: 200, percent: 50 } });
    assert.equal((await s.get('orders/fault/payments'))?.leased, true);
    await waitFor('the lease to end', () => faults.length === 2, 10_000);
    assert.equal(faults[1], undefined);
    assert.ok(Date.now() - started >= 1900, `ended after ${Date.now() - started} ms`);
  });

  it('refuses a rule written straight into etcd that the component refuses, and keeps its last good settings', async () => {
    const p = prefix();
    const s = store(p);
    const rules = new Rules({ store: s, service: 'orders' });
    open.push(rules);
    const l = new FakeLimiter({ rate: 10 });
    rules.bind('token-limiter', 'api', l);
    await rules.start();
    await raw.put(`${p}orders/token-limiter/api`).value('{"set":{"rate":5}}');
    await waitFor('the good rule', () => l.runs.rate === 5);
    const bad = await raw.put(`${p}orders/token-limiter/api`).value('{"set":{"rate":-2}}');
    await waitFor('the refusal', () => rules.stats().refused === 1);
    const [status] = rules.status();
    assert.equal(status!.refused[0]!.revision, Number(bad.header.revision));
    assert.equal(status!.refused[0]!.field, 'rate');
    assert.throws(() => new TokenLimiter({ rate: -2 }), { message: status!.refused[0]!.message });
    assert.deepEqual(l.runs, { rate: 5 });
  });

  it('rejects calls after close()', async () => {
    const s = store(prefix());
    await s.close();
    await assert.rejects(async () => s.list(), ClosedError);
  });
});
