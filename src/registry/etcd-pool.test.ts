import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EtcdLeaseInvalidError, GRPCUnavailableError } from 'etcd3';
import { ManualClock } from '../core/clock.js';
import { AbortedError, RegistryUnavailableError } from '../core/errors.js';
import { EtcdPool } from './etcd-pool.js';

/** A fake member: answers its name, or fails the way it is told to. */
interface Fake {
  name: string;
  mode: 'up' | 'refused' | 'election' | 'hang' | 'lease-gone';
  calls: number;
}

const fakes = (...modes: Fake['mode'][]): Fake[] => modes.map((mode, i) => ({ name: `m${i}`, mode, calls: 0 }));

function pool(members: Fake[], clock = new ManualClock(), o: Partial<{ callTimeoutMs: number; attemptTimeoutMs: number; cooldownMs: number }> = {}) {
  return new EtcdPool(
    members.map((m) => ({ endpoint: `http://${m.name}`, client: m })),
    {
      clock,
      callTimeoutMs: 3000,
      attemptTimeoutMs: 1000,
      cooldownMs: 1000,
      ...o,
    },
  );
}

const ask = (c: Fake): Promise<string> => {
  c.calls++;
  switch (c.mode) {
    case 'up':
      return Promise.resolve(c.name);
    case 'refused':
      return Promise.reject(new GRPCUnavailableError('14 UNAVAILABLE: No connection established'));
    case 'election':
      return Promise.reject(new GRPCUnavailableError('14 UNAVAILABLE: etcdserver: leader changed'));
    case 'lease-gone':
      return Promise.reject(new EtcdLeaseInvalidError('etcdserver: requested lease not found'));
    case 'hang':
      return new Promise<string>(() => {});
  }
};

describe('EtcdPool', () => {
  it('spreads calls over the members in turn', async () => {
    const ms = fakes('up', 'up', 'up');
    const p = pool(ms);
    const got = [];
    for (let i = 0; i < 6; i++) got.push(await p.call('range', ask));
    assert.deepEqual(got, ['m0', 'm1', 'm2', 'm0', 'm1', 'm2']);
  });

  it('retries a refused call on the next member and skips the refusing one until its cooldown ends', async () => {
    const clock = new ManualClock();
    const ms = fakes('refused', 'up', 'up');
    const p = pool(ms, clock);
    assert.equal(await p.call('range', ask), 'm1');
    for (let i = 0; i < 10; i++) await p.call('range', ask);
    assert.equal(ms[0]!.calls, 1, 'skipped while cooling down');
    assert.equal(p.retried, 1);
    clock.advance(1000);
    ms[0]!.mode = 'up';
    const after = [];
    for (let i = 0; i < 3; i++) after.push(await p.call('range', ask));
    assert.ok(after.includes('m0'), `tried again once its cooldown ended: ${after.join()}`);
  });

  it('keeps no member out for an election answer (the member is alive), and goes round again after a short wait', async () => {
    const clock = new ManualClock();
    const ms = fakes('election', 'election', 'election');
    const p = pool(ms, clock);
    const call = p.call('range', ask);
    await clock.advanceAsync(0);
    assert.equal(
      ms.reduce((a, m) => a + m.calls, 0),
      3,
      'each member once',
    );
    assert.ok(p.members.every((m) => m.downUntil === 0));
    for (const m of ms) m.mode = 'up';
    await clock.advanceAsync(25);
    assert.match(await call, /^m\d$/);
  });

  it('tries members that are cooling down when no other is left, before it gives up', async () => {
    const clock = new ManualClock();
    const ms = fakes('refused', 'refused');
    const p = pool(ms, clock);
    const first = p.call('range', ask);
    const failed = assert.rejects(first, RegistryUnavailableError);
    await clock.advanceAsync(3000);
    await failed;
    ms[1]!.mode = 'up';
    // both are cooling down now: the call still asks them
    assert.equal(await p.call('range', ask), 'm1');
  });

  it('moves on from a member that does not answer within the attempt timeout', async () => {
    const clock = new ManualClock();
    const ms = fakes('hang', 'up');
    const p = pool(ms, clock);
    const call = p.call('range', ask);
    await clock.advanceAsync(1000);
    assert.equal(await call, 'm1');
    assert.ok(p.members[0]!.downUntil > clock.now());
  });

  it('rejects RegistryUnavailableError naming every endpoint only when no member answered within the deadline', async () => {
    const clock = new ManualClock();
    const p = pool(fakes('hang', 'refused', 'election'), clock);
    let settled: unknown = undefined;
    const call = p.call('range', ask).catch((e: unknown) => (settled = e as object));
    await clock.advanceAsync(2900);
    assert.equal(settled, undefined);
    await clock.advanceAsync(100);
    await call;
    assert.ok((settled as unknown) instanceof RegistryUnavailableError);
    assert.match((settled as unknown as Error).message, /http:\/\/m0, http:\/\/m1, http:\/\/m2/);
    assert.equal(p.failed, 1);
  });

  it('does not retry what etcd refused on purpose, and keeps it as the cause', async () => {
    const ms = fakes('lease-gone', 'up');
    const p = pool(ms);
    await assert.rejects(p.call('put', ask), (e: unknown) => e instanceof RegistryUnavailableError && e.cause instanceof EtcdLeaseInvalidError);
    assert.equal(ms[1]!.calls, 0);
  });

  it('rejects AbortedError when the signal aborts, before or during the call', async () => {
    const clock = new ManualClock();
    const p = pool(fakes('hang'), clock);
    await assert.rejects(p.call('range', ask, AbortSignal.abort()), AbortedError);
    const ac = new AbortController();
    const call = p.call('range', ask, ac.signal);
    ac.abort();
    await assert.rejects(call, AbortedError);
    assert.equal(clock.pendingTimers, 0, 'its timer cleared');
  });
});
