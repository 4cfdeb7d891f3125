/**
 * A process serving its dashboard, for the browser and fleet tests:
 *   node --import <loader> test/support/dashboard-child.ts <port> [<etcd endpoint> <etcd prefix> <service> <id> | controls]
 * It calls a service of two in-process instances (`fast` answers in 2–10 ms, `flaky` fails 30 % of
 * calls) through a ResilientClient, at most 40 calls a second for at most 10 minutes, with a breaker, a
 * limiter, a shedder, a retry budget and a cache group beside it, all tracked by one BulwarkMetrics,
 * and serves the dashboard at /dashboard on 127.0.0.1:<port> (0: any). With etcd, it registers itself
 * there with its dashboard stream's path in the metadata, and runs a Rules binder (service <service>,
 * instance <id>) on the rules under `<etcd prefix>/rules/` in that etcd. With `controls`, the
 * dashboard's controls write to a MemoryRuleStore that a Rules binder of service `checkout` follows,
 * and each change the store delivers is printed (`rule put <key> <value>`, `rule remove <key>`). The
 * binder holds the breaker `origin` (TokenLimiter takes no rules yet: it has no reconfigure), and is tracked: the page shows the
 * rules each runs and any it refused. Prints `ready <port>` once serving.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import promClient from 'prom-client';
import { CircuitBreaker } from '../../src/breaker/index.js';
import { Group } from '../../src/cache/index.js';
import { ResilientClient } from '../../src/client/index.js';
import { dashboardHandler, STATUS_PATH_KEY } from '../../src/dashboard/index.js';
import { AdaptiveShedder, TokenLimiter } from '../../src/limit/index.js';
import { BulwarkMetrics } from '../../src/metrics/index.js';
import { RetryBudget } from '../../src/policy/index.js';
import { EtcdRegistry, MemoryRegistry, RegistryCache } from '../../src/registry/index.js';
import { EtcdRuleStore, MemoryRuleStore, Rules } from '../../src/rules/index.js';

const args = process.argv.slice(2);
const withControls = args[1] === 'controls';
const [portArg, etcdEndpoint, prefix, service, id] = withControls ? args.slice(0, 1) : args;
const MAX_CALLS = 40 * 600;

const reg = new MemoryRegistry();
await reg.register({ id: 'fast', name: 'payments', address: '127.0.0.1:1' });
await reg.register({ id: 'flaky', name: 'payments', address: '127.0.0.1:2' });
const cache = new RegistryCache(reg);
const client = new ResilientClient({ registry: cache });
const breaker = new CircuitBreaker({ name: 'origin', minimumCalls: 5 });
const limiter = new TokenLimiter({ rate: 30, burst: 30 });
const shedder = new AdaptiveShedder();
const budget = new RetryBudget();
const group = new Group({ name: 'profiles', cacheBytes: 1 << 20, getter: (k) => `profile ${k}` });

const metrics = new BulwarkMetrics({ registry: new promClient.Registry() });
for (const c of [client, breaker, shedder, budget, cache, group]) metrics.track(c);
metrics.track(limiter, { name: 'api-limit' });

let calls = 0;
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
const caller = setInterval(() => {
  if (calls++ >= MAX_CALLS) return clearInterval(caller);
  if (!limiter.allow()) return;
  void client
    .call('payments', async (inst) => {
      await wait(2 + Math.random() * 8);
      if (inst.id === 'flaky' && Math.random() < 0.3) throw new Error('flaky');
      return 'ok';
    })
    .catch(() => {});
  void breaker
    .execute(async () => {
      await wait(1);
      if (Math.random() < 0.1) throw new Error('origin');
    })
    .catch(() => {});
  void group.get(`k${calls % 50}`).catch(() => {});
}, 25);

const store = etcdEndpoint === undefined ? new MemoryRuleStore() : new EtcdRuleStore({ hosts: etcdEndpoint, prefix: `${prefix!}/rules/` });
store.watch(0, (change) => {
  if (change.type !== 'changes') return;
  for (const c of change.changes) console.log(c.value === undefined ? `rule remove ${c.key}` : `rule put ${c.key} ${c.value}`);
});
const rules = new Rules({ store, service: service ?? 'checkout', ...(id === undefined ? {} : { instance: id }) });
rules.bind('circuit-breaker', 'origin', breaker);
metrics.track(rules, { name: 'rules' });
await rules.start();
const dashboard = dashboardHandler(metrics, {
  path: '/dashboard',
  ...(withControls ? { controls: { store, scope: 'checkout' } } : {}),
  title: `${service === undefined ? 'bulwark test process' : `${service} ${id}`} (pid ${process.pid})`,
});
const server = createServer(dashboard);
await new Promise<void>((resolve) => server.listen(Number(portArg), '127.0.0.1', resolve));
const port = (server.address() as AddressInfo).port;
if (etcdEndpoint !== undefined) {
  const etcd = new EtcdRegistry({ hosts: etcdEndpoint, prefix: prefix! });
  await etcd.register({ id: id!, name: service!, address: `127.0.0.1:${port}`, metadata: { [STATUS_PATH_KEY]: '/dashboard/events' } }, { ttlMs: 2_000 });
}
console.log(`ready ${port}`);
