import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { AbortedError, ClosedError, NotFoundError, RegistryUnavailableError } from '../core/errors.js';
import { RegistryCache } from './registry-cache.js';
import type { Registry, RegistryEvent, ServiceInstance } from './types.js';
import { ManualClock } from '../core/clock.js';
import type { WatchOptions } from './types.js';
import { FakeRegistry, flush, ids, inst, setup } from '../../test/support/registry-cache-fixtures.js';
describe('RegistryCache: the seven behaviours of go-micro registry/cache', () => {
  it('stampede: 10 concurrent lookups make 1 registry call', async () => {
    const { fake, cache } = setup();
    fake.hold = true;
    const ps = Array.from({ length: 10 }, () => cache.getService('api'));
    await flush();
    fake.release();
    for (const l of await Promise.all(ps)) assert.deepEqual(ids(l), ['a1', 'a2']);
    assert.equal(fake.calls, 1);
    await cache.close();
  });

  it('singleflight with error: 10 concurrent lookups against a failing registry make 1 call and share the error', async () => {
    const { fake, cache } = setup();
    fake.fail = new Error('etcd down');
    fake.hold = true;
    const ps = Array.from({ length: 10 }, () => cache.getService('api'));
    await flush();
    fake.release();
    for (const p of ps) await assert.rejects(p, RegistryUnavailableError);
    assert.equal(fake.calls, 1);
    await cache.close();
  });

  it('services() tells an entry past its TTL (listed again at the next lookup) from one the registry failed to refresh (failing), and back', async () => {
    const { clock, fake, cache } = setup();
    await cache.getService('api');
    const entry = () => cache.services().find((e) => e.service === 'api')!;
    assert.deepEqual({ fresh: entry().fresh, failing: entry().failing, staleForMs: entry().staleForMs }, { fresh: true, failing: false, staleForMs: 0 });
    clock.advance(60_001);
    assert.deepEqual({ fresh: entry().fresh, failing: entry().failing }, { fresh: false, failing: false });
    fake.fail = new Error('etcd down');
    await cache.getService('api'); // answered stale
    assert.deepEqual({ fresh: entry().fresh, failing: entry().failing }, { fresh: false, failing: true });
    assert.ok(entry().staleForMs >= 1);
    fake.fail = undefined;
    clock.advance(60_000); // past the retry window
    await cache.getService('api');
    assert.deepEqual({ fresh: entry().fresh, failing: entry().failing }, { fresh: true, failing: false });
    await cache.close();
  });

  it('stale on error: an expired entry is answered when the registry fails', async () => {
    const { clock, fake, cache } = setup();
    await cache.getService('api');
    clock.advance(60_001);
    fake.fail = new Error('etcd down');
    assert.deepEqual(ids(await cache.getService('api')), ['a1', 'a2']);
    assert.equal(fake.calls, 2);
    assert.equal(cache.stats().stale, 1);
    await cache.close();
  });

  it('penetration: 50 concurrent lookups inside the throttle window make 0 extra calls and get the stale entry', async () => {
    const { clock, fake, cache } = setup();
    await cache.getService('api');
    clock.advance(60_001);
    fake.fail = new Error('etcd down');
    await cache.getService('api'); // the attempt that opens the window
    const before = fake.calls;
    const got = await Promise.all(Array.from({ length: 50 }, () => cache.getService('api')));
    assert.ok(got.every((l) => l.length === 2));
    assert.equal(fake.calls, before);
    assert.equal(cache.stats().throttled, 50);
    await cache.close();
  });

  it('throttling without stale: fails fast inside the window, asks again after it', async () => {
    const { clock, fake, cache } = setup();
    fake.fail = new Error('etcd down');
    await assert.rejects(cache.getService('api'), RegistryUnavailableError);
    await assert.rejects(cache.getService('api'), (e: unknown) => e instanceof RegistryUnavailableError && /throttled/.test(e.message));
    assert.equal(fake.calls, 1);
    clock.advance(5_000);
    await assert.rejects(cache.getService('api'), RegistryUnavailableError);
    assert.equal(fake.calls, 2);
    await cache.close();
  });

  it('several concurrent lookups while throttled without stale all fail fast with no call', async () => {
    const { fake, cache } = setup();
    fake.fail = new Error('etcd down');
    await assert.rejects(cache.getService('api'));
    const rs = await Promise.allSettled(Array.from({ length: 20 }, () => cache.getService('api')));
    assert.ok(rs.every((r) => r.status === 'rejected' && r.reason instanceof RegistryUnavailableError));
    assert.equal(fake.calls, 1);
    await cache.close();
  });

  it('success clears the throttle: after a successful lookup the next miss asks the registry at once', async () => {
    const { clock, fake, cache } = setup({ ttlMs: 1_000 });
    fake.fail = new Error('etcd down');
    await assert.rejects(cache.getService('api'));
    clock.advance(5_000);
    fake.fail = undefined;
    assert.equal((await cache.getService('api')).length, 2);
    clock.advance(1_001); // expired, well inside 5 s of the last attempt
    fake.services.set('api', [inst('a3')]);
    assert.deepEqual(ids(await cache.getService('api')), ['a3']);
    assert.equal(fake.calls, 3);
    await cache.close();
  });
});

describe('RegistryCache: registry down, rolling release, no cache', () => {
  it('registry down with a stale entry: callers get the stale list, and the registry is not asked again inside the window', async () => {
    const { clock, fake, cache } = setup({ minRetryIntervalMs: 10_000 });
    await cache.getService('api');
    clock.advance(120_000);
    fake.fail = new Error('etcd down');
    assert.equal((await cache.getService('api')).length, 2);
    assert.equal((await cache.getService('api')).length, 2);
    assert.equal(fake.calls, 2);
    await cache.close();
  });

  it('rolling release: 1 000 callers at expiry make one registry call', async () => {
    const { clock, fake, cache } = setup();
    await cache.getService('api');
    clock.advance(60_001);
    fake.hold = true;
    fake.services.set('api', [inst('b1'), inst('b2')]);
    const ps = Array.from({ length: 1000 }, () => cache.getService('api'));
    await flush();
    fake.release();
    const got = await Promise.all(ps);
    assert.ok(got.every((l) => ids(l).join() === 'b1,b2'));
    assert.equal(fake.calls, 2);
    await cache.close();
  });

  it('no cache and registry down: one call, then fast failures until the window passes, then one call again', async () => {
    const { clock, fake, cache } = setup({ minRetryIntervalMs: 10_000 });
    fake.fail = new Error('etcd down');
    await assert.rejects(cache.getService('new-service'), RegistryUnavailableError);
    await assert.rejects(cache.getService('new-service'), RegistryUnavailableError);
    assert.equal(fake.calls, 1);
    clock.advance(10_000);
    await assert.rejects(cache.getService('new-service'), RegistryUnavailableError);
    assert.equal(fake.calls, 2);
    await cache.close();
  });
});

describe('RegistryCache: what go-micro users ran into', () => {
  it('tells "no instances" (NotFoundError) from "could not ask" (RegistryUnavailableError), also while throttled', async () => {
    const { fake, cache } = setup();
    await assert.rejects(cache.getService('ghost'), NotFoundError);
    await assert.rejects(cache.getService('ghost'), NotFoundError);
    assert.equal(fake.calls, 1);
    fake.fail = new Error('down');
    await assert.rejects(cache.getService('other'), RegistryUnavailableError);
    await assert.rejects(cache.getService('other'), RegistryUnavailableError);
    await cache.close();
  });

  it('callers arriving while the first lookup is in flight join it, even once it has started the window (go-micro #2821)', async () => {
    const { fake, cache } = setup();
    fake.hold = true;
    const first = cache.getService('api');
    await flush();
    const late = Array.from({ length: 5 }, () => cache.getService('api'));
    fake.release();
    assert.equal((await first).length, 2);
    for (const l of await Promise.all(late)) assert.equal(l.length, 2);
    assert.equal(fake.calls, 1);
    await cache.close();
  });

  it('never replaces a non-empty list with an empty answer or an error; a confirmed delete event does', async () => {
    const { clock, fake, cache } = setup({ minRetryIntervalMs: 0 });
    await cache.getService('api');
    clock.advance(60_001);
    fake.services.set('api', []);
    assert.equal((await cache.getService('api')).length, 2);
    fake.fail = new Error('down');
    assert.equal((await cache.getService('api')).length, 2);
    fake.emit({ type: 'delete', instance: inst('a1') });
    fake.emit({ type: 'delete', instance: inst('a2') });
    await flush();
    fake.fail = undefined;
    await assert.rejects(cache.getService('api'), NotFoundError);
    await cache.close();
  });

  it('hands out frozen results: a caller that mutates them cannot corrupt the cache', async () => {
    const { cache } = setup();
    const got = await cache.getService('api');
    // @ts-expect-error the answer is typed read-only: sorting it in place does not compile
    assert.throws(() => got.sort(), TypeError);
    assert.throws(() => (got as ServiceInstance[]).push(inst('evil')), TypeError);
    assert.throws(() => ((got[0] as { address: string }).address = 'evil:1'), TypeError);
    assert.equal((await cache.getService('api')).length, 2);
    await cache.close();
  });

  it('keeps the objects of unchanged instances across listings, so a re-list changes only what changed', async () => {
    const { clock, fake, cache } = setup();
    const first = await cache.getService('api');
    // the registry parses new (equal) objects on every listing, and one instance changed
    fake.services.set(
      'api',
      fake.services.get('api')!.map((x) => (x.id === 'a2' ? { ...x, metadata: { weight: '5' } } : { ...x })),
    );
    clock.advance(60_001);
    const second = await cache.getService('api');
    assert.equal(fake.calls, 2);
    assert.notEqual(second, first, 'a new list');
    assert.equal(second[0], first[0], 'the unchanged instance is the same object');
    assert.notEqual(second[1], first[1]);
    assert.equal(second[1]!.metadata?.weight, '5');
    assert.ok(Object.isFrozen(second[1]));
    await cache.close();
  });

  it('applies create, update and delete events and keeps the entry fresh', async () => {
    const { clock, fake, cache } = setup();
    const seen: string[] = [];
    cache.onChange((c) => seen.push(`${c.service}:${ids(c.instances).join(',')}`));
    await cache.getService('api');
    fake.emit({ type: 'create', instance: inst('a3') });
    fake.emit({ type: 'update', instance: { ...inst('a1'), address: '127.0.0.1:1' } });
    fake.emit({ type: 'delete', instance: inst('a2') });
    await flush();
    clock.advance(59_000);
    const got = await cache.getService('api');
    assert.deepEqual(ids(got), ['a1', 'a3']);
    assert.equal(got.find((i) => i.id === 'a1')!.address, '127.0.0.1:1');
    assert.equal(fake.calls, 1);
    assert.equal(cache.stats().watchEvents, 3);
    assert.deepEqual(seen, ['api:a1,a2', 'api:a1,a2,a3', 'api:a1,a2,a3', 'api:a1,a3']);
    await cache.close();
  });

  const during: Array<[string, RegistryEvent, string[], string]> = [
    ['create', { type: 'create', instance: inst('a3') }, ['a1', 'a2', 'a3'], '127.0.0.1:8002'],
    ['update', { type: 'update', instance: { ...inst('a1'), address: '127.0.0.1:1' } }, ['a1', 'a2'], '127.0.0.1:1'],
    ['delete', { type: 'delete', instance: inst('a2') }, ['a1'], '127.0.0.1:8002'],
  ];
  for (const [what, event, want, a1Address] of during) {
    it(`keeps ${what === 'update' ? 'an' : 'a'} ${what} event that arrives while a slower lookup is answering a listing taken before it`, async () => {
      const { clock, fake, cache } = setup();
      await cache.getService('api');
      clock.advance(60_001); // expired: the next lookup asks the registry
      fake.hold = true;
      fake.snapshotAtCall = true; // its answer is the listing from before the event
      const pending = cache.getService('api');
      await flush();
      assert.equal(fake.calls, 2);
      fake.emit(event);
      await flush();
      fake.release();
      const got = await pending;
      assert.deepEqual(ids(got), want, 'the lookup answers the listing with the event applied');
      const later = await cache.getService('api');
      assert.deepEqual(ids(later), want, 'the cache keeps what the event built');
      assert.equal(later.find((i) => i.id === 'a1')!.address, a1Address);
      assert.equal(fake.calls, 2);
      await cache.close();
    });
  }

  it('with a registry that answers listings at a revision, replays exactly the events the listing does not reflect', async () => {
    const { clock, fake, cache } = setup();
    // the listing is read at revision 10, after a3 was created (rev 9) and deleted again (rev 10)
    const revision = 10;
    (fake as Registry).getServiceListing = async (name) => ({ instances: await fake.getService(name), revision });
    await cache.getService('api');
    clock.advance(60_001);
    fake.hold = true;
    fake.snapshotAtCall = true;
    const pending = cache.getService('api');
    await flush();
    fake.emit({ type: 'create', instance: inst('a3'), revision: 9 }); // already reflected: not replayed
    fake.emit({ type: 'create', instance: inst('a4'), revision: 11 }); // newer: replayed
    await flush();
    fake.release();
    assert.deepEqual(ids(await pending), ['a1', 'a2', 'a4']);
    await cache.close();
  });

  it('keeps a create event that arrives while the first lookup of a service is answering "no instances"', async () => {
    const { fake, cache } = setup();
    fake.hold = true;
    fake.snapshotAtCall = true;
    const pending = cache.getService('new');
    await flush();
    fake.emit({ type: 'create', instance: inst('n1', 'new') });
    await flush();
    fake.release();
    assert.deepEqual(ids(await pending), ['n1']);
    assert.deepEqual(ids(await cache.getService('new')), ['n1']);
    await cache.close();
  });

  it('starts a failed watch again with backoff, and looks the service up once it is back', async () => {
    const { clock, fake, cache } = setup({ watchBackoff: { initialMs: 50, maxMs: 100, jitter: 'none' } });
    await cache.getService('api');
    assert.equal(fake.watchCalls, 1);
    fake.services.set('api', [inst('z9')]);
    fake.failWatches(new Error('stream broke'));
    await clock.advanceAsync(49);
    assert.equal(fake.watchCalls, 1, 'not before the backoff');
    await clock.advanceAsync(1);
    await flush();
    assert.equal(fake.watchCalls, 2);
    assert.equal(cache.stats().watchReconnects, 1);
    assert.equal(fake.calls, 2);
    assert.deepEqual(ids(await cache.getService('api')), ['z9']);
    await cache.close();
  });

  it('drops the entry and the watch of a service nobody asked for within idleMs', async () => {
    const { clock, fake, cache } = setup({ idleMs: 30_000 });
    await cache.getService('api');
    assert.equal(fake.watches.size, 1);
    clock.advance(20_000);
    await cache.getService('api');
    clock.advance(20_000);
    cache.sweep();
    assert.equal(cache.stats().services, 1);
    clock.advance(10_000);
    cache.sweep();
    assert.equal(cache.stats().services, 0);
    await flush();
    assert.equal(fake.watches.size, 0);
    await cache.close();
  });

  it('keeps at most maxServices entries, dropping the least recently used', async () => {
    const { clock, fake, cache } = setup({ maxServices: 2 });
    for (const n of ['s1', 's2', 's3']) {
      fake.services.set(n, [inst('x', n)]);
      await cache.getService(n);
      clock.advance(1);
    }
    assert.equal(cache.stats().services, 2);
    assert.equal(cache.peek('s1'), undefined);
    assert.ok(cache.peek('s3'));
    await cache.close();
  });

  it('counts hits, misses, stale answers, registry calls and throttled answers', async () => {
    const { clock, fake, cache } = setup();
    await cache.getService('api');
    await cache.getService('api');
    clock.advance(60_001);
    fake.fail = new Error('down');
    await cache.getService('api');
    await cache.getService('api');
    const s = cache.stats();
    assert.deepEqual(
      { hits: s.hits, misses: s.misses, stale: s.stale, registryCalls: s.registryCalls, throttled: s.throttled, services: s.services },
      { hits: 1, misses: 3, stale: 2, registryCalls: 2, throttled: 1, services: 1 },
    );
    await cache.close();
  });

  it('rejects bad names with a TypeError, and lookups after close with ClosedError', async () => {
    const { cache } = setup();
    await assert.rejects(cache.getService('a b'), TypeError);
    await cache.close();
    await assert.rejects(cache.getService('api'), ClosedError);
  });

  it('validates its options', () => {
    const fake = new FakeRegistry();
    assert.throws(() => new RegistryCache(fake, { ttlMs: 0 }), /ttlMs/);
    assert.throws(() => new RegistryCache(fake, { minRetryIntervalMs: -1 }), /minRetryIntervalMs/);
    assert.throws(() => new RegistryCache(fake, { snapshotPath: '' }), /snapshotPath/);
    assert.throws(() => new RegistryCache({} as Registry), /registry/);
    assert.throws(() => new RegistryCache(fake, { closeRegistry: 'yes' as unknown as boolean }), /closeRegistry/);
  });

  it('getService with a signal: a hit answers, an aborted signal rejects AbortedError, and aborting a miss leaves the lookup to the others', async () => {
    const { fake, cache } = setup();
    await cache.getService('api');
    const ac = new AbortController();
    assert.equal((await cache.getService('api', { signal: ac.signal })).length, 2);
    await assert.rejects(cache.getService('api', { signal: AbortSignal.abort() }), AbortedError);
    fake.services.set('other', [inst('o1', 'other')]);
    fake.hold = true;
    const mine = cache.getService('other', { signal: ac.signal });
    const theirs = cache.getService('other');
    await flush();
    ac.abort();
    await assert.rejects(mine, AbortedError);
    fake.release();
    assert.deepEqual(ids(await theirs), ['o1']);
    assert.equal(fake.calls, 2);
    await cache[Symbol.asyncDispose]();
  });
});

describe('RegistryCache: every timer on its clock', () => {
  it('a lookup the registry never answers times out on the cache clock (30 s of ManualClock), not on real time', async () => {
    const { clock, fake, cache } = setup({ watch: false });
    fake.hold = true; // never released: the registry call hangs
    const lookup = cache.getService('api');
    let settled: unknown = 'pending';
    lookup.then(
      (v) => (settled = v),
      (err: unknown) => (settled = err),
    );
    await flush();
    await clock.advanceAsync(29_999);
    assert.equal(settled, 'pending');
    await clock.advanceAsync(1);
    await flush();
    assert.ok((settled as unknown) instanceof Error && (settled as { code?: string }).code === 'ERR_TIMEOUT', `got ${String(settled)}`);
    fake.release();
    await cache.close();
  });
});

describe('RegistryCache: a cold lookup never waits for the watch', () => {
  /** A registry written to the documented interface that never calls the optional `onReady`. */
  class SilentRegistry extends FakeRegistry {
    override watch(options?: WatchOptions): AsyncIterable<RegistryEvent> {
      return super.watch({ ...options, onReady: undefined });
    }
  }
  /** A registry whose watch becomes ready when the test says so. */
  class LateRegistry extends FakeRegistry {
    ready: Array<() => void> = [];
    override watch(options?: WatchOptions): AsyncIterable<RegistryEvent> {
      if (options?.onReady !== undefined) this.ready.push(options.onReady);
      return super.watch({ ...options, onReady: undefined });
    }
  }

  it('a registry that never calls onReady: the lookup answers at once, and is listed again once the watch counts as established', async () => {
    const clock = new ManualClock(1_000_000);
    const fake = new SilentRegistry();
    fake.services.set('api', [inst('a1'), inst('a2')]);
    const cache = new RegistryCache(fake, { clock, watchBackoff: { initialMs: 1, maxMs: 2, jitter: 'none' } });
    let got: readonly ServiceInstance[] | undefined;
    void cache.getService('api').then((l) => (got = l));
    await flush();
    assert.deepEqual(got && ids(got), ['a1', 'a2'], 'answered without any clock time passing');
    assert.equal(fake.calls, 1);
    // a change the watch was not yet there to see: the listing after the watch counts as established brings it
    fake.services.set('api', [inst('a1'), inst('a2'), inst('a3')]);
    await clock.advanceAsync(1_000);
    await flush();
    assert.equal(fake.calls, 2);
    assert.deepEqual(ids(await cache.getService('api')), ['a1', 'a2', 'a3']);
    await cache.close();
  });

  it('a watch ready only after the listing: the lookup answers at once, and the service is listed again at onReady', async () => {
    const clock = new ManualClock(1_000_000);
    const fake = new LateRegistry();
    fake.services.set('api', [inst('a1')]);
    const cache = new RegistryCache(fake, { clock, watchBackoff: { initialMs: 1, maxMs: 2, jitter: 'none' } });
    assert.deepEqual(ids(await cache.getService('api')), ['a1']);
    assert.equal(fake.calls, 1);
    fake.services.set('api', [inst('a1'), inst('a2')]); // between the listing and the watch: no event will say so
    for (const r of fake.ready.splice(0)) r();
    await flush();
    assert.equal(fake.calls, 2);
    assert.deepEqual(ids(await cache.getService('api')), ['a1', 'a2']);
    await cache.close();
  });

  it('a watch ready within the turn it was opened (a registry in memory) costs one listing only', async () => {
    const { fake, cache } = setup();
    await cache.getService('api');
    await flush();
    assert.equal(fake.calls, 1);
    await cache.close();
  });
});
