/**
 * A process of a fleet bound to rules, for test/rules-fleet.test.ts:
 *   node --import <loader> test/support/rules-child.ts <etcd endpoints, comma-separated> <prefix> <instance id>
 * It binds a TokenLimiter (`token-limiter/api`, when the limiter has reconfigure) and a CircuitBreaker
 * (`circuit-breaker/payments`) of service `orders` to an EtcdRuleStore, prints `ready` once the first
 * listing is applied, then one JSON line per change the binder applies or refuses, with this process's
 * wall time and what the components run then. It ends at SIGTERM.
 */
import { subscribe } from 'node:diagnostics_channel';
import { CircuitBreaker } from '../../src/breaker/circuit-breaker.js';
import { diagnosticsChannels, type RulesAppliedMessage, type RulesRefusedMessage } from '../../src/core/diagnostics.js';
import { TokenLimiter } from '../../src/limit/token-limiter.js';
import { EtcdRuleStore } from '../../src/rules/etcd-rule-store.js';
import { Rules, type RuleTarget } from '../../src/rules/rules.js';

const [hosts, prefix, instance] = process.argv.slice(2);
const store = new EtcdRuleStore({ hosts: hosts!.split(','), prefix: prefix! });
const rules = new Rules({ store, service: 'orders', instance: instance! });
const limiter = new TokenLimiter({ rate: 100, burst: 100 });
const breaker = new CircuitBreaker({ name: 'payments' });
// Seen through the protocol: the limiter gains reconfigure() with the components' branch.
const limiterTarget = limiter as unknown as RuleTarget;
if (typeof limiterTarget.reconfigure === 'function') rules.bind('token-limiter', 'api', limiterTarget);
rules.bind('circuit-breaker', 'payments', breaker);

const state = () => ({
  rate: (limiterTarget.options?.() as { rate?: number } | undefined)?.rate,
  breaker: breaker.state,
  isolated: rules.status().find((s) => s.name === 'payments')?.isolated,
});
subscribe(diagnosticsChannels.rulesApplied, (m) => {
  const a = m as RulesAppliedMessage;
  console.log(JSON.stringify({ ev: 'applied', name: a.name, revision: a.revision, keys: a.keys, at: Date.now(), ...state() }));
});
subscribe(diagnosticsChannels.rulesRefused, (m) => {
  const r = m as RulesRefusedMessage;
  console.log(
    JSON.stringify({ ev: 'refused', name: r.name, key: r.key, revision: r.revision, field: r.field, message: r.message, at: Date.now(), ...state() }),
  );
});

await rules.start();
console.log('ready');
process.once('SIGTERM', () => {
  void rules
    .close()
    .then(() => store.close())
    .then(() => process.exit(0));
});
