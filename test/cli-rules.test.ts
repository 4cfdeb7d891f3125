/**
 * `bulwark rules` (the built CLI) against a real etcd: set (validated offline first), ls, get, rm,
 * history and rollback with etcd's revisions, --if-revision conflicts (exit 3), check, bad flags (exit 2),
 * and a refused rule: one line naming the rule and the field, exit 2, nothing written — the same
 * message a running process reports for that rule written straight into etcd.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Etcd3 } from 'etcd3';
import { TokenLimiter, type TokenLimiterOptions } from '../src/limit/token-limiter.js';
import { EtcdRuleStore } from '../src/rules/etcd-rule-store.js';
import { Rules } from '../src/rules/rules.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { skipReason, waitFor } from './support/servers.js';
import { spawn } from 'node:child_process';
import { bulwarkArgs, runBulwark } from './serve-harness.js';

const skip = skipReason(etcdBinary, 'etcd');
let etcd: EtcdServer;
let raw: Etcd3;
let dir: string;
let n = 0;
const file = (doc: unknown) => {
  const path = join(dir, `rule-${++n}.json`);
  writeFileSync(path, typeof doc === 'string' ? doc : JSON.stringify(doc));
  return path;
};
const store = () => `etcd://${new URL(etcd.endpoint).host}`;

/** FakeLimiter keeps the Reconfigurable contract over TokenLimiter's own validation. */
class FakeLimiter {
  runs: Partial<TokenLimiterOptions>;
  constructor(options: Partial<TokenLimiterOptions>) {
    this.runs = { ...options };
  }
  reconfigure(partial: Partial<TokenLimiterOptions>): void {
    const next = { ...this.runs, ...partial };
    new TokenLimiter(next as TokenLimiterOptions);
    this.runs = next;
  }
  options(): Partial<TokenLimiterOptions> {
    return { ...this.runs };
  }
}

describe('bulwark rules', () => {
  it('refuses bad flags and a bad rule offline with one line, exit 2', async () => {
    dir ??= mkdtempSync(join(tmpdir(), 'bulwark-rules-'));
    const runs = await Promise.all([
      runBulwark(['rules', 'ls']),
      runBulwark(['rules', 'frob']),
      runBulwark(['rules', 'ls', '--store', 'etcd://127.0.0.1:1', '--bogus']),
      runBulwark(['rules', 'rm', '--store', 'etcd://127.0.0.1:1', 'orders/nope/x']),
      runBulwark(['rules', 'check', file({ scope: 'orders', kind: 'bulkhead', name: 'db', set: { maxConcurent: 4 } })]),
      runBulwark(['rules', 'check', file('{"scope":"orders","kind":"bulkhead"')]),
    ]);
    for (const r of runs) {
      assert.equal(r.code, 2, r.stderr);
      assert.equal(r.stderr.trimEnd().split('\n').length, 1, r.stderr);
    }
    assert.match(runs[3]!.stderr, /^bulwark rules: refused orders\/nope\/x \(kind\): unknown kind "nope"/);
    assert.match(
      runs[4]!.stderr,
      /^bulwark rules: refused orders\/bulkhead\/db \(maxConcurent\): Bulkhead: maxConcurent is not an option; the options are maxConcurrent, maxQueued\n$/,
    );
    assert.match(runs[5]!.stderr, /^bulwark rules: refused the rule: not JSON/);
    const ok = await runBulwark(['rules', 'check', file({ scope: 'orders', kind: 'bulkhead', name: 'db', set: { maxConcurrent: 4 } })]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(ok.stdout, 'ok orders/bulkhead/db\n');
  });

  describe('against a real etcd', { skip }, () => {
    before(async () => {
      etcd = await startEtcd();
      raw = new Etcd3({ hosts: etcd.endpoint });
      dir ??= mkdtempSync(join(tmpdir(), 'bulwark-rules-'));
    });
    after(async () => {
      raw?.close();
      await etcd?.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    it('sets, lists, gets, removes, and compare-and-swaps with --if-revision', async () => {
      const set = await runBulwark(['rules', 'set', '--store', store(), file({ scope: 'orders', kind: 'token-limiter', name: 'api', set: { rate: 50 } })]);
      assert.equal(set.code, 0, set.stderr);
      const revision = Number(/at revision (\d+)/.exec(set.stdout)![1]);
      assert.equal(
        await raw.get('/bulwark/rules/orders/token-limiter/api').string(),
        '{"scope":"orders","kind":"token-limiter","name":"api","set":{"rate":50}}',
      );
      const ls = await runBulwark(['rules', 'ls', '--store', store(), '--json']);
      assert.equal(ls.code, 0, ls.stderr);
      assert.deepEqual(JSON.parse(ls.stdout).rules, [
        { key: 'orders/token-limiter/api', revision, leased: false, rule: { scope: 'orders', kind: 'token-limiter', name: 'api', set: { rate: 50 } } },
      ]);
      const table = await runBulwark(['rules', 'ls', '--store', store()]);
      assert.match(table.stdout, /^KEY +REVISION +LEASE +RULE\norders\/token-limiter\/api +\d+ +- +\{/);
      const conflict = await runBulwark([
        'rules',
        'set',
        '--store',
        store(),
        '--if-revision',
        String(revision - 1),
        file({ scope: 'orders', kind: 'token-limiter', name: 'api', set: { rate: 60 } }),
      ]);
      assert.equal(conflict.code, 3, conflict.stderr);
      assert.match(conflict.stderr, new RegExp(`^bulwark rules: conflict: rule orders/token-limiter/api is at revision ${revision}, not ${revision - 1}\\n$`));
      const swapped = await runBulwark([
        'rules',
        'set',
        '--store',
        store(),
        '--if-revision',
        String(revision),
        file({ scope: 'orders', kind: 'token-limiter', name: 'api', set: { rate: 60 } }),
      ]);
      assert.equal(swapped.code, 0, swapped.stderr);
      const history = await runBulwark(['rules', 'history', '--store', store(), 'orders/token-limiter/api', '--json']);
      const versions = JSON.parse(history.stdout) as Array<{ revision: number; value: string }>;
      assert.deepEqual(
        versions.map((v) => JSON.parse(v.value).set.rate),
        [50, 60],
      );
      const back = await runBulwark(['rules', 'rollback', '--store', store(), 'orders/token-limiter/api', '--to-revision', String(revision)]);
      assert.equal(back.code, 0, back.stderr);
      assert.equal(JSON.parse((await raw.get('/bulwark/rules/orders/token-limiter/api').string())!).set.rate, 50);
      const got = await runBulwark(['rules', 'get', '--store', store(), 'orders/token-limiter/api']);
      assert.match(got.stdout, /"rate":50/);
      const rm = await runBulwark(['rules', 'rm', '--store', store(), 'orders/token-limiter/api']);
      assert.equal(rm.code, 0, rm.stderr);
      assert.equal(await raw.get('/bulwark/rules/orders/token-limiter/api').string(), null);
    });

    it('watches: the current rules, then one line per change, until SIGTERM (exit 0)', async () => {
      await raw.put('/bulwark/rules/shipping/timeout/t').value('{"set":{"timeoutMs":100}}');
      const child = spawn(process.execPath, bulwarkArgs(['rules', 'watch', '--store', store(), '--prefix', '/bulwark/rules/shipping/']), {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      try {
        await waitFor('the listing', () => out.includes('put timeout/t'));
        const put = await raw.put('/bulwark/rules/shipping/timeout/t').value('{"set":{"timeoutMs":50}}');
        await raw.delete().key('/bulwark/rules/shipping/timeout/t');
        await waitFor('the two changes', () => out.includes('delete timeout/t'));
        const lines = out.trimEnd().split('\n');
        assert.equal(lines.length, 3, out);
        assert.match(lines[0]!, /^\d+ put timeout\/t \{"set":\{"timeoutMs":100\}\}$/);
        assert.equal(lines[1], `${put.header.revision} put timeout/t {"set":{"timeoutMs":50}}`);
        assert.equal(lines[2], `${Number(put.header.revision) + 1} delete timeout/t`);
      } finally {
        child.kill('SIGTERM');
      }
      assert.equal(await exited, 0);
    });

    it('writes a fault rule on a lease of its ttlMs', async () => {
      const set = await runBulwark([
        'rules',
        'set',
        '--store',
        store(),
        file({ scope: 'orders', kind: 'fault', name: 'payments', fault: { delay: { ms: 200, percent: 100 } }, ttlMs: 30_000 }),
      ]);
      assert.equal(set.code, 0, set.stderr);
      assert.match(set.stdout, /\(ends in 30 s\)/);
      const kv = (await raw.get('/bulwark/rules/orders/fault/payments').exec()).kvs[0]!;
      assert.notEqual(String(kv.lease), '0');
      const ttl = await raw.leaseClient.leaseTimeToLive({ ID: kv.lease });
      assert.ok(Number(ttl.TTL) > 20 && Number(ttl.TTL) <= 30, `TTL ${ttl.TTL}`);
    });

    it('refuses an out-of-range rule with the message a running process reports for it, and writes nothing', async () => {
      const s = new EtcdRuleStore({ hosts: etcd.endpoint });
      const rules = new Rules({ store: s, service: 'billing' });
      const l = new FakeLimiter({ rate: 10 });
      rules.bind('token-limiter', 'api', l);
      await rules.start();
      try {
        const doc = { scope: 'billing', kind: 'token-limiter', name: 'api', set: { rate: 0 } };
        await raw.put('/bulwark/rules/billing/token-limiter/api').value(JSON.stringify(doc));
        await waitFor('the refusal in-process', () => rules.stats().refused === 1);
        const inProcess = rules.status()[0]!.refused[0]!;
        assert.deepEqual(l.runs, { rate: 10 });
        await raw.delete().key('/bulwark/rules/billing/token-limiter/api');
        const cli = await runBulwark(['rules', 'set', '--store', store(), file(doc)]);
        assert.equal(cli.code, 2, cli.stderr);
        assert.equal(cli.stderr, `bulwark rules: refused billing/token-limiter/api (${inProcess.field}): ${inProcess.message}\n`);
        assert.equal(await raw.get('/bulwark/rules/billing/token-limiter/api').string(), null);
      } finally {
        await rules.close();
        await s.close();
      }
    });
  });
});
