import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../core/clock.js';
import { AbortedError, LoadError, NotFoundError, PeerError, TimeoutError } from '../core/errors.js';
import { Group } from './group.js';
import type { GetResponse, GroupServer, OwnerPick, PeerGetter, PeerMode, PeerPicker } from './peers.js';

/** FakePeer answers from another Group in the same process (or fails), as an HttpPeer would. */
class FakePeer implements PeerGetter {
  calls = 0;
  removes: string[] = [];
  fail: Error | undefined;
  constructor(
    readonly url: string,
    public target?: GroupServer,
  ) {}
  modes: string[] = [];
  async get(_group: string, key: string, signal?: AbortSignal, mode: PeerMode = 'normal'): Promise<GetResponse> {
    this.calls++;
    this.modes.push(mode);
    await Promise.resolve();
    if (this.fail) throw this.fail;
    return this.target!.serveGet(key, signal, mode);
  }
  async remove(_group: string, key: string): Promise<boolean> {
    this.removes.push(key);
    if (this.fail) throw this.fail;
    return this.target?.serveRemove(key) ?? false;
  }
}

/** picker routes every key to `peer` (or keeps keys matching `mine`). */
function picker(peer: FakePeer, mine: (key: string) => boolean = () => false): PeerPicker {
  return { pickPeer: (k) => (mine(k) ? undefined : peer), peers: () => [peer] };
}

function tick(n = 5): Promise<void> {
  let p = Promise.resolve();
  for (let i = 0; i < n; i++) p = p.then(() => new Promise((r) => setImmediate(r)));
  return p;
}

describe('Group', () => {
  it('loads once, then answers from the cache (GeeCache: Tom 630)', async () => {
    let loads = 0;
    const g = new Group({
      name: 'scores',
      cacheBytes: 1 << 20,
      getter: (key) => {
        loads++;
        if (key !== 'Tom') throw new NotFoundError();
        return '630';
      },
    });
    assert.equal((await g.get('Tom')).toString(), '630');
    assert.equal((await g.get('Tom')).toString(), '630');
    assert.equal(loads, 1);
    const s = g.stats();
    assert.equal(s.gets, 2);
    assert.equal(s.cacheHits, 1);
    assert.equal(s.localLoads, 1);
    await assert.rejects(g.get('kkk'), NotFoundError);
  });

  it('runs the getter once for 100 concurrent gets of one key', async () => {
    let loads = 0;
    let release!: (v: string) => void;
    const g = new Group({
      name: 'g',
      cacheBytes: 1000,
      getter: () => {
        loads++;
        return new Promise<string>((r) => (release = r));
      },
    });
    const all = Array.from({ length: 100 }, () => g.get('k'));
    await tick();
    release('v');
    const views = await Promise.all(all);
    assert.equal(loads, 1);
    assert.ok(views.every((v) => v.toString() === 'v'));
    assert.equal(g.stats().loadsDeduped, 1);
    assert.equal(g.stats().loads, 100);
  });

  it('hands out values a caller cannot change inside the cache', async () => {
    const g = new Group({ name: 'g', cacheBytes: 1000, getter: () => new Uint8Array([1, 2, 3]) });
    const b = (await g.get('k')).bytes();
    b[0] = 99;
    assert.deepEqual([...(await g.get('k')).bytes()], [1, 2, 3]);
  });

  it("copies the getter's bytes, so changing them later does not change the cache", async () => {
    const src = new Uint8Array([7, 7]);
    const g = new Group({ name: 'g', cacheBytes: 1000, getter: () => src });
    await g.get('k');
    src[0] = 0;
    assert.equal((await g.get('k')).at(0), 7);
  });

  it('keeps text as UTF-8 and bytes as they are', async () => {
    const all = Uint8Array.from({ length: 256 }, (_, i) => i);
    const g = new Group({ name: 'g', cacheBytes: 10_000, getter: (k) => (k === 'text' ? 'héllo ✓ 😀' : all) });
    const text = await g.get('text');
    assert.equal(text.toString(), 'héllo ✓ 😀');
    assert.equal(text.length, Buffer.byteLength('héllo ✓ 😀'));
    const bytes = await g.get('bytes');
    assert.deepEqual(bytes.bytes(), Buffer.from(all));
    assert.equal(bytes.at(-1), 255);
    assert.ok(bytes.equals(all));
  });

  it('expires entries after their TTL, jittered within ±10 %', async () => {
    const clock = new ManualClock();
    let loads = 0;
    const g = new Group({ name: 'g', cacheBytes: 1000, ttlMs: 1000, clock, random: () => 0, getter: () => String(++loads) });
    assert.equal((await g.get('k')).toString(), '1');
    clock.advance(899); // random 0 → jitter −10 %: expires at 900
    assert.equal((await g.get('k')).toString(), '1');
    clock.advance(1);
    assert.equal((await g.get('k')).toString(), '2');
  });

  it('spreads by ttlJitter when set (0 = exact TTL, 0.5 = ±50 %), and refuses a jitter outside [0, 0.99]', async () => {
    const clock = new ManualClock();
    let loads = 0;
    const exact = new Group({ name: 'exact', cacheBytes: 1000, ttlMs: 1000, ttlJitter: 0, clock, random: () => 0, getter: () => String(++loads) });
    await exact.get('k');
    clock.advance(999);
    assert.equal((await exact.get('k')).toString(), '1', 'no jitter: alive until 1000');
    clock.advance(1);
    assert.equal((await exact.get('k')).toString(), '2');
    const wide = new Group({ name: 'wide', cacheBytes: 1000, ttlMs: 1000, ttlJitter: 0.5, clock, random: () => 0, getter: () => 'v' });
    await wide.get('k');
    assert.equal((await wide.serveGet('k')).ttlMs, 500, 'random 0 → −50 %');
    for (const bad of [-0.1, 1, Number.NaN]) {
      assert.throws(() => new Group({ name: 'bad', cacheBytes: 1000, ttlJitter: bad, getter: () => 'v' }), /Group: ttlJitter must be/);
    }
  });

  it('spreads the expiry of entries loaded together over ±10 % of the TTL', async () => {
    const clock = new ManualClock();
    let r = 0;
    const g = new Group({ name: 'g', cacheBytes: 100_000, ttlMs: 1000, clock, random: () => (r = (r + 0.37) % 1), getter: (k) => k });
    for (let i = 0; i < 50; i++) await g.get(`k${i}`);
    const expiries = [];
    for (let i = 0; i < 50; i++) expiries.push((await g.serveGet(`k${i}`)).ttlMs);
    assert.ok(Math.min(...expiries) >= 900 && Math.max(...expiries) <= 1100, `${expiries}`);
    assert.ok(new Set(expiries).size > 10, 'expiries should differ');
  });

  it('lets the getter choose a TTL per entry', async () => {
    const clock = new ManualClock();
    let loads = 0;
    const g = new Group({ name: 'g', cacheBytes: 1000, ttlMs: 60_000, clock, random: () => 0.5, getter: () => ({ value: String(++loads), ttlMs: 10 }) });
    await g.get('k');
    clock.advance(10);
    assert.equal((await g.get('k')).toString(), '2');
  });

  it('caches "not found" for negativeTtlMs, then asks the origin again', async () => {
    const clock = new ManualClock();
    let loads = 0;
    const g = new Group({
      name: 'g',
      cacheBytes: 1000,
      negativeTtlMs: 100,
      clock,
      random: () => 0.5,
      getter: () => {
        loads++;
        throw new NotFoundError('nope');
      },
    });
    await assert.rejects(g.get('missing'), NotFoundError);
    await assert.rejects(g.get('missing'), NotFoundError);
    assert.equal(loads, 1);
    clock.advance(100);
    await assert.rejects(g.get('missing'), NotFoundError);
    assert.equal(loads, 2);
  });

  it('never caches "not found" when negativeTtlMs is 0, nor any error', async () => {
    let loads = 0;
    const g = new Group({
      name: 'g',
      cacheBytes: 1000,
      getter: (k) => {
        loads++;
        if (k === 'nf') throw new NotFoundError();
        throw new Error('db down');
      },
    });
    await assert.rejects(g.get('nf'), NotFoundError);
    await assert.rejects(g.get('nf'), NotFoundError);
    await assert.rejects(g.get('err'), LoadError);
    await assert.rejects(g.get('err'), LoadError);
    assert.equal(loads, 4);
    assert.equal(g.stats().localLoadErrs, 2);
  });

  it('turns a synchronous throw or a wrong result type into LoadError, and caches nothing', async () => {
    const g = new Group({
      name: 'g',
      cacheBytes: 1000,
      getter: (k) => {
        if (k === 'sync') throw new Error('boom');
        return 42 as never;
      },
    });
    await assert.rejects(g.get('sync'), (e: unknown) => e instanceof LoadError && (e.cause as Error).message === 'boom');
    await assert.rejects(g.get('num'), LoadError);
    assert.equal(g.cacheStats().main.length, 0);
  });

  it('cuts off a getter that never settles after timeoutMs (on its clock) with TimeoutError and aborts its signal', async () => {
    let aborted = false;
    const clock = new ManualClock();
    const g = new Group({
      name: 'g',
      cacheBytes: 1000,
      timeoutMs: 20,
      clock,
      getter: (_k, { signal }) => new Promise(() => signal.addEventListener('abort', () => (aborted = true))),
    });
    const p = g.get('k');
    p.catch(() => {});
    await clock.advanceAsync(19);
    assert.equal(aborted, false, 'cut off early');
    await clock.advanceAsync(1);
    await assert.rejects(p, TimeoutError);
    assert.equal(aborted, true);
    assert.equal(g.cacheStats().main.length, 0);
  });

  it('returns but does not cache a value larger than maxValueBytes', async () => {
    let loads = 0;
    const g = new Group({
      name: 'g',
      cacheBytes: 10_000,
      maxValueBytes: 10,
      getter: () => {
        loads++;
        return 'x'.repeat(11);
      },
    });
    assert.equal((await g.get('k')).length, 11);
    assert.equal((await g.get('k')).length, 11);
    assert.equal(loads, 2);
  });

  it('rejects an empty, too long or ill-formed key with TypeError', async () => {
    const g = new Group({ name: 'g', cacheBytes: 1000, getter: (k) => k });
    await assert.rejects(g.get(''), TypeError);
    await assert.rejects(g.get('x'.repeat(1025)), TypeError);
    await assert.rejects(g.get('é'.repeat(600)), TypeError); // 1 200 bytes of UTF-8
    await assert.rejects(g.get('a\uD800b'), TypeError);
    await assert.rejects(g.remove(''), TypeError);
    assert.equal((await g.get('x'.repeat(1024))).length, 1024);
  });

  it("ends only the aborting caller's wait", async () => {
    let release!: (v: string) => void;
    const g = new Group({ name: 'g', cacheBytes: 1000, getter: () => new Promise<string>((r) => (release = r)) });
    const ac = new AbortController();
    const a = g.get('k', { signal: ac.signal });
    const b = g.get('k');
    ac.abort();
    await assert.rejects(a, AbortedError);
    release('v');
    assert.equal((await b).toString(), 'v');
  });

  it('asks the owning peer, and keeps a sample of peer answers in the hot cache', async () => {
    const owner = new Group({ name: 'g', cacheBytes: 1000, getter: (k) => `v-${k}` });
    const peer = new FakePeer('http://owner', owner);
    let sample = 0.5;
    const g = new Group({ name: 'g', cacheBytes: 1000, peers: picker(peer), random: () => sample, getter: () => assert.fail('must not load locally') });
    assert.equal((await g.get('a')).toString(), 'v-a');
    assert.equal((await g.get('a')).toString(), 'v-a');
    assert.equal(peer.calls, 2); // 0.5 ≥ 0.1: not sampled
    sample = 0.05;
    await g.get('b');
    await g.get('b');
    assert.equal(peer.calls, 3); // sampled into the hot cache
    assert.equal(g.cacheStats().hot.length, 1);
    assert.equal(g.stats().peerLoads, 3);
    assert.equal(owner.stats().serverRequests, 3);
  });

  it('treats a remote "not found" as the answer and does not load locally', async () => {
    const owner = new Group({
      name: 'g',
      cacheBytes: 1000,
      getter: () => {
        throw new NotFoundError();
      },
    });
    const g = new Group({ name: 'g', cacheBytes: 1000, peers: picker(new FakePeer('http://o', owner)), getter: () => assert.fail('no local load') });
    await assert.rejects(g.get('k'), NotFoundError);
    assert.equal(g.stats().localLoads, 0);
  });

  it('loads locally when the owner cannot be reached', async () => {
    const peer = new FakePeer('http://down');
    peer.fail = new PeerError('connection refused');
    const g = new Group({ name: 'g', cacheBytes: 1000, peers: picker(peer), getter: (k) => `local-${k}` });
    assert.equal((await g.get('k')).toString(), 'local-k');
    assert.equal(g.stats().peerErrors, 1);
    assert.equal(g.stats().localLoads, 1);
  });

  it('does not wait on an owner that could not be reached lately: loads locally without asking it', async () => {
    const peer = new FakePeer('http://cut-off') as FakePeer & { healthy(): boolean };
    let healthy = false;
    peer.healthy = () => healthy;
    const g = new Group({ name: 'g', cacheBytes: 1000, peers: picker(peer), getter: (k) => `local-${k}` });
    assert.equal((await g.get('k')).toString(), 'local-k');
    assert.equal(peer.calls, 0, 'an unhealthy owner is not asked');
    healthy = true;
    peer.target = new Group({ name: 'g', cacheBytes: 1000, peers: { pickPeer: () => undefined, peers: () => [] }, getter: (k) => `owner-${k}` });
    assert.equal((await g.get('k2')).toString(), 'owner-k2');
    assert.equal(peer.calls, 1);
  });

  it('does not load again when the owner answered that its getter failed', async () => {
    const peer = new FakePeer('http://o');
    peer.fail = new PeerError('peer answered 502', { status: 502 });
    const g = new Group({ name: 'g', cacheBytes: 1000, peers: picker(peer), getter: () => assert.fail('no local load') });
    await assert.rejects(g.get('k'), PeerError);
  });

  it('serves peers from this node only, even for keys it thinks another node owns', async () => {
    const elsewhere = new FakePeer('http://other');
    const g = new Group({ name: 'g', cacheBytes: 1000, peers: picker(elsewhere), getter: (k) => `here-${k}` });
    const r = await g.serveGet('k');
    assert.equal(r.value, 'here-k');
    assert.equal(elsewhere.calls, 0);
  });

  it('remove deletes the entry here and at every peer', async () => {
    const peer = new FakePeer('http://p');
    let n = 0;
    const g = new Group({ name: 'g', cacheBytes: 1000, peers: picker(peer, () => true), getter: () => String(++n) });
    assert.equal((await g.get('k')).toString(), '1');
    await g.remove('k');
    assert.deepEqual(peer.removes, ['k']);
    assert.equal((await g.get('k')).toString(), '2');
  });

  it('remove rejects PeerError naming the peers it did not reach, after removing locally', async () => {
    const peer = new FakePeer('http://p');
    peer.fail = new Error('down');
    const g = new Group({ name: 'g', cacheBytes: 1000, peers: picker(peer, () => true), getter: () => 'v' });
    await g.get('k');
    await assert.rejects(g.remove('k'), (e: unknown) => e instanceof PeerError && /http:\/\/p/.test(e.message));
    assert.equal(g.cacheStats().main.length, 0);
  });

  it('a load in flight when remove runs does not put the removed value back', async () => {
    let release!: (v: string) => void;
    let n = 0;
    const g = new Group({ name: 'g', cacheBytes: 1000, getter: () => (++n === 1 ? new Promise<string>((r) => (release = r)) : 'new') });
    const first = g.get('k');
    await tick();
    await g.remove('k');
    release('old');
    assert.equal((await first).toString(), 'old'); // the caller that asked before remove gets its answer
    assert.equal((await g.get('k')).toString(), 'new');
  });

  it('getWithInfo says where each answer came from: getter, main, peer, hot', async () => {
    const clock = new ManualClock();
    const owner = new Group({ name: 'g', cacheBytes: 1000, getter: (k) => `v-${k}` });
    const peer = new FakePeer('http://owner', owner);
    const g = new Group({ name: 'g', cacheBytes: 1000, clock, random: () => 0, peers: picker(peer, (k) => k.startsWith('mine')), getter: (k) => `here-${k}` });
    const seen = [];
    for (const key of ['mine', 'mine', 'theirs', 'theirs']) {
      const a = await g.getWithInfo(key);
      seen.push(`${a.value.toString()} ${a.source} ${a.ageMs}`);
    }
    // A load is 0 ms old; a hit's age is the time since it was cached, staleBytes or not.
    assert.deepEqual(seen, ['here-mine getter 0', 'here-mine main 0', 'v-theirs peer 0', 'v-theirs hot 0']);
    clock.advance(40);
    const [mine, theirs] = [await g.getWithInfo('mine'), await g.getWithInfo('theirs')];
    assert.deepEqual([mine.source, mine.ageMs, theirs.source, theirs.ageMs, g.getCached('theirs')?.ageMs], ['main', 40, 'hot', 40, 40]);
    await assert.rejects(g.getWithInfo(''), TypeError);
    assert.deepEqual([g.stats().gets, g.stats().cacheHits], [7, 5]); // a bad key is not a get
  });

  it('getCached answers a held value as getWithInfo would, and undefined, counting nothing, for a miss, a not-found or a bad key', async () => {
    const clock = new ManualClock();
    const g = new Group({
      name: 'g',
      cacheBytes: 1000,
      clock,
      staleBytes: 1000,
      getter: (k) => {
        if (k === 'gone') throw new NotFoundError();
        return `v-${k}`;
      },
    });
    assert.equal(g.getCached('k'), undefined); // never loaded
    await g.get('k');
    await assert.rejects(g.get('gone'), NotFoundError);
    const before = g.stats();
    assert.deepEqual([g.getCached('gone'), g.getCached(''), g.getCached('k'.repeat(1025)), g.getCached('other')], [undefined, undefined, undefined, undefined]);
    assert.deepEqual([g.stats().gets, g.stats().cacheHits], [before.gets, before.cacheHits]);
    clock.advance(250);
    const hit = g.getCached('k')!;
    assert.deepEqual([hit.value.toString(), hit.source, hit.ageMs], ['v-k', 'main', 250]);
    assert.deepEqual([g.stats().gets, g.stats().cacheHits], [before.gets + 1, before.cacheHits + 1]);
    const info = await g.getWithInfo('k');
    assert.deepEqual([info.value.toString(), info.source, info.ageMs], ['v-k', 'main', 250]);
  });

  it('getWithInfo gives a hit its age from the time it was cached, which a reload starts again', async () => {
    const clock = new ManualClock();
    const g = new Group({ name: 'g', cacheBytes: 1000, clock, ttlMs: 1000, ttlJitter: 0, staleBytes: 1000, getter: (k) => `v-${k}` });
    assert.equal((await g.getWithInfo('k')).ageMs, 0);
    clock.advance(250);
    assert.deepEqual([(await g.getWithInfo('k')).source, (await g.getWithInfo('k')).ageMs], ['main', 250]);
    clock.advance(750); // past the TTL: loaded again, and young again
    assert.deepEqual([(await g.getWithInfo('k')).source, (await g.getWithInfo('k')).ageMs], ['getter', 0]);
    clock.advance(100);
    assert.equal(g.getCached('k')?.ageMs, 100);
  });

  it('answers the last good value, marked stale, when a load fails after the TTL; not past staleMaxAgeMs', async () => {
    const clock = new ManualClock();
    let fail = false;
    const g = new Group({
      name: 'g',
      cacheBytes: 1000,
      clock,
      ttlMs: 1_000,
      staleBytes: 1000,
      staleMaxAgeMs: 60_000,
      getter: (k) => {
        if (fail) throw new LoadError('origin down');
        return `v-${k}`;
      },
    });
    await g.get('k');
    fail = true;
    clock.advance(2_000); // past the 1 s TTL (±10 %)
    const a = await g.getWithInfo('k');
    assert.deepEqual([a.value.toString(), a.source, a.ageMs], ['v-k', 'stale', 2_000]);
    assert.equal((await g.get('k')).toString(), 'v-k', 'get answers stale too');
    assert.equal(g.stats().staleAnswers, 2);
    await assert.rejects(g.get('never'), LoadError);
    clock.advance(58_001);
    await assert.rejects(g.get('k'), LoadError);
  });

  it("answers a peer's last value stale when the owner's getter fails", async () => {
    const clock = new ManualClock();
    let fail = false;
    const owner = new Group({
      name: 'g',
      cacheBytes: 1000,
      clock,
      ttlMs: 1_000,
      getter: (k) => {
        if (fail) throw new LoadError('down');
        return `v-${k}`;
      },
    });
    const peer = new FakePeer('http://owner', owner);
    const g = new Group({
      name: 'g',
      cacheBytes: 1000,
      clock,
      staleBytes: 1000,
      random: () => 0.5,
      peers: picker(peer),
      getter: () => assert.fail('no local load'),
    });
    assert.equal((await g.getWithInfo('k')).source, 'peer');
    fail = true;
    clock.advance(2_000);
    peer.fail = new PeerError('owner: getter failed', { status: 502 });
    const a = await g.getWithInfo('k');
    assert.deepEqual([a.source, a.ageMs], ['stale', 2_000]);
  });

  it('never answers stale for "not found", a removed key, an aborted wait, or with staleBytes 0', async () => {
    const clock = new ManualClock();
    let mode: 'up' | 'missing' | 'down' | 'hang' = 'up';
    const getter = (k: string) => {
      if (mode === 'missing') throw new NotFoundError('gone');
      if (mode === 'down') throw new LoadError('down');
      if (mode === 'hang') return new Promise<string>(() => undefined);
      return `v-${k}`;
    };
    const g = new Group({ name: 'g', cacheBytes: 1000, clock, ttlMs: 1_000, staleBytes: 1000, getter });
    for (const k of ['a', 'b', 'c']) await g.get(k);
    clock.advance(2_000);
    mode = 'missing';
    await assert.rejects(g.get('a'), NotFoundError);
    mode = 'down';
    await assert.rejects(g.get('a'), LoadError, 'a key found missing has no last good value');
    await g.remove('b');
    await assert.rejects(g.get('b'), LoadError);
    mode = 'hang';
    const ac = new AbortController();
    const waiting = g.get('c', { signal: ac.signal });
    ac.abort();
    await assert.rejects(waiting, AbortedError);
    mode = 'up';
    const off = new Group({ name: 'g', cacheBytes: 1000, clock, ttlMs: 1_000, getter });
    await off.get('d');
    clock.advance(2_000);
    mode = 'down';
    await assert.rejects(off.get('d'), LoadError);
    assert.equal(g.stats().staleAnswers + off.stats().staleAnswers, 0);
  });

  it('rejects bad options with errors naming the option', () => {
    const getter = () => 'v';
    assert.throws(() => new Group({ name: '', cacheBytes: 1, getter }), /name/);
    assert.throws(() => new Group({ name: 'a/b', cacheBytes: 1, getter }), /name/);
    assert.throws(() => new Group({ name: 'g', cacheBytes: -1, getter }), /cacheBytes/);
    assert.throws(() => new Group({ name: 'g', cacheBytes: 1, getter: 'x' as never }), /getter/);
    assert.throws(() => new Group({ name: 'g', cacheBytes: 1, getter, ttlMs: -1 }), /ttlMs/);
    assert.throws(() => new Group({ name: 'g', cacheBytes: 1, getter, hotCacheRatio: 2 }), /hotCacheRatio/);
    assert.throws(() => new Group({ name: 'g', cacheBytes: 1, getter, timeoutMs: 0 }), /timeoutMs/);
    assert.throws(() => new Group({ name: 'g', cacheBytes: 1, getter, peers: {} as never }), /peers/);
    assert.throws(() => new Group({ name: 'g', cacheBytes: 1, getter, staleBytes: -1 }), /staleBytes/);
    assert.throws(() => new Group({ name: 'g', cacheBytes: 1, getter, staleMaxAgeMs: -1 }), /staleMaxAgeMs/);
  });

  describe('replicated ownership (a picker with pickOwners)', () => {
    /** Three nodes: a (first owner of every key), b (second owner), c (no copy). */
    function cluster() {
      let loads = 0;
      const getter = (key: string) => (loads++, `v:${key}`);
      const toA = new FakePeer('a');
      const toB = new FakePeer('b');
      const picks: Record<string, OwnerPick> = {
        a: { self: true, primary: true, peers: [toB] },
        b: { self: true, primary: false, peers: [toA] },
        c: { self: false, primary: false, peers: [toB, toA] },
      };
      const make = (name: string) => {
        const peers: PeerPicker = { pickPeer: () => toA, pickOwners: () => picks[name], peers: () => [toA, toB] };
        return new Group({ name: 'g', cacheBytes: 1 << 16, getter, peers, hotCacheSample: 0 });
      };
      const [a, b, c] = [make('a'), make('b'), make('c')];
      toA.target = a;
      toB.target = b;
      return { a, b, c, toA, toB, picks, loads: () => loads };
    }

    it('the first owner peeks at the other, loads once, and hands the value on', async () => {
      const { a, b, toB, loads } = cluster();
      assert.equal((await a.get('k')).toString(), 'v:k');
      await tick();
      assert.equal(loads(), 1);
      assert.deepEqual(toB.modes, ['peek', 'normal'], 'a peeked at b, then handed the value on');
      assert.equal(b.cacheStats().main.length, 1, 'b holds a copy');
      assert.equal(a.stats().replications, 1);
    });

    it('another owner asks the first (local), and a node without a copy reads from an owner: one load for all', async () => {
      const { a, b, c, toA, loads } = cluster();
      const values = await Promise.all([a.get('k'), b.get('k'), c.get('k'), b.get('k'), a.get('k')]);
      await tick();
      assert.ok(values.every((v) => v.toString() === 'v:k'));
      assert.equal(loads(), 1);
      assert.ok(toA.modes.includes('local'));
      assert.equal(a.cacheStats().main.length + b.cacheStats().main.length, 2);
      assert.equal(c.cacheStats().main.length, 0, 'c keeps no owned copy');
    });

    it('a first owner that finds the key at its co-owner copies it instead of loading (a node that joined)', async () => {
      const { a, b, loads } = cluster();
      await b.serveGet('k', undefined, 'local'); // b held it before a joined
      assert.equal(loads(), 1);
      assert.equal((await a.get('k')).toString(), 'v:k');
      assert.equal(loads(), 1);
    });

    it('skips an owner that is down: the first owner loads alone, a reader asks the next owner', async () => {
      const { a, c, toB, loads } = cluster();
      toB.fail = new PeerError('down');
      assert.equal((await c.get('k')).toString(), 'v:k'); // b fails, a answers
      assert.equal(loads(), 1);
      assert.equal(a.cacheStats().main.length, 1);
      assert.equal(c.stats().peerErrors, 1, 'the failed read at b');
      await tick();
      assert.equal(a.stats().replications, 0, 'nothing handed on to the owner that is down');
    });
  });
});
