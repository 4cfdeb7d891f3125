import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { ClosedError, NotFoundError, RegistryUnavailableError } from '../core/errors.js';
import { flush, ids, inst, setup } from '../../test/support/registry-cache-fixtures.js';
import { followService } from './follow.js';

describe('RegistryCache: the wrapped registry and the pass-through methods', () => {
  it('leaves the wrapped registry open on close by default, and closes it (once) with closeRegistry', async () => {
    const { fake, cache } = setup();
    await cache.close();
    assert.equal(fake.closed, 0);
    const owned = setup({ closeRegistry: true });
    await owned.cache.getService('api');
    await owned.cache.close();
    await owned.cache.close();
    assert.equal(owned.fake.closed, 1);
  });

  it('passes register, deregister, listServices and a watch of every service to the wrapped registry, and refuses them after close', async () => {
    const { fake, cache } = setup();
    await cache.register(inst('a9'));
    assert.deepEqual(ids(fake.services.get('api')!), ['a1', 'a2', 'a9']);
    await cache.deregister(inst('a9'));
    assert.deepEqual(await cache.listServices(), ['api']);
    const seen: string[] = [];
    const watching = (async () => {
      for await (const e of cache.watch()) seen.push(`${e.type}:${e.instance.id}`);
    })();
    await flush();
    fake.emit({ type: 'create', instance: inst('a5') });
    await flush();
    await cache.close();
    await watching; // ended by close, although the wrapped registry stays open
    assert.deepEqual(seen, ['create:a5']);
    assert.equal(fake.watches.size, 0);
    await assert.rejects(cache.register(inst('a9')), ClosedError);
    await assert.rejects(cache.deregister(inst('a9')), ClosedError);
    await assert.rejects(cache.listServices(), ClosedError);
    for await (const _ of cache.watch()) assert.fail('a closed cache yields no events');
  });

  it('serves watches of one service from its own view: one registry watch however many watchers, relistings as events', async () => {
    const { clock, fake, cache } = setup();
    await cache.getService('api');
    const seen: string[][] = [[], []];
    let ready = 0;
    const watchers = seen.map((log) =>
      (async () => {
        for await (const e of cache.watch({ service: 'api', onReady: () => ready++ })) log.push(`${e.type}:${e.instance.id}`);
      })(),
    );
    await flush();
    assert.equal(ready, 2);
    assert.equal(fake.watchCalls, 1, 'one registry watch of the service');
    assert.equal(cache.stats().watchers, 2);
    fake.emit({ type: 'create', instance: inst('a5') });
    await flush();
    // the registry watch breaks; what changed meanwhile arrives as the difference of the new listing
    fake.services.set('api', [inst('a1'), { ...inst('a5'), address: '127.0.0.1:1' }, inst('a6')]);
    fake.failWatches(new Error('stream broke'));
    await clock.advanceAsync(2);
    await flush();
    for (const log of seen) assert.deepEqual(log, ['create:a5', 'update:a5', 'create:a6', 'delete:a2']);
    // a watched service is not dropped as idle
    clock.advance(700_000);
    cache.sweep();
    assert.equal(cache.stats().services, 1);
    await cache.close();
    await Promise.all(watchers);
    assert.equal(fake.watches.size, 0);
  });
});

describe('RegistryCache snapshot', () => {
  it('writes the last-known-good view atomically and serves it as stale at the next start while the registry is down', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bulwark-snap-'));
    try {
      const snapshotPath = join(dir, 'registry.json');
      const { cache } = setup({ snapshotPath, snapshotDebounceMs: 0 });
      await cache.getService('api');
      await cache.close();
      assert.match(readFileSync(snapshotPath, 'utf8'), /bulwark-registry-snapshot/);
      const { fake, cache: next } = setup({ snapshotPath });
      fake.fail = new Error('down at start');
      assert.deepEqual(ids(await next.getService('api')), ['a1', 'a2']);
      assert.equal(next.stats().stale, 1);
      assert.equal(fake.calls, 1);
      await next.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  for (const [what, content] of [
    ['corrupt', '{"format": "bulwark-registry-snap'],
    ['foreign', JSON.stringify({ hello: 'world' })],
    ['ill-shaped', JSON.stringify({ format: 'bulwark-registry-snapshot', version: 1, services: { api: [{ id: 'x', name: 'api', address: 'no port' }] } })],
  ]) {
    it(`ignores a ${what} snapshot with a warning`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'bulwark-snap-'));
      try {
        const snapshotPath = join(dir, 'registry.json');
        writeFileSync(snapshotPath, content!);
        const warnings: string[] = [];
        const { fake, cache } = setup({ snapshotPath, onWarning: (m) => warnings.push(m) });
        assert.equal(warnings.length, 1);
        fake.fail = new Error('down');
        await assert.rejects(cache.getService('api'), RegistryUnavailableError);
        await cache.close();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});

describe('RegistryCache against a model (fast-check)', () => {
  type Op =
    | { kind: 'register'; id: number }
    | { kind: 'deregister'; id: number }
    | { kind: 'fail'; on: boolean }
    | { kind: 'advance'; ms: number }
    | { kind: 'lookup' };
  const op: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ kind: fc.constant('register' as const), id: fc.integer({ min: 0, max: 4 }) }),
    fc.record({ kind: fc.constant('deregister' as const), id: fc.integer({ min: 0, max: 4 }) }),
    fc.record({ kind: fc.constant('fail' as const), on: fc.boolean() }),
    fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 70_000 }) }),
    fc.constant({ kind: 'lookup' as const }),
  );

  it("answers exactly the registry's instances (or fails with the right error), never an empty list", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 40 }), async (ops) => {
        const { clock, fake, cache } = setup();
        fake.services.clear();
        const current = () => (fake.services.get('api') ?? []).map((i) => i.id).sort();
        let everFailed = false;
        try {
          for (const o of ops) {
            if (o.kind === 'register' || o.kind === 'deregister') {
              const i = inst(`n${o.id}`);
              const existed = current().includes(i.id);
              if (o.kind === 'register') {
                await fake.register(i);
                if (!existed) fake.emit({ type: 'create', instance: i });
              } else if (existed) {
                await fake.deregister(i);
                fake.emit({ type: 'delete', instance: i });
              }
              await flush(2);
            } else if (o.kind === 'fail') {
              fake.fail = o.on ? new Error('down') : undefined;
              everFailed ||= o.on;
            } else if (o.kind === 'advance') clock.advance(o.ms);
            else {
              const want = current();
              try {
                const got = await cache.getService('api');
                assert.ok(got.length > 0, 'never an empty list');
                assert.deepEqual(ids(got), want);
              } catch (err) {
                if (err instanceof assert.AssertionError) throw err;
                if (err instanceof NotFoundError) assert.deepEqual(want, [], 'NotFoundError only when the service has none');
                else assert.ok(err instanceof RegistryUnavailableError && everFailed, `unexpected ${String(err)}`);
              }
            }
          }
        } finally {
          await cache.close();
        }
      }),
      { numRuns: 150 },
    );
  });
});

describe('RegistryCache: following a service through the cache (property)', () => {
  it("a follower of the cache ends with exactly the registry's instances after any changes, watch breaks and outages", async () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('register' as const), id: fc.integer({ min: 0, max: 5 }), v: fc.integer({ min: 0, max: 2 }) }),
      fc.record({ kind: fc.constant('deregister' as const), id: fc.integer({ min: 0, max: 5 }) }),
      fc.record({ kind: fc.constant('break' as const) }),
      fc.record({ kind: fc.constant('fail' as const), on: fc.boolean() }),
      fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 3_000 }) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 30 }), async (ops) => {
        const { clock, fake, cache } = setup({ ttlMs: 60_000, minRetryIntervalMs: 1_000 });
        const view = new Map<string, string | undefined>();
        const follower = followService(cache, 'api', {
          onList: (list) => {
            view.clear();
            for (const i of list) view.set(i.id, i.version);
          },
          onEvent: (e) => (e.type === 'delete' ? view.delete(e.instance.id) : view.set(e.instance.id, e.instance.version)),
          clock,
          random: () => 0.5,
        });
        const truth = () => (fake.services.get('api') ?? []).map((i) => `${i.id}@${i.version}`).sort();
        try {
          await follower.ready();
          for (const o of ops) {
            if (o.kind === 'register') {
              const i = { ...inst(`n${o.id}`), version: String(o.v) };
              const old = (fake.services.get('api') ?? []).find((x) => x.id === i.id);
              await fake.register(i);
              if (old === undefined) fake.emit({ type: 'create', instance: i });
              else if (old.version !== i.version) fake.emit({ type: 'update', instance: i });
            } else if (o.kind === 'deregister') {
              const old = (fake.services.get('api') ?? []).find((x) => x.id === `n${o.id}`);
              if (old !== undefined) {
                await fake.deregister(old);
                fake.emit({ type: 'delete', instance: old });
              }
            } else if (o.kind === 'break') fake.failWatches(new Error('stream broke'));
            else if (o.kind === 'fail') fake.fail = o.on ? new Error('down') : undefined;
            else await clock.advanceAsync(o.ms);
            await flush(2);
          }
          // the registry answers again and the watch is whole: the follower converges on the truth
          fake.fail = undefined;
          fake.failWatches(new Error('resync'));
          for (let i = 0; i < 20; i++) await clock.advanceAsync(1_000);
          await flush(10);
          const seen = [...view].map(([id, v]) => `${id}@${v}`).sort();
          assert.deepEqual(seen, truth());
        } finally {
          await follower.close();
          await cache.close();
        }
      }),
      { numRuns: 100 },
    );
  });
});
