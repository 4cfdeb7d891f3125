/**
 * bulwark/grpc: what the guards cost on a unary call over loopback (a greeter with JSON bodies; server
 * and client in the subject's own process, each subject in its own child):
 * - bare grpc-js (a direct `127.0.0.1:port` target) vs the client side (GrpcClientGuard + `bulwark:///`
 *   resolver + `bulwark` P2C policy) vs the server side (GrpcServerGuard with breaker per method),
 *   at 1 and at 64 concurrent calls. Target: each ≤ 5 % overhead (≤ 1.05× the bare time per call).
 * - the pick cost of the policy's strategy with 10 / 100 / 1 000 instances (P2C): all in rotation (no
 *   exclude set), with one and with 10 % out of rotation (the exclude set the policy passes: P2C draws
 *   again when a choice lands on an excluded instance, so the cost stays flat in the list's size).
 *   Target: 1 000 instances ≤ 1.5× 10, and one / 10 % out ≤ 2× all in rotation.
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

type Out = 'none' | 'one' | 'tenth';

function pickSubject(n: number, out: Out): Subject {
  const instances: ServiceInstance[] = Array.from({ length: n }, (_, i) => ({ id: `i${i}`, name: 's', address: `10.0.${i >> 8}.${i & 255}:80` }));
  const p = new P2C({ slowStartMs: 0 });
  // Out of rotation, as the policy passes it: no set at all, one instance, or every tenth one.
  const exclude = out === 'none' ? undefined : new Set<string>(instances.filter((_, i) => (out === 'one' ? i === 0 : i % 10 === 0)).map((x) => x.id));
  const outcome = { ok: true, latencyMs: 1 };
  return {
    op: () => {
      const inst = p.pick(instances, undefined, exclude);
      p.start(inst);
      p.report(inst, outcome);
    },
  };
}

const pickSubjects: Record<string, () => Subject> = {};
for (const n of [10, 100, 1_000]) {
  const size = n.toLocaleString('en').replace(',', ' ');
  pickSubjects[`${size} instances, all in rotation`] = () => pickSubject(n, 'none');
  pickSubjects[`${size} instances, one out`] = () => pickSubject(n, 'one');
  pickSubjects[`${size} instances, 10 % out`] = () => pickSubject(n, 'tenth');
}

await bench('grpc: policy pick cost (P2C pick + start + report)', {
  baseline: '10 instances, all in rotation',
  subjects: pickSubjects,
  targets: [
    atMost('1 000 instances ≤ 1.5× 10 instances, all in rotation', '1 000 instances, all in rotation', '10 instances, all in rotation', 1.5),
    atMost('1 000 instances, one out ≤ 2× all in rotation', '1 000 instances, one out', '1 000 instances, all in rotation', 2),
    atMost('1 000 instances, 10 % out ≤ 2× all in rotation', '1 000 instances, 10 % out', '1 000 instances, all in rotation', 2),
  ],
});
