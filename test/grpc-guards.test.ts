/**
 * The gRPC client and server guards on real grpc-js servers and clients over loopback.
 */
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { credentials, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import {
  GrpcClientGuard,
  GrpcServerGuard,
  GrpcHealth,
  healthServiceDefinition,
  checkGrpcJsVersion,
  UnsupportedVersionError,
  grpcCallChannel,
} from '../src/grpc/index.js';
import { SreBreaker } from '../src/breaker/sre-breaker.js';
import { BreakerOpenError } from '../src/core/errors.js';
import { BreakerGroup } from '../src/breaker/breaker-group.js';
import { KeyedLimiter } from '../src/limit/keyed-limiter.js';
import { GreeterClientCtor, sayHello, startGreeter } from './support/grpc-greeter.js';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { makeGenericClientConstructor } from '@grpc/grpc-js';
import { Registry } from 'prom-client';
import { BulwarkMetrics } from '../src/metrics/index.js';
import { sampleValue } from './support/scrape.js';

const insecure = credentials.createInsecure();

async function refusal(p: Promise<unknown>): Promise<ServiceError> {
  try {
    await p;
  } catch (err) {
    return err as ServiceError;
  }
  assert.fail('the call succeeded');
}

describe('grpc-js version', () => {
  it('accepts 1.14.x and names the supported range for anything else', () => {
    checkGrpcJsVersion('1.14.7');
    checkGrpcJsVersion('1.14.0');
    for (const v of ['1.13.4', '1.15.0', '2.14.0', 'x', undefined]) {
      assert.throws(
        () => checkGrpcJsVersion(v),
        (e: unknown) => e instanceof UnsupportedVersionError && e.code === 'ERR_UNSUPPORTED_VERSION' && /~1\.14/.test(e.message),
      );
    }
  });
});

describe('GrpcClientGuard', () => {
  it('a breaker that refuses answers UNAVAILABLE locally, with ERR_BREAKER_OPEN, and makes no call', async () => {
    let served = 0;
    const { server, address } = await startGreeter('a', {}, () => (served++, {}));
    after(() => server.forceShutdown());
    const breaker = {
      admit: (): never => {
        throw new BreakerOpenError('breaker x is open');
      },
    };
    const guard = new GrpcClientGuard({ target: address, breakers: { get: () => breaker } });
    const client = new GreeterClientCtor(address, insecure, { interceptors: [guard.interceptor] });
    after(() => client.close());
    const err = await refusal(sayHello(client, { name: 'x' }));
    assert.equal(err.code, status.UNAVAILABLE);
    assert.match(err.details, /^ERR_BREAKER_OPEN/);
    assert.deepEqual(err.metadata.get('bulwark-code'), ['ERR_BREAKER_OPEN']);
    assert.equal(served, 0);
    assert.equal(guard.stats().refused, 1);
  });

  it('opens the per-method breaker on go-zero failure codes, not on NOT_FOUND', async () => {
    const { server, address } = await startGreeter('a');
    after(() => server.forceShutdown());
    const group = new BreakerGroup();
    const guard = new GrpcClientGuard({ target: address, breakers: group });
    const client = new GreeterClientCtor(address, insecure, { interceptors: [guard.interceptor] });
    after(() => client.close());
    for (let i = 0; i < 50; i++) await refusal(sayHello(client, { name: 'x', fail: status.NOT_FOUND }));
    assert.equal((group.get(address + '/helloworld.Greeter/SayHello') as SreBreaker).stats().failures ?? 0, 0);
    let local = 0;
    for (let i = 0; i < 200; i++) {
      const e = await refusal(sayHello(client, { name: 'x', fail: status.INTERNAL }));
      if (e.code === status.UNAVAILABLE && e.details.startsWith('ERR_BREAKER_OPEN')) local++;
    }
    assert.ok(local > 40, `breaker refused ${local} of 200 failing calls`);
  });

  it("gives calls without a deadline the default one, and keeps the caller's", async () => {
    const { server, address } = await startGreeter('a');
    after(() => server.forceShutdown());
    const guard = new GrpcClientGuard({ defaultDeadlineMs: 100, breakers: false });
    const client = new GreeterClientCtor(address, insecure, { interceptors: [guard.interceptor] });
    after(() => client.close());
    const t0 = performance.now();
    const err = await refusal(sayHello(client, { name: 'x', delayMs: 2_000 }));
    assert.equal(err.code, status.DEADLINE_EXCEEDED);
    assert.ok(performance.now() - t0 < 1_500);
    const reply = await sayHello(client, { name: 'x', delayMs: 200 }, { deadline: Date.now() + 5_000 });
    assert.equal(reply.message, 'hello x');
    const rows = guard.stats().byMethod;
    assert.deepEqual(rows.map((r) => [r.method, r.code, r.calls]).sort(), [
      ['/helloworld.Greeter/SayHello', 'DEADLINE_EXCEEDED', 1],
      ['/helloworld.Greeter/SayHello', 'OK', 1],
    ]);
  });

  it('publishes bulwark:grpc:call only while subscribed', async () => {
    const { server, address } = await startGreeter('a');
    after(() => server.forceShutdown());
    const guard = new GrpcClientGuard({ breakers: false });
    const client = new GreeterClientCtor(address, insecure, { interceptors: [guard.interceptor] });
    after(() => client.close());
    const seen: unknown[] = [];
    const l = (m: unknown) => seen.push(m);
    subscribe('bulwark:grpc:call', l);
    await sayHello(client, { name: 'x' });
    unsubscribe('bulwark:grpc:call', l);
    await sayHello(client, { name: 'x' });
    assert.equal(grpcCallChannel.hasSubscribers, false);
    assert.equal(seen.length, 1);
    assert.deepEqual({ ...(seen[0] as object), durationMs: 0 }, { side: 'client', method: '/helloworld.Greeter/SayHello', code: 'OK', durationMs: 0 });
  });
});

describe('GrpcServerGuard', () => {
  it('a limiter refuses with RESOURCE_EXHAUSTED and retry info at the configured rate (±5 %)', async () => {
    // Well under what 16 callers offer even on a loaded machine, so the limiter stays saturated.
    const rate = 50;
    const burst = 5;
    const guard = new GrpcServerGuard({ limiter: new KeyedLimiter({ rate, burst }), limitBy: { metadata: 'x-user' }, breakers: false });
    let handled = 0;
    const admittedAt: number[] = [];
    const { server, address } = await startGreeter('a', { interceptors: [guard.interceptor] }, () => (handled++, admittedAt.push(performance.now()), {}));
    after(() => server.forceShutdown());
    const client = new GreeterClientCtor(address, insecure);
    after(() => client.close());
    const md = new Metadata();
    md.set('x-user', 'alice');
    const t0 = performance.now();
    let ok = 0;
    let limited = 0;
    let retry: ServiceError | undefined;
    const end = t0 + 3_000;
    const workers = Array.from({ length: 16 }, async () => {
      while (performance.now() < end) {
        try {
          await sayHello(client, { name: 'x' }, {}, md);
          ok++;
        } catch (err) {
          const e = err as ServiceError;
          assert.equal(e.code, status.RESOURCE_EXHAUSTED);
          retry = e;
          limited++;
        }
      }
    });
    await Promise.all(workers);
    // A pause of the process (this machine is shared) longer than burst / rate lets the bucket fill past
    // its burst: those tokens are lost by design, so such pauses (gaps between admitted calls) do not count.
    let lostMs = 0;
    for (let i = 1; i < admittedAt.length; i++) lostMs += Math.max(0, admittedAt[i]! - admittedAt[i - 1]! - (1000 * burst) / rate);
    const seconds = (performance.now() - t0 - lostMs) / 1000;
    const measured = (ok - burst) / seconds;
    assert.ok(limited > 0);
    assert.ok(
      Math.abs(measured - rate) <= rate * 0.05 + 1 / seconds,
      `admitted ${measured.toFixed(1)}/s for a rate of ${rate}/s (${Math.round(lostMs)} ms of pauses left out)`,
    );
    assert.equal(handled, ok);
    assert.match(retry!.details, /^ERR_RATE_LIMITED/);
    assert.ok(Number(retry!.metadata.get('retry-after-ms')[0]) >= 0);
    assert.equal(retry!.metadata.get('grpc-status-details-bin').length, 1);
    // another key has its own budget
    const other = new Metadata();
    other.set('x-user', 'bob');
    assert.equal((await sayHello(client, { name: 'y' }, {}, other)).message, 'hello y');
  });

  it('a breaker per method refuses with UNAVAILABLE before the handler once the method keeps failing', async () => {
    const guard = new GrpcServerGuard({});
    let handled = 0;
    const { server, address } = await startGreeter('a', { interceptors: [guard.interceptor] }, () => (handled++, { fail: status.INTERNAL }));
    after(() => server.forceShutdown());
    const client = new GreeterClientCtor(address, insecure);
    after(() => client.close());
    let refused = 0;
    for (let i = 0; i < 300; i++) {
      const e = await refusal(sayHello(client, { name: 'x' }));
      if (e.code === status.UNAVAILABLE && /^ERR_BREAKER_OPEN/.test(e.details)) refused++;
    }
    assert.ok(refused > 150, `refused ${refused}`);
    assert.equal(handled + refused, 300);
    assert.equal(guard.stats().refused, refused);
  });

  it('a call whose deadline has already passed never reaches the handler', async () => {
    const guard = new GrpcServerGuard({ breakers: false });
    let handled = 0;
    const admittedAt: number[] = [];
    const { server, address } = await startGreeter('a', { interceptors: [guard.interceptor] }, () => (handled++, admittedAt.push(performance.now()), {}));
    after(() => server.forceShutdown());
    const client = new GreeterClientCtor(address, insecure);
    after(() => client.close());
    const e = await refusal(sayHello(client, { name: 'x' }, { deadline: Date.now() - 1 }));
    assert.equal(e.code, status.DEADLINE_EXCEEDED);
    assert.equal(handled, 0);
  });
});

describe('the guards in Prometheus', () => {
  it('counts calls by method and code and times them in seconds, on both sides, as a scrape reads them', async () => {
    const server = new GrpcServerGuard({ breakers: false });
    const { server: grpcServer, address } = await startGreeter('a', { interceptors: [server.interceptor] });
    after(() => grpcServer.forceShutdown());
    const client = new GrpcClientGuard({ target: address, breakers: false });
    const greeter = new GreeterClientCtor(address, insecure, { interceptors: [client.interceptor] });
    after(() => greeter.close());
    const metrics = new BulwarkMetrics({ registry: new Registry() });
    metrics.track(client, { name: 'greeter-client' });
    metrics.track(server, { name: 'greeter-server' });
    await sayHello(greeter, { name: 'x' });
    await sayHello(greeter, { name: 'y', delayMs: 30 });
    const err = await refusal(sayHello(greeter, { name: 'z', fail: status.NOT_FOUND }));
    assert.equal(err.code, status.NOT_FOUND);
    const text = await metrics.metrics();
    await metrics.close();
    const sample = (series: string) => {
      const v = sampleValue(text, series);
      assert.ok(v !== undefined, `no sample ${series} in:\n${text}`);
      return v;
    };
    const method = 'method="/helloworld.Greeter/SayHello"';
    for (const [side, name] of [
      ['client', 'greeter-client'],
      ['server', 'greeter-server'],
    ] as const) {
      assert.equal(sample(`bulwark_grpc_${side}_calls_total{name="${name}",${method},code="OK"}`), 2, side);
      assert.equal(sample(`bulwark_grpc_${side}_calls_total{name="${name}",${method},code="NOT_FOUND"}`), 1, side);
      assert.equal(sample(`bulwark_grpc_${side}_call_duration_seconds_count{name="${name}",${method},code="OK"}`), 2, side);
      // The 30 ms call is in seconds: the sum is past 0.03 and far below 30 (not milliseconds).
      const sum = sample(`bulwark_grpc_${side}_call_duration_seconds_sum{name="${name}",${method},code="OK"}`);
      assert.ok(sum >= 0.029 && sum < 5, `${side} sum ${sum}`);
      // The 30 ms call is past the 25 ms bucket (the quick one may be in it), and both are in +Inf.
      const bucket = (le: string) => sample(`bulwark_grpc_${side}_call_duration_seconds_bucket{name="${name}",${method},code="OK",le="${le}"}`);
      assert.ok(bucket('0.025') <= 1, `${side}: ${bucket('0.025')} calls within 25 ms`);
      assert.equal(bucket('+Inf'), 2, side);
    }
  });
});

describe('GrpcHealth', () => {
  it('serves Check and Watch, and shutdown turns NOT_SERVING at once', async () => {
    const health = new GrpcHealth();
    const { server, address } = await startGreeter('a', {}, undefined, (s) => health.addTo(s));
    after(() => server.forceShutdown());
    const Health = makeGenericClientConstructor(healthServiceDefinition, 'grpc.health.v1.Health');
    const c = new Health(address, insecure) as unknown as {
      Check(r: { service: string }, cb: (e: ServiceError | null, r?: { status: string }) => void): void;
      Watch(r: { service: string }): NodeJS.EventEmitter & { cancel(): void };
      close(): void;
    };
    after(() => c.close());
    const check = (service: string) => new Promise<{ status: string } | ServiceError>((res) => c.Check({ service }, (e, r) => res(e ?? r!)));
    assert.deepEqual(await check(''), { status: 'SERVING' });
    assert.equal(((await check('nope')) as ServiceError).code, status.NOT_FOUND);
    const statuses: string[] = [];
    const w = c.Watch({ service: '' });
    const ended = new Promise<void>((res) => w.on('end', res).on('error', () => res()));
    const first = new Promise<void>((res) => w.on('data', (r: { status: string }) => (statuses.push(r.status), res())));
    await first;
    health.shutdown();
    await ended;
    assert.deepEqual(statuses, ['SERVING', 'NOT_SERVING']);
    assert.deepEqual(await check(''), { status: 'NOT_SERVING' });
  });
});
