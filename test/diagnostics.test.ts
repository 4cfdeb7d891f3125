/**
 * The diagnostics_channel hooks: each channel is subscribed to by name (as an APM agent would, with no
 * reference to the component), a real scenario runs, and the messages are asserted — what fired, in
 * which order, with which fields. Time is a ManualClock wherever it matters. The Redis-only channel
 * (`bulwark:limit:mode`) and Redis limiter refusals on Redis are in diagnostics-redis.test.ts.
 */
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { AsyncLocalStorage } from 'node:async_hooks';
import { subscribe, tracingChannel, unsubscribe } from 'node:diagnostics_channel';
import { ManualClock } from '../src/core/clock.js';
import { diagnosticsChannels } from '../src/core/diagnostics.js';
import { BreakerOpenError, OverloadedError } from '../src/core/errors.js';
import { CircuitBreaker, SreBreaker } from '../src/breaker/index.js';
import { AdaptiveShedder, KeyedLimiter, PeriodLimiter, RedisTokenLimiter, TokenLimiter } from '../src/limit/index.js';
import { MemoryRegistry, RegistryCache } from '../src/registry/index.js';
import { Balancer } from '../src/balancer/index.js';
import { ResilientClient } from '../src/client/index.js';
import { Group, type PeerGetter, type PeerPicker } from '../src/cache/index.js';
import { HttpGuard } from '../src/http/index.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { EventEmitter } from 'node:events';
import { freePort, waitFor } from './support/servers.js';

/** Subscriptions made by a test, undone after it. */
const undo: (() => void)[] = [];
afterEach(() => {
  for (const u of undo.splice(0)) u();
});

/** record subscribes to `name` and answers the array its messages land in. */
function record<M = Record<string, unknown>>(name: string): M[] {
  const seen: M[] = [];
  const fn = (m: unknown) => void seen.push(m as M);
  subscribe(name, fn);
  undo.push(() => unsubscribe(name, fn));
  return seen;
}

/** traced subscribes to the five channels of tracing channel `name` and answers `[event, context]` pairs in order. */
function traced<C extends object = Record<string, unknown>>(name: string): [string, C][] {
  const seen: [string, C][] = [];
  const handlers = {
    start: (m: unknown) => void seen.push(['start', m as C]),
    end: (m: unknown) => void seen.push(['end', m as C]),
    asyncStart: (m: unknown) => void seen.push(['asyncStart', m as C]),
    asyncEnd: (m: unknown) => void seen.push(['asyncEnd', m as C]),
    error: (m: unknown) => void seen.push(['error', m as C]),
  };
  const tc = tracingChannel(name);
  tc.subscribe(handlers);
  undo.push(() => tc.unsubscribe(handlers));
  return seen;
}

describe('diagnostics_channel: breakers', () => {
  it('bulwark:breaker:state follows a CircuitBreaker closed → open → half-open → closed, with name, reason and clock time', async () => {
    const seen = record(diagnosticsChannels.breakerState);
    const clock = new ManualClock(1_000);
    const b = new CircuitBreaker({ name: 'payments', minimumCalls: 2, failureRate: 0.5, openMs: 500, halfOpenCalls: 1, clock });
    for (let i = 0; i < 2; i++) await b.execute(() => Promise.reject(new Error('down'))).catch(() => {});
    assert.equal(b.state, 'open');
    clock.advance(500);
    assert.equal(b.state, 'half-open');
    await b.execute(() => 'ok');
    assert.deepEqual(seen, [
      { breaker: 'payments', from: 'closed', to: 'open', reason: 'failure rate 100% ≥ 50% over 2 calls', at: 1_000 },
      { breaker: 'payments', from: 'open', to: 'half-open', reason: 'open for 500 ms', at: 1_500 },
      { breaker: 'payments', from: 'half-open', to: 'closed', reason: 'all 1 probes succeeded', at: 1_500 },
    ]);
    b.isolate();
    b.reset();
    assert.deepEqual(
      seen.slice(3).map((m) => [m.from, m.to, m.reason]),
      [
        ['closed', 'open', 'isolated by an operator'],
        ['open', 'closed', 'reset'],
      ],
    );
    await b.close();
    b.reset();
    assert.equal(seen.length, 5, 'a closed breaker publishes nothing');
  });

  it('bulwark:breaker:reject: one message per refused call (CircuitBreaker open, half-open full; SreBreaker dropping), none after close()', async () => {
    const seen = record(diagnosticsChannels.breakerReject);
    const clock = new ManualClock();
    const cb = new CircuitBreaker({ name: 'inventory', openMs: 100, halfOpenCalls: 1, clock });
    cb.isolate();
    assert.throws(() => cb.admit(), BreakerOpenError);
    await cb.execute(() => 1).catch(() => {});
    assert.equal(cb.tryAdmit(), undefined);
    cb.reset();
    cb.admit().success();
    assert.deepEqual(seen, Array(3).fill({ breaker: 'inventory', kind: 'CircuitBreaker', state: 'open', isolatedReason: 'isolated by an operator' }));
    // half-open with its one probe taken
    const hb = new CircuitBreaker({ name: 'probe', minimumCalls: 1, openMs: 100, halfOpenCalls: 1, clock });
    hb.admit().failure(new Error('x'));
    clock.advance(100);
    const probe = hb.admit();
    assert.throws(() => hb.admit(), BreakerOpenError);
    probe.success();
    assert.deepEqual(seen[3], { breaker: 'probe', kind: 'CircuitBreaker', state: 'half-open' });
    await cb.close();
    assert.throws(() => cb.admit());
    assert.equal(seen.length, 4, 'a closed breaker refuses with ClosedError and publishes nothing');

    const sre = new SreBreaker({ name: 'search', clock, random: () => 0, protection: 0, forcePassMs: 60_000 });
    for (let i = 0; i < 20; i++) sre.tryAdmit()?.failure(new Error('down'));
    const drops = sre.stats().drops;
    assert.ok(drops > 0);
    assert.equal(seen.length - 4, drops, 'one message per dropped call');
    assert.deepEqual(seen.at(-1), { breaker: 'search', kind: 'SreBreaker', state: 'dropping' });
  });
});

describe('diagnostics_channel: limiters and the shedder', () => {
  it('bulwark:limit:refused: a TokenLimiter refusal carries no key; allow and decide both publish', () => {
    const seen = record(diagnosticsChannels.limitRefused);
    const clock = new ManualClock();
    const l = new TokenLimiter({ rate: 1, burst: 2, clock });
    assert.equal(l.allow(), true);
    assert.equal(l.allow(), true);
    assert.equal(l.allow(), false);
    assert.equal(l.decide().allowed, false);
    assert.equal(l.allow(5), false, 'n > burst is a refusal too');
    clock.advance(1_000);
    assert.equal(l.allow(), true);
    assert.deepEqual(seen, [
      { limiter: 'TokenLimiter', source: l, key: undefined, n: 1, mode: undefined },
      { limiter: 'TokenLimiter', source: l, key: undefined, n: 1, mode: undefined },
      { limiter: 'TokenLimiter', source: l, key: undefined, n: 5, mode: undefined },
    ]);
  });

  it('bulwark:limit:refused: a KeyedLimiter refusal is one message with the key (its bucket stays silent)', () => {
    const seen = record(diagnosticsChannels.limitRefused);
    const clock = new ManualClock();
    const keyed = new KeyedLimiter({ rate: 1, burst: 1, clock });
    assert.equal(keyed.allow('alice'), true);
    assert.equal(keyed.allow('alice'), false);
    assert.equal(keyed.decide('alice', 1).allowed, false);
    assert.equal(keyed.allow('bob'), true);
    assert.deepEqual(seen, [
      { limiter: 'KeyedLimiter', source: keyed, key: 'alice', n: 1, mode: undefined },
      { limiter: 'KeyedLimiter', source: keyed, key: 'alice', n: 1, mode: undefined },
    ]);
    // its buckets are its own: one taken out and used directly stays silent too
    assert.equal(keyed.get('alice').allow(), false);
    assert.equal(seen.length, 2);
    // a KeyedLimiter whose `create` makes TokenLimiters owns them the same way
    const made = new KeyedLimiter({ create: () => new TokenLimiter({ rate: 1, burst: 1, clock }) });
    made.allow('carol');
    assert.equal(made.allow('carol'), false);
    assert.deepEqual(
      seen.slice(2).map((m) => [m.limiter, m.key]),
      [['KeyedLimiter', 'carol']],
    );
  });

  it('bulwark:limit:refused: a PeriodLimiter refuses over its quota from allow, decide and answer', () => {
    const seen = record(diagnosticsChannels.limitRefused);
    const clock = new ManualClock();
    const p = new PeriodLimiter({ periodMs: 1_000, quota: 2, clock });
    assert.equal(p.answer('k'), 'allowed');
    assert.equal(p.answer('k'), 'hit-quota');
    assert.equal(p.answer('k'), 'over-quota');
    assert.equal(p.allow('k', 3), false);
    assert.equal(p.decide('k').allowed, false);
    assert.deepEqual(
      seen.map((m) => [m.limiter, m.key, m.n]),
      [
        ['PeriodLimiter', 'k', 1],
        ['PeriodLimiter', 'k', 3],
        ['PeriodLimiter', 'k', 1],
      ],
    );
  });

  it('bulwark:limit:refused: a Redis limiter deciding in rescue publishes one message, mode rescue (its rescue limiter stays silent)', async () => {
    const seen = record(diagnosticsChannels.limitRefused);
    const clock = new ManualClock();
    // Nothing listens on this port: the limiter starts in rescue and decides in process.
    const lim = new RedisTokenLimiter({ redis: `redis://127.0.0.1:${await freePort()}`, prefix: 'd:', rate: 1, burst: 1, clock, probeIntervalMs: 60_000 });
    try {
      assert.equal(lim.mode, 'rescue');
      assert.equal(await lim.take('k'), true);
      assert.equal(await lim.take('k'), false);
      assert.equal((await lim.takeDecision('k')).allowed, false);
      assert.equal(await lim.take('k', 2), false);
      assert.deepEqual(seen, [
        { limiter: 'RedisTokenLimiter', source: lim, key: 'k', n: 1, mode: 'rescue' },
        { limiter: 'RedisTokenLimiter', source: lim, key: 'k', n: 1, mode: 'rescue' },
        { limiter: 'RedisTokenLimiter', source: lim, key: 'k', n: 2, mode: 'rescue' },
      ]);
    } finally {
      await lim.close();
    }
  });

  it('bulwark:shedder:drop: one message per shed call, with in-flight numbers', () => {
    const seen = record(diagnosticsChannels.shedderDrop);
    const clock = new ManualClock(1_000);
    let overloaded = false;
    const shedder = new AdaptiveShedder({ clock, load: () => ({ utilization: overloaded ? 0.99 : 0.1, delayP99Ms: 1 }) });
    // history: 50 calls per 100 ms bucket taking 20 ms → at most 10 in flight
    for (let b = 0; b < 20; b++) {
      const ts = Array.from({ length: 50 }, () => shedder.admit());
      clock.advance(20);
      for (const t of ts) t.success();
      clock.advance(80);
    }
    overloaded = true;
    const held = Array.from({ length: 40 }, () => shedder.admit());
    for (const t of held.splice(0, 5)) t.failure();
    let dropped = 0;
    for (let i = 0; i < 3; i++) {
      try {
        held.push(shedder.admit());
      } catch (err) {
        assert.ok(err instanceof OverloadedError);
        dropped++;
      }
    }
    assert.equal(dropped, 3);
    assert.equal(seen.length, 3);
    assert.equal(seen[0]!.source, shedder);
    assert.equal(seen[0]!.inFlight, 35);
    assert.equal(typeof seen[0]!.avgInFlight, 'number');
    assert.ok((seen[0]!.avgInFlight as number) > 10);
  });
});

describe('diagnostics_channel: registry and balancer', () => {
  it('bulwark:registry:change: a lookup, then each watch event, with the new instance list', async () => {
    const seen = record(diagnosticsChannels.registryChange);
    const registry = new MemoryRegistry();
    await registry.register({ id: 'a', name: 'payments', address: '127.0.0.1:9001' });
    const cache = new RegistryCache(registry, { clock: new ManualClock() });
    try {
      await cache.getService('payments');
      assert.equal(seen.length, 1);
      assert.equal(seen[0]!.cause, 'lookup');
      assert.equal(seen[0]!.service, 'payments');
      assert.equal(seen[0]!.source, cache);
      assert.deepEqual(
        (seen[0]!.instances as { id: string }[]).map((i) => i.id),
        ['a'],
      );
      await registry.register({ id: 'b', name: 'payments', address: '127.0.0.1:9002' });
      await waitFor('the watch event', () => seen.length === 2, 5_000);
      await registry.deregister({ id: 'a', name: 'payments', address: '127.0.0.1:9001' });
      await waitFor('the watch event', () => seen.length === 3, 5_000);
      assert.deepEqual(
        seen.slice(1).map((m) => [m.cause, (m.instances as { id: string }[]).map((i) => i.id)]),
        [
          ['watch', ['a', 'b']],
          ['watch', ['b']],
        ],
      );
    } finally {
      await cache.close();
      await registry.close();
    }
  });

  it('bulwark:balancer:health: an ejection and its return (outlier detection), with the service', async () => {
    const seen = record(diagnosticsChannels.balancerHealth);
    const clock = new ManualClock();
    const instances = [0, 1, 2].map((i) => ({ id: `i${i}`, name: 'svc', address: `127.0.0.1:${9000 + i}` }));
    const b = new Balancer({ instances, strategy: 'round-robin', clock });
    for (let i = 0; i < 5; i++) b.report(instances[1]!, { ok: false, latencyMs: 1 });
    clock.advance(30_000);
    b.pick();
    assert.deepEqual(
      seen.map((m) => [m.type, m.id]),
      [
        ['ejected', 'i1'],
        ['returned', 'i1'],
      ],
    );
    assert.equal(seen[0]!.untilMs, 30_000);
    assert.equal(seen[0]!.service, undefined, 'a balancer over a fixed list follows no service');
    await b.close();
  });
});

describe('diagnostics_channel: client', () => {
  async function setup() {
    const registry = new MemoryRegistry();
    for (const id of ['a', 'b']) await registry.register({ id, name: 'svc', address: `127.0.0.1:${id === 'a' ? 9001 : 9002}` });
    const client = new ResilientClient({ registry, balancer: { strategy: 'round-robin' }, timeoutMs: 0 });
    return {
      client,
      close: async () => {
        await client.close();
        await registry.close();
      },
    };
  }

  it('bulwark:client:call traces a call (start, end, asyncStart, asyncEnd; error when it fails) and bulwark:client:attempt reports each attempt', async () => {
    const { client, close } = await setup();
    try {
      await client.call('svc', () => 0); // open the service first: its lookup is not the point here
      const calls = traced<{ service: string; key?: string; result?: unknown; error?: unknown }>(diagnosticsChannels.clientCall);
      const attempts = record(diagnosticsChannels.clientAttempt);
      // fails on the first instance it tries, answers on the other: one call, two attempts
      let first: string | undefined;
      const answer = await client.call('svc', (instance) => {
        first ??= instance.id;
        if (instance.id === first) throw new Error(`${first} is down`);
        return `from ${instance.id}`;
      });
      const other = first === 'a' ? 'b' : 'a';
      assert.equal(answer, `from ${other}`);
      assert.deepEqual(
        calls.map(([e]) => e),
        ['start', 'end', 'asyncStart', 'asyncEnd'],
      );
      const ctx = calls[0]![1];
      assert.ok(
        calls.every(([, c]) => c === ctx),
        'one context object per call',
      );
      assert.equal(ctx.service, 'svc');
      assert.equal(ctx.result, `from ${other}`);
      assert.deepEqual(
        attempts.map((m) => [m.service, (m.instance as { id: string }).id, m.outcome]),
        [
          ['svc', first, 'error'],
          ['svc', other, 'ok'],
        ],
      );
      assert.equal((attempts[0]!.error as Error).message, `${first} is down`);
      assert.equal(typeof attempts[1]!.latencyMs, 'number');

      calls.length = 0;
      await assert.rejects(client.call('svc', () => Promise.reject(new Error('all down')), { retry: false, key: 'user-7' }));
      assert.deepEqual(
        calls.map(([e]) => e),
        ['start', 'end', 'error', 'asyncStart', 'asyncEnd'],
      );
      assert.equal(calls[0]![1].key, 'user-7');
      assert.equal((calls[2]![1].error as Error).message, 'all down');
    } finally {
      await close();
    }
  });

  it("a store bound to the call's start channel is current in its attempts (how OpenTelemetry makes a span current)", async () => {
    const { client, close } = await setup();
    const als = new AsyncLocalStorage<string>();
    const start = tracingChannel(diagnosticsChannels.clientCall).start;
    start.bindStore(als, (ctx) => `span of ${(ctx as { service: string }).service}`);
    undo.push(() => start.unbindStore(als));
    try {
      const stores: (string | undefined)[] = [];
      subscribe(diagnosticsChannels.clientAttempt, record0);
      undo.push(() => unsubscribe(diagnosticsChannels.clientAttempt, record0));
      function record0(): void {
        stores.push(als.getStore());
      }
      let inTask: string | undefined;
      await client.call('svc', async () => {
        inTask = als.getStore();
        return 1;
      });
      assert.equal(inTask, 'span of svc');
      assert.deepEqual(stores, ['span of svc']);
      assert.equal(als.getStore(), undefined, 'the store is left when the call ends');
    } finally {
      await close();
    }
  });
});

describe('diagnostics_channel: cache and http', () => {
  it('bulwark:cache:load traces a getter load once per key (a hit publishes nothing), with group, key and source', async () => {
    const seen = traced<{ group: string; key: string; source: string; result?: unknown; error?: unknown }>(diagnosticsChannels.cacheLoad);
    const g = new Group({
      name: 'users',
      cacheBytes: 1 << 20,
      getter: (key) => (key === 'missing' ? Promise.reject(new Error('origin down')) : `value of ${key}`),
    });
    assert.equal((await g.get('u1')).toString(), 'value of u1');
    await g.get('u1');
    assert.deepEqual(
      seen.map(([e]) => e),
      ['start', 'end', 'asyncStart', 'asyncEnd'],
    );
    assert.deepEqual({ ...seen[0]![1], result: undefined }, { group: 'users', key: 'u1', source: 'local', result: undefined });
    assert.deepEqual(seen[3]![1].result, { value: 'value of u1', ttlMs: undefined });
    seen.length = 0;
    await assert.rejects(g.get('missing'));
    assert.deepEqual(
      seen.map(([e]) => e),
      ['start', 'end', 'error', 'asyncStart', 'asyncEnd'],
    );
  });

  it('bulwark:cache:load traces a load from the owning peer, with its URL', async () => {
    const seen = traced<{ source: string; peer?: string; key: string }>(diagnosticsChannels.cacheLoad);
    const peer: PeerGetter = {
      url: 'http://127.0.0.1:9100',
      get: async (_group, key) => ({ value: `peer value of ${key}`, ttlMs: 0, notFound: false }),
      remove: async () => true,
    };
    const peers: PeerPicker = { pickPeer: () => peer, peers: () => [peer] };
    const g = new Group({ name: 'users', cacheBytes: 1 << 20, getter: () => 'local', peers, hotCacheSample: 0 });
    assert.equal((await g.get('u2')).toString(), 'peer value of u2');
    assert.deepEqual(
      seen.map(([e, c]) => [e, c.source, c.peer, c.key]),
      [
        ['start', 'peer', 'http://127.0.0.1:9100', 'u2'],
        ['end', 'peer', 'http://127.0.0.1:9100', 'u2'],
        ['asyncStart', 'peer', 'http://127.0.0.1:9100', 'u2'],
        ['asyncEnd', 'peer', 'http://127.0.0.1:9100', 'u2'],
      ],
    );
  });

  it("bulwark:http:refused: a refused request, next to the limiter's own refusal", () => {
    const http = record(diagnosticsChannels.httpRefused);
    const limits = record(diagnosticsChannels.limitRefused);
    const clock = new ManualClock();
    const limiter = new KeyedLimiter({ rate: 1, burst: 1, clock });
    const guard = new HttpGuard({ limiter });
    const req = { headers: {}, socket: { remoteAddress: '10.1.2.3' }, url: '/' } as unknown as IncomingMessage;
    const res = () =>
      Object.assign(new EventEmitter(), { statusCode: 200, headersSent: false, setHeader() {}, writableFinished: false }) as unknown as ServerResponse;
    assert.equal(guard.check(req, res()), undefined);
    assert.notEqual(guard.check(req, res()), undefined);
    assert.equal(http.length, 1);
    assert.equal(http[0]!.status, 429);
    assert.equal(http[0]!.code, 'ERR_RATE_LIMITED');
    assert.equal(http[0]!.key, '10.1.2.3');
    assert.deepEqual(
      limits.map((m) => [m.limiter, m.key]),
      [['KeyedLimiter', '10.1.2.3']],
    );
  });
});

describe('diagnostics_channel: subscribers', () => {
  it('a subscriber that throws breaks neither the component nor the other subscribers; Node re-throws its error on the next tick', async () => {
    const thrown: unknown[] = [];
    process.setUncaughtExceptionCaptureCallback((err) => thrown.push(err));
    try {
      const bad = () => {
        throw new Error('subscriber bug');
      };
      subscribe(diagnosticsChannels.breakerState, bad);
      undo.push(() => unsubscribe(diagnosticsChannels.breakerState, bad));
      const good = record(diagnosticsChannels.breakerState);
      const b = new CircuitBreaker({ name: 'x', minimumCalls: 1, clock: new ManualClock() });
      await assert.rejects(
        b.execute(() => Promise.reject(new Error('down'))),
        /down/,
      );
      assert.equal(b.state, 'open', 'the transition happened');
      assert.equal(good.length, 1, 'the next subscriber got the message');
      assert.throws(() => b.admit(), BreakerOpenError);
      await new Promise((r) => setImmediate(r));
      assert.equal(thrown.length, 1);
      assert.equal((thrown[0] as Error).message, 'subscriber bug');
    } finally {
      process.setUncaughtExceptionCaptureCallback(null);
    }
  });

  it('nothing is built or published while nobody listens (the components run with no subscriber)', async () => {
    for (const name of Object.values(diagnosticsChannels)) {
      const { hasSubscribers } = await import('node:diagnostics_channel');
      assert.equal(hasSubscribers(name), false, `${name} has no subscriber here`);
    }
    const b = new CircuitBreaker({ name: 'quiet', minimumCalls: 1, clock: new ManualClock() });
    await b.execute(() => Promise.reject(new Error('down'))).catch(() => {});
    assert.equal(b.state, 'open');
  });

  it('docs/diagnostics.md lists every channel, and only those', () => {
    const page = readFileSync(new URL('../docs/diagnostics.md', import.meta.url), 'utf8');
    const documented = new Set([...page.matchAll(/^### `(bulwark:[a-z]+:[a-z]+)`/gm)].map((m) => m[1]!));
    assert.deepEqual([...documented].sort(), Object.values(diagnosticsChannels).sort());
  });
});
