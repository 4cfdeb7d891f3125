import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as tick } from 'node:timers/promises';
import { ManualClock } from './clock.js';
import { AbortedError, ClosedError } from './errors.js';
import { Follower, type FollowerSource } from './follower.js';

type Change = { op: 'add' | 'remove'; key: string };

/**
 * LateSource behaves as an etcd watch does: a watch misses every change until it is established
 * (`establish()`), then gets every change; with `callsOnReady: false` it never says it is established.
 * `breakWatches()` fails every live watch; `failLists` makes the next listings reject.
 */
class LateSource implements FollowerSource<string[], Change> {
  readonly keys = new Set<string>();
  lists = 0;
  watches = 0;
  failLists = 0;
  private readonly pending: (() => void)[] = [];
  private readonly live = new Set<{ push: (c: Change) => void; fail: (e: Error) => void }>();

  constructor(private readonly callsOnReady = true) {}

  change(c: Change): void {
    if (c.op === 'add') this.keys.add(c.key);
    else this.keys.delete(c.key);
    for (const w of this.live) w.push(c);
  }
  establish(): void {
    for (const f of this.pending.splice(0)) f();
  }
  breakWatches(): void {
    for (const w of [...this.live]) w.fail(new Error('watch broke'));
  }
  async list(): Promise<string[]> {
    this.lists++;
    if (this.failLists > 0) {
      this.failLists--;
      throw new Error('list failed');
    }
    return [...this.keys];
  }
  watch(signal: AbortSignal, onReady: () => void): AsyncIterable<Change> {
    this.watches++;
    const queue: Change[] = [];
    let failure: Error | undefined;
    let wake: (() => void) | undefined;
    const entry = {
      push: (c: Change) => {
        queue.push(c);
        wake?.();
      },
      fail: (e: Error) => {
        failure = e;
        wake?.();
      },
    };
    this.pending.push(() => {
      this.live.add(entry);
      if (this.callsOnReady) onReady();
    });
    const live = this.live;
    return {
      async *[Symbol.asyncIterator]() {
        try {
          while (!signal.aborted) {
            if (failure !== undefined) throw failure;
            const c = queue.shift();
            if (c !== undefined) yield c;
            else {
              await new Promise<void>((resolve) => {
                wake = resolve;
                signal.addEventListener('abort', () => resolve(), { once: true });
              });
              wake = undefined;
            }
          }
        } finally {
          live.delete(entry);
        }
      },
    };
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await tick();
}

/** follow starts a follower of `source` and keeps the view its hooks build. */
function follow(source: FollowerSource<string[], Change>, options: { readyWaitMs?: number; clock?: ManualClock } = {}) {
  const view = new Set<string>();
  const clock = options.clock ?? new ManualClock();
  const f = new Follower<string[], Change>({
    source,
    onList(list) {
      view.clear();
      for (const k of list) view.add(k);
    },
    onEvent(c) {
      if (c.op === 'add') view.add(c.key);
      else view.delete(c.key);
    },
    clock,
    random: () => 1,
    backoff: { initialMs: 100, maxMs: 1_000, jitter: 'none' },
    readyWaitMs: options.readyWaitMs ?? 60_000,
  });
  return { f, clock, keys: () => [...view].sort() };
}

describe('Follower', () => {
  it('answers ready() from a listing taken at once, and lists again once the watch is established, so a change made while the watch was starting is not lost', async () => {
    const src = new LateSource();
    src.change({ op: 'add', key: 'a' });
    const { f, keys } = follow(src);
    await f.ready(); // without waiting for the watch
    assert.equal(src.lists, 1);
    assert.deepEqual(keys(), ['a']);
    src.change({ op: 'add', key: 'b' }); // the watch is not live yet: this change comes as no event
    src.establish();
    await settle();
    assert.equal(src.lists, 2, 'listed again once the watch is established');
    assert.deepEqual(keys(), ['a', 'b']);
    src.change({ op: 'remove', key: 'a' }); // after onReady: through the watch
    await settle();
    assert.deepEqual(keys(), ['b']);
    await f.close();
  });

  it('converges when a change lands both in the listing and in the watch', async () => {
    const src = new LateSource();
    src.change({ op: 'add', key: 'a' });
    const { f, keys } = follow(src);
    src.establish();
    src.change({ op: 'add', key: 'b' });
    src.change({ op: 'remove', key: 'a' });
    await f.ready();
    await settle();
    assert.deepEqual(keys(), ['b']);
    await f.close();
  });

  it('lists after readyWaitMs of clock time for a source that never calls onReady', async () => {
    const src = new LateSource(false);
    src.change({ op: 'add', key: 'a' });
    const { f, clock, keys } = follow(src, { readyWaitMs: 20 });
    src.establish(); // live, but says nothing
    await f.ready(); // answered by the listing taken at once, not after readyWaitMs
    assert.equal(src.lists, 1);
    await clock.advanceAsync(19);
    assert.equal(src.lists, 1);
    await clock.advanceAsync(1);
    await settle();
    assert.equal(src.lists, 2, 'listed again after readyWaitMs');
    assert.deepEqual(keys(), ['a']);
    src.change({ op: 'add', key: 'b' });
    await settle();
    assert.deepEqual(keys(), ['a', 'b']);
    await f.close();
  });

  it('takes a first event as the sign that a silent watch is established', async () => {
    const src = new LateSource(false);
    src.change({ op: 'add', key: 'a' });
    const { f, keys } = follow(src);
    src.establish();
    src.change({ op: 'add', key: 'b' });
    await f.ready();
    await settle();
    assert.deepEqual(keys(), ['a', 'b']);
    await f.close();
  });

  it('after a broken watch waits the backoff on the clock, then watches and lists again', async () => {
    const src = new LateSource();
    const { f, clock, keys } = follow(src);
    src.establish();
    await f.ready();
    src.breakWatches();
    src.change({ op: 'add', key: 'missed' }); // made while no watch is live
    await settle();
    assert.equal(src.watches, 1, 'not before the backoff');
    await clock.advanceAsync(99);
    assert.equal(src.watches, 1);
    await clock.advanceAsync(1);
    assert.equal(src.watches, 2, 'watches again after 100 ms');
    src.establish();
    await settle();
    assert.equal(src.lists, 3, 'at once, once established, and after the reconnect');
    assert.deepEqual(keys(), ['missed']);
    assert.equal(f.stats().breaks, 1);
    await f.close();
  });

  it('doubles the wait while watches keep breaking before any event, up to maxMs', async () => {
    const src = new LateSource();
    const { f, clock } = follow(src);
    const waits: number[] = [];
    for (let round = 0; round < 6; round++) {
      src.establish();
      await settle();
      src.breakWatches();
      await settle();
      const before = clock.now();
      const next = clock.nextTimerAt();
      assert.ok(next !== undefined);
      waits.push(next - before);
      await clock.advanceAsync(next - before);
    }
    assert.deepEqual(waits, [100, 200, 400, 800, 1_000, 1_000]);
    await f.close();
  });

  it('rejects ready() with the first failure while it keeps trying, and recovers', async () => {
    const src = new LateSource();
    src.failLists = 1;
    src.change({ op: 'add', key: 'a' });
    const { f, clock, keys } = follow(src);
    src.establish();
    await assert.rejects(f.ready(), /list failed/);
    await clock.advanceAsync(100);
    src.establish();
    await settle();
    assert.deepEqual(keys(), ['a']);
    await f.ready();
    await f.close();
  });

  it('ready() rejects AbortedError when its signal aborts first', async () => {
    const src = new LateSource();
    const { f } = follow(src);
    const ac = new AbortController();
    const ready = f.ready({ signal: ac.signal });
    ac.abort();
    await assert.rejects(ready, AbortedError);
    await f.close();
  });

  it('closes while still waiting for the watch, ready() rejects ClosedError, and no timer is left', async () => {
    const src = new LateSource();
    const { f, clock } = follow(src);
    const ready = f.ready();
    await f.close();
    await assert.rejects(ready, ClosedError);
    assert.ok(src.lists <= 1, 'at most the listing taken at once');
    assert.equal(clock.pendingTimers, 0);
  });

  it('stops for good when the source says it is closed', async () => {
    const src = new LateSource();
    src.list = async () => {
      throw new ClosedError('source closed');
    };
    const { f, clock } = follow(src);
    src.establish();
    await assert.rejects(f.ready(), ClosedError);
    await settle();
    assert.equal(clock.pendingTimers, 0, 'no backoff timer: it does not try again');
    await f.close();
  });

  it('rejects a bad source or readyWaitMs naming them', () => {
    assert.throws(() => new Follower({ source: {} as FollowerSource<string[], Change>, onEvent: () => {} }), /source/);
    assert.throws(() => follow(new LateSource(), { readyWaitMs: -1 }), /readyWaitMs/);
  });
});
