/**
 * A process that announces itself, for the signal tests of announce(): run with
 *   node --import tsx test/support/announce-child.ts memory|etcd [endpoint prefix] [stuck]
 * It prints `ready` once registered; at SIGTERM / SIGINT it prints what it saw, in order: (memory) the
 * delete event of its own watch, then `shutdown <signal> gone=<bool>` once announce's `shutdown`
 * resolves, then drains (closes its server and registry) and ends by itself — announce never calls process.exit.
 * With `stuck`, it never drains: a second signal must still end it.
 */
import { createServer } from 'node:http';
import { announce } from '../../src/registry/announce.js';
import { EtcdRegistry } from '../../src/registry/etcd-registry.js';
import { MemoryRegistry } from '../../src/registry/memory-registry.js';
import type { Registry } from '../../src/registry/types.js';

const [kind, endpoint, prefix] = process.argv.slice(2);
const stuck = process.argv.includes('stuck');
const registry: Registry = kind === 'etcd' ? new EtcdRegistry({ hosts: endpoint!, prefix: prefix! }) : new MemoryRegistry();
const instance = { id: `child-${process.pid}`, name: 'announced', address: '127.0.0.1:9400' };

const ac = new AbortController();
if (kind === 'memory') {
  let ready!: () => void;
  const established = new Promise<void>((r) => (ready = r));
  void (async () => {
    for await (const e of registry.watch({ service: 'announced', signal: ac.signal, onReady: ready }))
      console.log(`event ${e.type} ${e.instance.id === instance.id}`);
  })();
  await established;
}

// the service itself: a listening server is what keeps a real process alive until it drains
const server = createServer((_req, res) => res.end('ok'));
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));

const a = await announce(registry, instance);
console.log('ready');
const signal = await a.shutdown;
const gone = await registry.getService('announced').then(
  (l) => !l.some((i) => i.id === instance.id),
  () => true,
);
console.log(`shutdown ${signal} gone=${gone}`);
if (stuck)
  setInterval(() => {}, 1_000); // a drain that never ends
else {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  ac.abort();
  await registry.close();
  console.log('drained');
}
