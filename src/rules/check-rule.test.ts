import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RuleInvalidError } from '../core/errors.js';
import { Bulkhead } from '../policy/bulkhead.js';
import { TokenLimiter } from '../limit/token-limiter.js';
import { checkRule } from './check-rule.js';
import { parseRule, ruleTtlMs } from './parse-rule.js';
import { parseRuleKey } from './rule-key.js';
import type { OptionsRuleKind } from './types.js';

/** messageOf answers the message `build` throws. */
function messageOf(build: () => unknown): string {
  try {
    build();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('did not throw');
}

/** One valid and one invalid `set` per options kind, with the field the invalid one is refused for. */
const KINDS: ReadonlyArray<[OptionsRuleKind, Record<string, unknown>, Record<string, unknown>, string]> = [
  ['token-limiter', { rate: 100, burst: 200 }, { rate: -1 }, 'rate'],
  ['keyed-limiter', { rate: 5, maxKeys: 100 }, { maxKeys: 0 }, 'maxKeys'],
  ['period-limiter', { periodMs: 60_000, quota: 100 }, { quota: 1.5 }, 'quota'],
  ['redis-token-limiter', { rate: 50, burst: 100 }, { rate: 0 }, 'rate'],
  ['redis-period-limiter', { periodMs: 1000, quota: 10 }, { periodMs: -5 }, 'periodMs'],
  ['bulkhead', { maxConcurrent: 4, maxQueued: 8 }, { maxConcurrent: 0 }, 'maxConcurrent'],
  ['adaptive-shedder', { utilizationThreshold: 0.8 }, { utilizationThreshold: 7 }, 'utilizationThreshold'],
  ['circuit-breaker', { failureRate: 0.5, openMs: 5000 }, { openMs: -1 }, 'openMs'],
  ['sre-breaker', { k: 1.5 }, { k: 'x' }, 'k'],
  ['timeout', { timeoutMs: 250 }, { timeoutMs: -1 }, 'timeoutMs'],
  ['retry', { maxAttempts: 2 }, { maxAttempts: 0 }, 'maxAttempts'],
  ['retry-budget', { percentCanRetry: 0.1 }, { windowMs: -1 }, 'windowMs'],
  ['client', { timeoutMs: 500, maxAttempts: 2 }, { maxAttempts: -2 }, 'maxAttempts'],
];

describe('checkRule', () => {
  for (const [kind, good, bad, field] of KINDS) {
    it(`checks a ${kind} rule with the component's own validation`, async () => {
      const rule = await checkRule(JSON.stringify({ scope: 'orders', kind, name: 'x', set: good }));
      assert.equal(rule.kind, kind);
      await assert.rejects(checkRule(JSON.stringify({ scope: 'orders', kind, name: 'x', set: bad })), (err: unknown) => {
        assert.ok(err instanceof RuleInvalidError, String(err));
        assert.equal(err.code, 'ERR_RULE_INVALID');
        assert.equal(err.key, `orders/${kind}/x`);
        assert.equal(err.field, field, err.message);
        return true;
      });
      await assert.rejects(
        checkRule(JSON.stringify({ scope: 'orders', kind, name: 'x', set: { nope: 1 } })),
        (err: unknown) => err instanceof RuleInvalidError && err.field === 'nope' && /nope is not an option/.test(err.message),
      );
    });
  }

  it('gives the constructor’s message word for word', async () => {
    await assert.rejects(checkRule('{"scope":"o","kind":"token-limiter","name":"a","set":{"rate":-1}}'), {
      message: messageOf(() => new TokenLimiter({ rate: -1 })),
    });
    await assert.rejects(checkRule('{"scope":"o","kind":"bulkhead","name":"a","set":{"maxConcurent":4}}'), {
      message: messageOf(() => new Bulkhead({ maxConcurent: 4 } as never)),
    });
  });

  it('refuses documents of the wrong shape, naming the field', () => {
    const cases: Array<[string, string | undefined, RegExp]> = [
      ['not json', undefined, /not JSON/],
      ['[1]', undefined, /a rule is a JSON object, got an array/],
      ['{"scope":"o","kind":"frob","name":"a"}', 'kind', /unknown kind "frob"/],
      ['{"scope":"o/x","kind":"timeout","name":"a","set":{}}', 'scope', /scope must be/],
      ['{"scope":"o@i@j","kind":"timeout","name":"a","set":{}}', 'scope', /scope must be/],
      ['{"scope":"o","kind":"timeout","name":"","set":{}}', 'name', /name must be/],
      ['{"scope":"o","kind":"timeout","name":"a","set":[]}', 'set', /set must be an object/],
      ['{"scope":"o","kind":"timeout","name":"a","set":{},"extra":1}', 'extra', /extra is not a key of a timeout rule/],
      ['{"scope":"o","kind":"isolate","name":"a","reason":5}', 'reason', /reason must be a string/],
      ['{"scope":"o","kind":"reset","name":"a","set":{}}', 'set', /set is not a key of a reset rule/],
      ['{"scope":"o","kind":"weights","name":"pay","weights":{"a":-1}}', 'weights.a', /weights.a must be a finite number ≥ 0/],
      ['{"scope":"o","kind":"fault","name":"pay","fault":{},"ttlMs":86400001}', 'ttlMs', /ttlMs must be an integer in 1000–86400000/],
      [`{"scope":"o","kind":"timeout","name":"a","set":{"x":"${'y'.repeat(70_000)}"}}`, undefined, /at most 65536 bytes/],
    ];
    for (const [text, field, message] of cases) {
      assert.throws(
        () => parseRule(text),
        (err: unknown) => err instanceof RuleInvalidError && err.field === field && message.test(err.message),
        text.slice(0, 80),
      );
    }
  });

  it('reads scope, kind and name from the key when the document leaves them out, and refuses a document naming another key', () => {
    assert.deepEqual(parseRule('{"set":{"rate":1}}', 'orders@i-1/token-limiter/api/v2'), {
      scope: 'orders@i-1',
      kind: 'token-limiter',
      name: 'api/v2',
      set: { rate: 1 },
    });
    assert.throws(() => parseRule('{"scope":"billing","set":{}}', 'orders/timeout/a'), /names billing\/timeout\/a but sits at orders\/timeout\/a/);
    assert.deepEqual(parseRuleKey('orders/isolate/payments/10.0.0.1:80'), { scope: 'orders', kind: 'isolate', name: 'payments/10.0.0.1:80' });
    assert.throws(() => parseRuleKey('orders/isolate'), RuleInvalidError);
  });

  it('gives a fault rule a life of 10 minutes unless it says otherwise, and the others none', () => {
    assert.equal(ruleTtlMs(parseRule('{"scope":"o","kind":"fault","name":"p","fault":{}}')), 600_000);
    assert.equal(ruleTtlMs(parseRule('{"scope":"o","kind":"fault","name":"p","fault":{},"ttlMs":5000}')), 5000);
    assert.equal(ruleTtlMs(parseRule('{"scope":"o","kind":"isolate","name":"p"}')), undefined);
  });
});
