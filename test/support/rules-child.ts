/**
 * A process of a fleet bound to rules, for test/rules-fleet.test.ts:
 *   node --import <loader> test/support/rules-child.ts <etcd endpoints, comma-separated> <prefix> <instance id>
 * It binds a TokenLimiter (`token-limiter/api`, when the limiter has reconfigure) and a CircuitBreaker
 * (`circuit-breaker/payments`) of service `orders` to an EtcdRuleStore, prints `ready` once the first
 * listing is applied, then one JSON line per change the binder applies or refuses, with this process's
 * wall time and what the components run then. It ends at SIGTERM.
 *
 * With a fifth argument, `<stable address>,<canary address>` (two real HTTP instances of service `shop`,
 * each answering its id), it also holds a ResilientClient (P2C, the default) over them, bound as
 * `client/shop` (its weights and faults), and reads commands on stdin: `calls <n> <concurrency>` makes
 * n calls to shop and prints one line `{ ev: 'calls', … }`: the calls per instance (the id each
 * answered), the delayed ones and what the delay added (the time from the call to its attempt's
 * request: a fault delays the attempt before it runs; an undelayed attempt starts within the same turn),
 * and the event loop's delay p99 meanwhile.
 */
import { subscribe } from 'node:diagnostics_channel';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { ResilientClient } from '../../src/client/resilient-client.js';
import { MemoryRegistry } from '../../src/registry/memory-registry.js';
import { CircuitBreaker } from '../../src/breaker/circuit-breaker.js';
import { diagnosticsChannels, type RulesAppliedMessage, type RulesRefusedMessage } from '../../src/core/diagnostics.js';
import { TokenLimiter } from '../../src/limit/token-limiter.js';
import { EtcdRuleStore } from '../../src/rules/etcd-rule-store.js';
import { Rules, type RuleTarget } from '../../src/rules/rules.js';

const [hosts, prefix, instance, shop] = process.argv.slice(2);
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

const registry = new MemoryRegistry();
const client = shop === undefined ? undefined : new ResilientClient({ registry });
if (client !== undefined) {
  const [stable, canary] = shop!.split(',');
  await registry.register({ id: 'stable', name: 'shop', address: stable! });
  await registry.register({ id: 'canary', name: 'shop', address: canary! });
  rules.bind('client', 'shop', client as unknown as RuleTarget);
}

/** An attempt that starts this long after its call was delayed by a fault (an undelayed one starts within the call's turn). */
const DELAYED_MS = 50;
/** calls makes n calls to shop, `concurrency` at a time, and prints what they met. */
async function calls(n: number, concurrency: number): Promise<void> {
  const hits: Record<string, number> = {};
  const added: number[] = [];
  let errors = 0;
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  let left = n;
  const worker = async () => {
    while (left-- > 0) {
      const t0 = performance.now();
      try {
        const id = await client!.call('shop', async (instance, signal) => {
          const waited = performance.now() - t0;
          if (waited >= DELAYED_MS) added.push(waited);
          const res = await fetch(`http://${instance.address}/`, { signal });
          const body = await res.text();
          if (body !== instance.id) throw new Error(`${instance.id} answered ${body}`);
          return body;
        });
        hits[id] = (hits[id] ?? 0) + 1;
      } catch {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  lag.disable();
  const p = (xs: number[], q: number) =>
    xs.length === 0 ? undefined : [...xs].sort((a, b) => a - b)[Math.max(0, Math.min(xs.length - 1, Math.ceil(q * xs.length) - 1))];
  console.log(
    JSON.stringify({
      ev: 'calls',
      n,
      hits,
      errors,
      delayed: added.length,
      addedMin: p(added, 0),
      addedP10: p(added, 0.1),
      addedP50: p(added, 0.5),
      addedMax: p(added, 1),
      lagP99: lag.percentile(99) / 1e6,
      at: Date.now(),
    }),
  );
}

await rules.start();
if (client !== undefined) {
  createInterface({ input: process.stdin }).on('line', (line) => {
    const [cmd, n, c] = line.split(' ');
    if (cmd === 'calls') void calls(Number(n), Number(c));
  });
}
console.log('ready');
process.once('SIGTERM', () => {
  void rules
    .close()
    .then(() => store.close())
    .then(() => client?.close())
    .then(() => registry.close())
    .then(() => process.exit(0));
});
