import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ServiceInstance } from '../../registry/types.js';
import { ActiveHealthChecker, checkHealthPath, type HealthEvent } from './active.js';

const inst = (id: string): ServiceInstance => ({ id, name: 'svc', address: `127.0.0.1:${1}` });
const LONG = 3_600_000; // timers never fire in these tests: checkNow drives the probes

describe('ActiveHealthChecker', () => {
  it('marks an instance down after 3 failed probes and up after 2 good ones', async () => {
    let healthy = true;
    const c = new ActiveHealthChecker({ intervalMs: LONG, probe: async () => healthy });
    const events: HealthEvent[] = [];
    c.onChange((e) => events.push(e));
    c.update([inst('a')]);
    assert.equal(c.isHealthy('a'), true);
    healthy = false;
    await c.checkNow();
    await c.checkNow();
    assert.equal(c.isHealthy('a'), true);
    await c.checkNow();
    assert.equal(c.isHealthy('a'), false);
    healthy = true;
    await c.checkNow();
    assert.equal(c.isHealthy('a'), false);
    await c.checkNow();
    assert.equal(c.isHealthy('a'), true);
    assert.deepEqual(events, [
      { id: 'a', healthy: false },
      { id: 'a', healthy: true },
    ]);
    await c.close();
  });

  it('counts a probe that throws or outlives its timeout as a failure', async () => {
    const c = new ActiveHealthChecker({
      intervalMs: LONG,
      timeoutMs: 20,
      unhealthyThreshold: 2,
      probe: (i, signal) =>
        i.id === 'throws' ? Promise.reject(new Error('boom')) : new Promise((resolve) => signal.addEventListener('abort', () => resolve(true))),
    });
    c.update([inst('throws'), inst('hangs')]);
    await c.checkNow();
    await c.checkNow();
    assert.equal(c.isHealthy('throws'), false);
    assert.equal(c.isHealthy('hangs'), false, 'a probe answering only after its abort is a failure');
    await c.close();
  });

  it('stops probing a removed instance at once: its probe in flight is aborted and yields no verdict', async () => {
    let aborted = 0;
    let probes = 0;
    const c = new ActiveHealthChecker({
      intervalMs: LONG,
      timeoutMs: 60_000,
      probe: (_i, signal) => {
        probes++;
        return new Promise((resolve) =>
          signal.addEventListener('abort', () => {
            aborted++;
            resolve(false);
          }),
        );
      },
    });
    c.update([inst('a'), inst('b')]);
    const round = c.checkNow();
    c.update([inst('b')]);
    assert.equal(aborted, 1);
    assert.equal(c.size, 1);
    await c.close();
    await round;
    assert.equal(probes, 2);
    assert.equal(c.isHealthy('a'), true); // no state: not probed, counts as up
  });

  it('probes on its own timer, with jitter, and stops on close', async () => {
    let probes = 0;
    const c = new ActiveHealthChecker({ intervalMs: 10, jitter: 0.5, probe: async () => (probes++, true) });
    c.update([inst('a')]);
    for (let i = 0; i < 100 && probes < 3; i++) await sleep(10);
    assert.ok(probes >= 3, `probes ${probes}`);
    await c.close();
    const after = probes;
    await sleep(40);
    assert.equal(probes, after);
  });

  const paths: [unknown, boolean][] = [
    ['/health', true],
    ['/', true],
    ['/ready?deep=1', true],
    ['/a/b-c_d.e~f', true],
    ['health', false],
    ['http://x/health', false],
    ['//evil.example/health', false],
    ['/he alth', false],
    ['/health#frag', false],
    ['/health\n', false],
    ['', false],
    [42, false],
    [undefined, false],
  ];
  for (const [path, ok] of paths) {
    it(`${ok ? 'accepts' : 'rejects with TypeError'} health path ${JSON.stringify(path)}`, () => {
      if (ok) assert.equal(checkHealthPath('t', path), path);
      else {
        assert.throws(() => checkHealthPath('t', path), TypeError);
        if (path !== undefined) assert.throws(() => new ActiveHealthChecker({ path: path as string }), TypeError);
      }
    });
  }

  it('rejects bad options', () => {
    assert.throws(() => new ActiveHealthChecker({ intervalMs: 0 }), RangeError);
    assert.throws(() => new ActiveHealthChecker({ timeoutMs: -1 }), RangeError);
    assert.throws(() => new ActiveHealthChecker({ unhealthyThreshold: 0 }), RangeError);
    assert.throws(() => new ActiveHealthChecker({ jitter: 1 }), RangeError);
    assert.throws(() => new ActiveHealthChecker({ probe: 'x' as never }), TypeError);
  });
});
