/**
 * bulwark/grpc: what the guards cost on a unary call over loopback (a greeter with JSON bodies; server
 * and client in the subject's own process, each subject in its own child):
 * - bare grpc-js (a direct `127.0.0.1:port` target) vs the client side (GrpcClientGuard + `bulwark:///`
 *   resolver + `bulwark` P2C policy) vs the server side (GrpcServerGuard with breaker per method),
 *   at 1 and at 64 concurrent calls. Target: each ≤ 5 % overhead (≤ 1.05× the bare time per call).
 * - the pick cost of the policy's strategy with 10 / 100 / 1 000 instances (P2C): all in rotation (no
 *   exclude set: constant time), and with one out of rotation (the exclude set the policy passes: P2C
 *   then scans the list, linear in the instances).
 * P2C vs round_robin with one slow instance (share of calls to it, p50/p99) is measured by
 * test/grpc-balancing.test.ts, which prints both.
 */
import { Server, ServerCredentials, credentials, makeGenericClientConstructor, Metadata } from '@grpc/grpc-js';
import { atMost, bench, type Subject } from './harness.js';
import { GrpcClientGuard, GrpcDiscovery, GrpcServerGuard } from '../src/grpc/index.js';
import { MemoryRegistry } from '../src/registry/memory-registry.js';
import { RegistryCache } from '../src/registry/registry-cache.js';
import { P2C } from '../src/balancer/p2c.js';
import type { ServiceInstance } from '../src/registry/types.js';

const json = (v: unknown) => Buffer.from(JSON.stringify(v));
const parse = (b: Buffer) => JSON.parse(b.toString()) as unknown;
const greeter = {
  SayHello: { path: '/helloworld.Greeter/SayHello', requestStream: false, responseStream: false, requestSerialize: json, requestDeserialize: parse, responseSerialize: json, responseDeserialize: parse },
};
const Greeter = makeGenericClientConstructor(greeter, 'helloworld.Greeter');
type Call = (req: unknown, md: Metadata, cb: (err: Error | null) => void) => void;

async function unary(kind: 'bare' | 'client' | 'server', concurrency: number): Promise<Subject> {
  const sg = kind === 'server' ? new GrpcServerGuard({}) : undefined;
  const server = new Server(sg === undefined ? {} : { interceptors: [sg.interceptor] });
  server.addService(greeter, { SayHello: (_c: unknown, cb: (e: null, r: unknown) => void) => cb(null, { message: 'hi' }) });
  const port = await new Promise<number>((ok, ko) => server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? ko(e) : ok(p))));
  let registry: MemoryRegistry | undefined;
  let cache: RegistryCache | undefined;
  let discovery: GrpcDiscovery | undefined;
  let cg: GrpcClientGuard | undefined;
  let client: InstanceType<typeof Greeter>;
  if (kind === 'client') {
    registry = new MemoryRegistry();
    await registry.register({ id: 'g', name: 'greeter', address: `127.0.0.1:${port}` });
    cache = new RegistryCache(registry);
    discovery = new GrpcDiscovery({ registry: cache, health: false });
    cg = new GrpcClientGuard({ target: 'bulwark:///greeter' });
    client = new Greeter('bulwark:///greeter', credentials.createInsecure(), { ...discovery.channelOptions(), interceptors: [cg.interceptor] });
  } else client = new Greeter(`127.0.0.1:${port}`, credentials.createInsecure());
  const say = (client as unknown as { SayHello: Call }).SayHello.bind(client);
  const md = new Metadata();
  const one = () => new Promise<void>((resolve, reject) => say({ name: 'x' }, md, (e) => (e ? reject(e) : resolve())));
  for (let i = 0; i < 200; i++) await one(); // connect and warm up
  const calls = new Array<Promise<void>>(concurrency);
  return {
    op:
      concurrency === 1
        ? one
        : () => {
            for (let i = 0; i < concurrency; i++) calls[i] = one();
            return Promise.all(calls);
          },
    async: true,
    batch: concurrency === 1 ? 50 : 2,
    teardown: async () => {
      client.close();
      await discovery?.close();
      await cache?.close();
      await registry?.close();
      await cg?.close();
      await sg?.close();
      server.forceShutdown();
    },
  };
}

for (const c of [1, 64]) {
  await bench(`grpc: unary call over loopback, ${c} concurrent`, {
    baseline: 'bare grpc-js',
    subjects: {
      'bare grpc-js': () => unary('bare', c),
      'client guard + bulwark:/// + P2C policy': () => unary('client', c),
      'server guard': () => unary('server', c),
    },
    targets: [
      atMost(`client side ≤ 1.05× bare (${c} concurrent)`, 'client guard + bulwark:/// + P2C policy', 'bare grpc-js', 1.05),
      atMost(`server side ≤ 1.05× bare (${c} concurrent)`, 'server guard', 'bare grpc-js', 1.05),
    ],
  });
}

function pickSubject(n: number, excluded: boolean): Subject {
  const instances: ServiceInstance[] = Array.from({ length: n }, (_, i) => ({ id: `i${i}`, name: 's', address: `10.0.${i >> 8}.${i & 255}:80` }));
  const p = new P2C({ slowStartMs: 0 });
  const out = excluded ? new Set<string>(['i0']) : undefined; // one instance out of rotation, as the policy passes it
  return {
    op: () => {
      const inst = p.pick(instances, undefined, out);
      p.start(inst);
      p.report(inst, { ok: true, latencyMs: 1 });
    },
  };
}

await bench('grpc: policy pick cost (P2C pick + start + report)', {
  baseline: '10 instances, all in rotation',
  subjects: {
    '10 instances, all in rotation': () => pickSubject(10, false),
    '100 instances, all in rotation': () => pickSubject(100, false),
    '1 000 instances, all in rotation': () => pickSubject(1_000, false),
    '10 instances, one out': () => pickSubject(10, true),
    '100 instances, one out': () => pickSubject(100, true),
    '1 000 instances, one out': () => pickSubject(1_000, true),
  },
});
