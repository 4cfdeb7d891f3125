/**
 * A greeter server process for the gRPC tests that kill or stop servers:
 *   node --import tsx test/support/grpc-server-child.ts <etcd endpoint | none> <prefix> <id> [shed] [layout=<name>]
 * It serves the greeter and grpc.health.v1, registers itself in etcd as service `greeter` through
 * announceGrpc (lease TTL 2 s, in the etcd layout named, bulwark's by default; `none`: in a MemoryRegistry
 * of its own), and prints `ready <address>`. With `shed`, a GrpcServerGuard with an
 * AdaptiveShedder guards the greeter. At SIGTERM it turns NOT_SERVING, deregisters, drains, prints
 * `stopped` and ends by itself.
 */
import { ServerCredentials, Server } from '@grpc/grpc-js';
import { announceGrpc, GrpcHealth, GrpcServerGuard } from '../../src/grpc/index.js';
import { AdaptiveShedder } from '../../src/limit/adaptive-shedder.js';
import { EtcdRegistry } from '../../src/registry/etcd-registry.js';
import type { EtcdLayoutName } from '../../src/registry/etcd-layout.js';
import { MemoryRegistry } from '../../src/registry/memory-registry.js';
import { greeterHandler, greeterService } from './grpc-greeter.js';

const [endpoint, prefix, id] = process.argv.slice(2);
const shed = process.argv.includes('shed');
const layout = (process.argv.find((a) => a.startsWith('layout=')) ?? 'layout=bulwark').slice('layout='.length) as EtcdLayoutName;
const shedder = shed ? new AdaptiveShedder({ delayP99Ms: 50 }) : undefined;
const guard = shedder !== undefined ? new GrpcServerGuard({ shedder, breakers: false }) : undefined;
const server = new Server(guard === undefined ? {} : { interceptors: [guard.interceptor] });
const health = new GrpcHealth();
server.addService(greeterService, greeterHandler(id!));
health.addTo(server);
const port = await new Promise<number>((resolve, reject) =>
  server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
);
const address = `127.0.0.1:${port}`;
const registry = endpoint === 'none' ? new MemoryRegistry() : new EtcdRegistry({ hosts: endpoint!, prefix: prefix!, ttlMs: 2_000, layout });
const a = await announceGrpc(registry, { id: id!, name: 'greeter', address }, { server, health, drainMs: 300 });
console.log(`ready ${address}`);
if (shedder !== undefined) setInterval(() => console.log(`shedder ${JSON.stringify(shedder.stats())}`), 500).unref();
await a.shutdown;
await registry.close();
console.log('stopped');
