/**
 * bulwark/grpc: what the guards cost on a unary call over loopback (a greeter with JSON bodies; server
 * and client in the subject's own process, each subject in its own child):
 * - bare grpc-js (a direct `127.0.0.1:port` target) vs the client side (GrpcClientGuard + `bulwark:///`
 *   resolver + `bulwark` P2C policy, retries and outlier detection on) vs the server side
 *   (GrpcServerGuard with a breaker per method), at 1 and at 64 concurrent calls: time per call
 *   (throughput) and p50 latency. Target: each ≤ 5 % overhead (≤ 1.05× bare) on both. The client side is
 *   compared on the same call both ways: its caller sets a 2 s deadline on every call, bare or not (the
 *   guard's default deadline then applies to nothing); the client side as configured by default (the
 *   guard gives calls without one a 2 s deadline, GrpcDiscovery a retry policy) against bare calls with
 *   neither is shown beside it, not as a target: it includes what grpc-js itself charges for those two
 *   features, which bare grpc-js given the same pays too (printed beside it). With both turned off
 *   (`defaultDeadlineMs: 0`, `retry: false`) the client side is compared with bare grpc-js as it is.
 *   Interleaved: every round runs each subject once, in a random order, back to back; the ratios are
 *   taken within a round (so the machine's noise of that moment falls on both) and the median of the
 *   rounds' ratios is what counts. A second bare subject (A/A) shows the noise floor of those ratios,
 *   and bare grpc-js with a 2 s deadline shows what the client guard's default deadline costs in grpc-js.
 * - the pick cost of the policy's strategy with 10 / 100 / 1 000 instances (P2C): all in rotation (no
 *   exclude set), with one and with 10 % out of rotation (the exclude set the policy passes: P2C draws
 *   again when a choice lands on an excluded instance, so the cost stays flat in the list's size).
 *   Target: 1 000 instances ≤ 1.5× 10, and one / 10 % out ≤ 2× all in rotation.
 * P2C vs round_robin with one slow instance (share of calls to it, p50/p99) is measured by
 * test/grpc-balancing.test.ts, which prints both.
 * - the guards' own cost per call over a fake next call (no network), optionally beside another build's.
 *   Target: ≤ 1 µs each (a loopback unary call costs ~300 µs of CPU here, server and client together).
 * Environment: GRPC_BENCH=unary|layers|pick (one section), GRPC_CONCURRENCY (the unary section's
 * concurrencies, default 1,64), GRPC_SUBJECTS (substrings of the subjects to keep), GRPC_WARM_MS (each unary
 * subject's warm-up, default 2 000), GRPC_BASE_DIST (a dist/ to compare with), BENCH_RUNS (rounds, default 7 for the unary
 * section), BENCH_MS (measured time per child, default 1 000).
 */
import { Server, ServerCredentials, credentials, makeGenericClientConstructor, Metadata, InterceptingCall, type Interceptor } from '@grpc/grpc-js';
import { spawnSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { atMost, bench, type BenchSpec, type Subject, type Target } from './harness.js';
import { GrpcClientGuard, GrpcDiscovery, GrpcServerGuard } from '../src/grpc/index.js';
import { MemoryRegistry } from '../src/registry/memory-registry.js';
import { RegistryCache } from '../src/registry/registry-cache.js';
import { P2C } from '../src/balancer/p2c.js';
import type { ServiceInstance } from '../src/registry/types.js';

const json = (v: unknown) => Buffer.from(JSON.stringify(v));
const parse = (b: Buffer) => JSON.parse(b.toString()) as unknown;
const greeter = {
  SayHello: {
    path: '/helloworld.Greeter/SayHello',
    requestStream: false,
    responseStream: false,
    requestSerialize: json,
    requestDeserialize: parse,
    responseSerialize: json,
    responseDeserialize: parse,
  },
};
const Greeter = makeGenericClientConstructor(greeter, 'helloworld.Greeter');
type Call = (req: unknown, md: Metadata, cb: (err: Error | null) => void) => void;
type CallWith = (req: unknown, md: Metadata, options: { deadline: number }, cb: (err: Error | null) => void) => void;

const WARM_MS = Math.min(300, Number(process.env.BENCH_MS ?? 1_000) / 3); // the harness's warm-up

async function unary(
  kind:
    | 'bare'
    | 'deadline'
    | 'deadline-retry'
    | 'pass'
    | 'guard-direct'
    | 'client'
    | 'client-deadline'
    | 'client-no-retry'
    | 'client-no-deadline'
    | 'client-lean'
    | 'policy'
    | 'server',
  concurrency: number,
): Promise<Subject> {
  const sg = kind === 'server' ? new GrpcServerGuard({}) : undefined;
  const server = new Server(sg === undefined ? {} : { interceptors: [sg.interceptor] });
  server.addService(greeter, { SayHello: (_c: unknown, cb: (e: null, r: unknown) => void) => cb(null, { message: 'hi' }) });
  const port = await new Promise<number>((ok, ko) => server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? ko(e) : ok(p))));
  let registry: MemoryRegistry | undefined;
  let cache: RegistryCache | undefined;
  let discovery: GrpcDiscovery | undefined;
  let cg: GrpcClientGuard | undefined;
  let client: InstanceType<typeof Greeter>;
  if (
    kind === 'client' ||
    kind === 'client-deadline' ||
    kind === 'client-no-retry' ||
    kind === 'client-no-deadline' ||
    kind === 'client-lean' ||
    kind === 'policy'
  ) {
    registry = new MemoryRegistry();
    await registry.register({ id: 'g', name: 'greeter', address: `127.0.0.1:${port}` });
    cache = new RegistryCache(registry);
    const noRetry = kind === 'client-no-retry' || kind === 'client-lean';
    const noDefaultDeadline = kind === 'client-no-deadline' || kind === 'client-lean';
    discovery = new GrpcDiscovery({ registry: cache, health: false, ...(noRetry ? { retry: false as const } : {}) });
    // 'policy' is discovery and the P2C policy alone, no interceptor: the two rows tell the guard's
    // share of the client side's cost from the resolver's and the LB policy's.
    if (kind !== 'policy') cg = new GrpcClientGuard({ target: 'bulwark:///greeter', ...(noDefaultDeadline ? { defaultDeadlineMs: 0 } : {}) });
    client = new Greeter('bulwark:///greeter', credentials.createInsecure(), {
      ...discovery.channelOptions(),
      ...(cg ? { interceptors: [cg.interceptor] } : {}),
    });
  } else if (kind === 'pass') {
    // A pass-through interceptor that only wraps the next call in grpc-js's own InterceptingCall: what
    // any interceptor costs in grpc-js's call path, whatever it does.
    const pass: Interceptor = (options, nextCall) => new InterceptingCall(nextCall(options));
    client = new Greeter(`127.0.0.1:${port}`, credentials.createInsecure(), { interceptors: [pass] });
  } else if (kind === 'guard-direct') {
    // The client guard on a direct target (no resolver, no policy), without its default deadline.
    cg = new GrpcClientGuard({ target: `127.0.0.1:${port}`, defaultDeadlineMs: 0 });
    client = new Greeter(`127.0.0.1:${port}`, credentials.createInsecure(), { interceptors: [cg.interceptor] });
  } else if (kind === 'deadline-retry') {
    // Bare grpc-js with the retry policy GrpcDiscovery gives its channels by default (UNAVAILABLE, 3
    // attempts, 10–100 ms backoff) as a default service config: grpc-js then buffers each call's request
    // for a retry, which it does not for a channel without a retry policy.
    const serviceConfig = {
      loadBalancingConfig: [],
      methodConfig: [
        {
          name: [{}],
          retryPolicy: { maxAttempts: 3, initialBackoff: '0.010000s', maxBackoff: '0.100000s', backoffMultiplier: 2, retryableStatusCodes: ['UNAVAILABLE'] },
        },
      ],
    };
    client = new Greeter(`127.0.0.1:${port}`, credentials.createInsecure(), { 'grpc.service_config': JSON.stringify(serviceConfig) });
  } else client = new Greeter(`127.0.0.1:${port}`, credentials.createInsecure());
  const say = (client as unknown as { SayHello: Call }).SayHello.bind(client);
  const sayWith = (client as unknown as { SayHello: CallWith }).SayHello.bind(client);
  const md = new Metadata();
  const request = { name: 'x' };
  // Latency of each call after the warm-up, for the p50 (a ring of the latest 64 Ki).
  const samples = new Float64Array(1 << 16);
  let count = 0;
  let recordFrom = Infinity;
  // CPU time (user + system) of the process from the end of the warm-up: server and client both run
  // here, so per call it is what a call costs in work, which other processes' load does not inflate.
  let cpuFrom: NodeJS.CpuUsage | undefined;
  let countFrom = 0;
  // GrpcClientGuard gives every call a deadline (2 s by default, as zrpc): grpc-js then arms a timer
  // and sends grpc-timeout per call, and the server parses it and arms its own. The 'deadline' subject is
  // bare grpc-js paying that same price, its caller setting a 2 s deadline on every call, and
  // 'client-deadline' is the whole client side with the same caller (the guard's default then applies to
  // nothing): the pair compares the same call, with and without bulwark.
  const withDeadline = kind === 'deadline' || kind === 'deadline-retry' || kind === 'client-deadline';
  const one = () =>
    new Promise<void>((resolve, reject) => {
      const t0 = performance.now();
      const cb = (e: Error | null) => {
        if (t0 >= recordFrom) {
          if (cpuFrom === undefined) {
            cpuFrom = process.cpuUsage();
            countFrom = count;
          }
          samples[count++ & 0xffff] = performance.now() - t0;
        }
        if (e) reject(e);
        else resolve();
      };
      if (withDeadline) sayWith(request, md, { deadline: Date.now() + 2_000 }, cb);
      else say(request, md, cb);
    });
  // Connect, then warm up until the JIT has compiled the call path (GRPC_WARM_MS, default 2 000 ms):
  // the harness's own 300 ms warm-up leaves more code still in the interpreter or baseline tier when a
  // subject runs more code per call (a guard, a policy), so a short run charges it its JIT time, which a
  // long-running service pays once. Measured: guard on a direct target 1.116× bare with 200 calls of
  // warm-up, vs ~1.0–1.05× over 20 000 calls after 3 000.
  const warmUntil = performance.now() + Number(process.env.GRPC_WARM_MS ?? 2_000);
  for (let i = 0; i < 200 || performance.now() < warmUntil; i++) await one();
  recordFrom = performance.now() + WARM_MS;
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
    extra: () => {
      const xs = Array.from(samples.subarray(0, Math.min(count, samples.length))).sort((a, b) => a - b);
      const cpu = process.cpuUsage(cpuFrom);
      return { p50Us: xs.length > 0 ? xs[xs.length >> 1]! * 1000 : NaN, cpuUs: (cpu.user + cpu.system) / Math.max(1, count - countFrom), calls: count };
    },
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

interface ChildResult {
  nsPerOp: number;
  extra: Record<string, number>;
}

const median = (xs: readonly number[]): number => {
  const v = [...xs].sort((a, b) => a - b);
  const m = v.length >> 1;
  return v.length === 0 ? NaN : v.length % 2 ? v[m]! : (v[m - 1]! + v[m]!) / 2;
};

/** PairTarget is a ratio a target bounds: `subject` ÷ `than`, both measured in the same round. */
interface PairTarget {
  label: string;
  subject: string;
  than: string;
  /** The bound; without one the pair is shown for what it explains, not a target ('·' instead of ✓/✗). */
  max?: number;
  /** A lower bound too (the A/A pair, whose ratio should be 1 either way). */
  min?: number;
}

/** shuffle puts `xs` in a random order in place (Fisher–Yates). */
function shuffle<T>(xs: T[]): T[] {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [xs[i], xs[j]] = [xs[j]!, xs[i]!];
  }
  return xs;
}

/**
 * interleaved runs a section's subjects round after round, each once per round in its own child (the
 * harness's child protocol), in a new random order each round (in a fixed rotation a subject would
 * always follow the same one, and what that one leaves behind — a warm cache, a busy core — would fall
 * on it every time); it prints, per subject, the median time per call and p50, and the median (min–max)
 * over the rounds of its ratio to the baseline measured in the same round. Each target is a pair of
 * subjects, its ratio taken within each round the same way.
 */
function interleaved(title: string, spec: BenchSpec & { baseline: string }, perOp: number, targets: PairTarget[]): void {
  const rounds = Number(process.env.BENCH_RUNS ?? 7);
  const file = fileURLToPath(import.meta.url);
  const names = Object.keys(spec.subjects);
  const got = new Map<string, ChildResult[]>(names.map((n) => [n, []]));
  const measured: Map<string, ChildResult>[] = [];
  process.stdout.write(`\n## ${title}  (${rounds} interleaved rounds × ${process.env.BENCH_MS ?? 1_000} ms per subject, each in its own process)\n`);
  for (let r = 0; r < rounds; r++) {
    const round = new Map<string, ChildResult>();
    for (const name of shuffle([...names])) {
      const child = spawnSync(process.execPath, [...process.execArgv, file, '--child', name, '--section', title], {
        encoding: 'utf8',
        env: process.env,
        timeout: 120_000,
        maxBuffer: 16 << 20,
      });
      const line = child.stdout.split('\n').find((l) => l.startsWith('@@RESULT '));
      if (child.status !== 0 || line === undefined) {
        process.stdout.write(`  ${name}: child failed (status ${child.status})\n${child.stderr.slice(-2000)}\n`);
        process.exitCode = 1;
        continue;
      }
      const res = JSON.parse(line.slice(9)) as ChildResult;
      round.set(name, res);
      got.get(name)!.push(res);
    }
    measured.push(round);
  }
  /** ratios answers `subject` ÷ `than` in each round where both ran: time per call, p50 and CPU per call. */
  const ratios = (subject: string, than: string) => {
    const out = { time: [] as number[], p50: [] as number[], cpu: [] as number[] };
    for (const round of measured) {
      const a = round.get(subject);
      const b = round.get(than);
      if (a === undefined || b === undefined) continue;
      out.time.push(a.nsPerOp / b.nsPerOp);
      out.p50.push(a.extra.p50Us! / b.extra.p50Us!);
      out.cpu.push(a.extra.cpuUs! / b.extra.cpuUs!);
    }
    return out;
  };
  const spread = (xs: number[]) => (xs.length === 0 ? '–' : `${median(xs).toFixed(3)} (${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)})`);
  const rows = [
    [
      'subject',
      'calls/s',
      'time/call',
      'p50',
      'CPU/call',
      `time ÷ ${spec.baseline}, per round`,
      `p50 ÷ ${spec.baseline}, per round`,
      `CPU ÷ ${spec.baseline}, per round`,
    ],
  ];
  for (const name of names) {
    const rs = got.get(name)!;
    const ns = median(rs.map((x) => x.nsPerOp)) / perOp;
    const r = ratios(name, spec.baseline);
    rows.push([
      name,
      `${(1e9 / ns / 1000).toFixed(1)} k/s`,
      `${(ns / 1000).toFixed(2)} µs`,
      `${median(rs.map((x) => x.extra.p50Us!)).toFixed(1)} µs`,
      `${median(rs.map((x) => x.extra.cpuUs!)).toFixed(1)} µs`,
      spread(r.time),
      spread(r.p50),
      spread(r.cpu),
    ]);
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  for (const row of rows) process.stdout.write(`  ${row.map((c, i) => c.padEnd(widths[i]!)).join('  ')}\n`);
  process.stdout.write('  targets (median over the rounds of the ratio within a round; min–max):\n');
  for (const t of targets) {
    if (!names.includes(t.subject) || !names.includes(t.than)) continue; // left out (GRPC_SUBJECTS)
    const r = ratios(t.subject, t.than);
    for (const [what, xs] of [
      ['time per call', r.time],
      ['p50', r.p50],
      ['CPU per call', r.cpu],
    ] as const) {
      const v = median(xs);
      process.stdout.write(
        `  ${t.max === undefined ? '·' : v <= t.max && v >= (t.min ?? 0) ? '✓' : '✗'} ${t.label}, ${what}: ${Number.isNaN(v) ? 'failed' : `${v.toFixed(3)}×`} ${xs.length > 0 ? `(${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)})` : ''}\n`,
      );
    }
  }
}

const section = process.env.GRPC_BENCH;
const isChild = process.argv.includes('--child');

if (section === undefined || section === 'unary') {
  for (const c of (process.env.GRPC_CONCURRENCY ?? '1,64').split(',').map(Number)) {
    const title = `grpc: unary call over loopback, ${c} concurrent`;
    const spec = {
      baseline: 'bare grpc-js',
      subjects: {
        'bare grpc-js': () => unary('bare', c),
        'bare grpc-js (A/A)': () => unary('bare', c),
        'bare grpc-js, 2 s deadline': () => unary('deadline', c),
        'bare grpc-js, 2 s deadline, the same retry policy': () => unary('deadline-retry', c),
        'client guard + bulwark:/// + P2C policy': () => unary('client', c),
        'the same, caller sets a 2 s deadline': () => unary('client-deadline', c),
        'the same, retry: false': () => unary('client-no-retry', c),
        'the same, no default deadline': () => unary('client-no-deadline', c),
        'the same, no default deadline, retry: false': () => unary('client-lean', c),
        'bulwark:/// + P2C policy, no guard': () => unary('policy', c),
        'bare + pass-through interceptor': () => unary('pass', c),
        'bare + client guard, no default deadline': () => unary('guard-direct', c),
        'server guard': () => unary('server', c),
      },
    };
    // GRPC_SUBJECTS (comma-separated substrings) keeps only matching subjects, with the baseline.
    const only = process.env.GRPC_SUBJECTS?.split(',');
    if (only !== undefined) {
      for (const name of Object.keys(spec.subjects))
        if (name !== spec.baseline && !only.some((o) => name.includes(o))) delete (spec.subjects as Record<string, unknown>)[name];
    }
    if (isChild) await bench(title, spec);
    else
      interleaved(title, spec, c, [
        {
          label: `A/A: bare ÷ bare (${c} concurrent), the noise floor, within 0.95–1.05`,
          subject: 'bare grpc-js (A/A)',
          than: 'bare grpc-js',
          min: 0.95,
          max: 1.05,
        },
        {
          label: `client side ≤ 1.05× bare, the caller setting a 2 s deadline on both (${c} concurrent)`,
          subject: 'the same, caller sets a 2 s deadline',
          than: 'bare grpc-js, 2 s deadline',
          max: 1.05,
        },
        {
          label: `client side ≤ 1.05× bare, both with the caller's 2 s deadline and the same retry policy (${c} concurrent)`,
          subject: 'the same, caller sets a 2 s deadline',
          than: 'bare grpc-js, 2 s deadline, the same retry policy',
          max: 1.05,
        },
        // The defaults turn on grpc-js work that bare grpc-js pays as well when asked for it (a deadline:
        // a timer on each side and the grpc-timeout header; a retry policy: the request kept for a
        // retry). These lines show that price and bulwark's share of the default configuration's cost.
        {
          label: `(not a target) bare grpc-js with a 2 s deadline and the retry policy ÷ bare: what grpc-js charges for the features the client side's defaults turn on (${c} concurrent)`,
          subject: 'bare grpc-js, 2 s deadline, the same retry policy',
          than: 'bare grpc-js',
        },
        {
          label: `(not a target) client side as configured by default ÷ bare grpc-js with no deadline and no retry policy: the line above times bulwark's own share (${c} concurrent)`,
          subject: 'client guard + bulwark:/// + P2C policy',
          than: 'bare grpc-js',
        },
        {
          label: `client side without the grpc-js features its defaults turn on (no default deadline, retry: false) ≤ 1.05× bare (${c} concurrent)`,
          subject: 'the same, no default deadline, retry: false',
          than: 'bare grpc-js',
          max: 1.05,
        },
        { label: `server side ≤ 1.05× bare (${c} concurrent)`, subject: 'server guard', than: 'bare grpc-js', max: 1.05 },
      ]);
  }
}

/**
 * The guards' own cost per call, without the network: each interceptor over a fake next call that
 * answers at once (OK), against the fake call alone. Machine noise that swamps a 5 % difference on a
 * loopback call (see the A/A row above) hardly touches these few hundred nanoseconds. With
 * GRPC_BASE_DIST=<a dist/ of another build>, that build's guards run beside ours (A/B).
 */
type Guards = { GrpcClientGuard: typeof GrpcClientGuard; GrpcServerGuard: typeof GrpcServerGuard };

async function guardsOf(build: 'this' | 'base'): Promise<Guards> {
  if (build === 'this') return { GrpcClientGuard, GrpcServerGuard };
  return (await import(`${process.env.GRPC_BASE_DIST}/grpc/index.js`)) as Guards;
}

const okStatus = { code: 0, details: 'OK', metadata: new Metadata() };

function fakeClientCall(): object {
  return {
    start(md: Metadata, l: { onReceiveMetadata?: (m: Metadata) => void; onReceiveMessage?: (m: unknown) => void; onReceiveStatus?: (s: unknown) => void }) {
      l.onReceiveMetadata?.(md);
      l.onReceiveMessage?.(okStatus);
      l.onReceiveStatus?.(okStatus);
    },
    sendMessageWithContext() {},
    sendMessage() {},
    startRead() {},
    halfClose() {},
    cancelWithStatus() {},
    getPeer: () => '127.0.0.1:1',
    getAuthContext: () => null,
  };
}

async function clientLayer(guard: 'none' | 'this' | 'base'): Promise<Subject> {
  const fake = fakeClientCall();
  const nextCall = () => fake;
  const definition = { path: '/helloworld.Greeter/SayHello' };
  const md = new Metadata();
  const listener = { onReceiveMetadata() {}, onReceiveMessage() {}, onReceiveStatus() {} };
  type Call = { start(md: Metadata, l: object): void; sendMessage(m: unknown): void; halfClose(): void };
  if (guard === 'none') {
    return {
      op: () => {
        const options = Object.assign({}, { deadline: undefined }, { method_definition: definition }); // what grpc-js builds per call
        const call = nextCall() as Call;
        void options;
        call.start(md, listener);
        call.sendMessage(request);
        call.halfClose();
      },
    };
  }
  const G = await guardsOf(guard);
  const g = new G.GrpcClientGuard({ target: 'bulwark:///greeter' });
  const interceptor = g.interceptor as unknown as (o: object, next: () => object) => Call;
  return {
    op: () => {
      const call = interceptor(Object.assign({}, { deadline: undefined }, { method_definition: definition }), nextCall);
      call.start(md, listener);
      call.sendMessage(request);
      call.halfClose();
    },
    teardown: () => g.close(),
  };
}
const request = { name: 'x' };

async function serverLayer(guard: 'none' | 'this' | 'base'): Promise<Subject> {
  const md = new Metadata();
  type Listener = { onReceiveMetadata(m: Metadata): void; onReceiveMessage(m: unknown): void; onReceiveHalfClose(): void; onCancel(): void };
  type Call = { start(l: Listener): void; sendStatus(s: object): void; sendMessage(m: unknown, cb: () => void): void };
  const base = {
    start(l: Listener) {
      l.onReceiveMetadata(md);
      l.onReceiveMessage(request);
      l.onReceiveHalfClose();
    },
    sendMetadata() {},
    sendMessage(_m: unknown, cb: () => void) {
      cb();
    },
    sendStatus() {},
    startRead() {},
    getPeer: () => '127.0.0.1:1',
    getDeadline: () => Infinity,
    getHost: () => 'h',
    getAuthContext: () => ({}),
    getConnectionInfo: () => ({}),
    getMetricsRecorder: () => ({}),
  };
  const descriptor = { path: '/helloworld.Greeter/SayHello' };
  let intercept: (d: object, c: object) => Call = (_d, c) => c as Call;
  let close: (() => unknown) | undefined;
  if (guard !== 'none') {
    const G = await guardsOf(guard);
    const g = new G.GrpcServerGuard({});
    intercept = g.interceptor as unknown as typeof intercept;
    close = () => g.close();
  }
  const noop = () => undefined;
  return {
    op: () => {
      const call = intercept(descriptor, base);
      // What the unary handler runner does: listen, answer the message, end with OK.
      call.start({
        onReceiveMetadata() {},
        onReceiveMessage() {},
        onReceiveHalfClose() {
          call.sendMessage(okStatus, noop);
          call.sendStatus(okStatus);
        },
        onCancel() {},
      });
    },
    teardown: close,
  };
}

if (section === undefined || section === 'layers') {
  const subjects: Record<string, () => Promise<Subject>> = {
    'client: fake call alone': () => clientLayer('none'),
    'client: GrpcClientGuard over it': () => clientLayer('this'),
    'server: fake call alone': () => serverLayer('none'),
    'server: GrpcServerGuard over it': () => serverLayer('this'),
  };
  if (process.env.GRPC_BASE_DIST) {
    subjects['client: GrpcClientGuard over it (base build)'] = () => clientLayer('base');
    subjects['server: GrpcServerGuard over it (base build)'] = () => serverLayer('base');
  }
  const own = (name: string, guard: string, alone: string): Target => ({
    label: `${name}'s own cost ≤ 1 µs per call`,
    check: (m) => {
      const value = m.ns(guard) - m.ns(alone);
      return { value, ok: value <= 1_000, unit: ' ns' };
    },
  });
  await bench("grpc: the guards' own cost per call (over a fake next call, no network)", {
    baseline: 'client: fake call alone',
    subjects,
    targets: [
      own('GrpcClientGuard', 'client: GrpcClientGuard over it', 'client: fake call alone'),
      own('GrpcServerGuard', 'server: GrpcServerGuard over it', 'server: fake call alone'),
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

if (section === undefined || section === 'pick')
  await bench('grpc: policy pick cost (P2C pick + start + report)', {
    baseline: '10 instances, all in rotation',
    subjects: pickSubjects,
    targets: [
      atMost('1 000 instances ≤ 1.5× 10 instances, all in rotation', '1 000 instances, all in rotation', '10 instances, all in rotation', 1.5),
      atMost('1 000 instances, one out ≤ 2× all in rotation', '1 000 instances, one out', '1 000 instances, all in rotation', 2),
      atMost('1 000 instances, 10 % out ≤ 2× all in rotation', '1 000 instances, 10 % out', '1 000 instances, all in rotation', 2),
    ],
  });
