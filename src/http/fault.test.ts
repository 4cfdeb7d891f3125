import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ManualClock } from '../core/clock.js';
import type { AdmissionToken } from '../core/admission.js';
import { CircuitBreaker } from '../breaker/circuit-breaker.js';
import { seeded } from '../balancer/test-fixtures.js';
import { HttpGuard } from './guard.js';
import { wrapHandler } from './node-http.js';
import type { Refusal } from './types.js';

/** A response stand-in: status, and 'close' emitted by the test. */
class FakeRes extends EventEmitter {
  statusCode = 200;
  writableFinished = false;
  destroyed = false;
  setHeader(): this {
    return this;
  }
  finish(status: number): void {
    this.statusCode = status;
    this.writableFinished = true;
    this.emit('close');
  }
}
const req = { headers: {}, socket: { remoteAddress: '10.0.0.1' }, url: '/' } as unknown as IncomingMessage;
const asRes = (r: FakeRes) => r as unknown as ServerResponse;

function breakerLog(log: string[]) {
  return {
    admit(): AdmissionToken {
      return { success: () => void log.push('success'), failure: () => void log.push('failure'), release: () => void log.push('release') };
    },
  };
}

describe('HttpGuard fault', () => {
  it('answers its share of requests with the fault status and ERR_FAULT_INJECTED, after every admission, and the breaker counts them', () => {
    const log: string[] = [];
    const g = new HttpGuard({ breaker: breakerLog(log), fault: { abort: { percent: 50, status: 502, error: 'rehearsal' }, random: seeded(3) } });
    let faulted = 0;
    for (let i = 0; i < 2_000; i++) {
      const res = new FakeRes();
      const v = g.check(req, asRes(res)) as Refusal | undefined;
      if (v !== undefined) {
        faulted++;
        assert.equal(v.status, 502);
        assert.equal(v.code, 'ERR_FAULT_INJECTED');
        assert.deepEqual(JSON.parse(v.body.toString()), { error: { code: 'ERR_FAULT_INJECTED', message: 'rehearsal' } });
        res.finish(502); // the adapter answers the refusal
      } else res.finish(200);
    }
    assert.ok(Math.abs(faulted / 2_000 - 0.5) <= 0.05, `faulted share ${faulted / 2_000}`);
    assert.equal(g.stats().faulted, faulted);
    assert.equal(g.stats().passed, 2_000 - faulted);
    assert.equal(log.filter((x) => x === 'failure').length, faulted, 'the breaker counted every injected failure');
    assert.equal(g.fault!.stats().aborted, faulted);
  });

  it('delays a request by exactly the delay on its clock, and counts a client gone meanwhile as aborted', async () => {
    const clock = new ManualClock();
    const log: string[] = [];
    const g = new HttpGuard({ breaker: breakerLog(log), fault: { delay: { ms: 200, percent: 100 }, clock } });
    const res = new FakeRes();
    let verdict: unknown = 'pending';
    void (g.check(req, asRes(res)) as Promise<unknown>).then((v) => (verdict = v));
    await clock.advanceAsync(199);
    assert.equal(verdict, 'pending');
    await clock.advanceAsync(1);
    assert.equal(verdict, undefined, 'on to the handler');
    const gone = new FakeRes();
    const p = g.check(req, asRes(gone)) as Promise<unknown>;
    gone.destroyed = true;
    gone.emit('close');
    await clock.advanceAsync(200);
    assert.equal(await p, null);
    assert.equal(g.stats().aborted, 1);
    assert.deepEqual(log, ['release']);
  });

  it('is set, replaced and removed live with setFault; bad options change nothing', () => {
    const g = new HttpGuard({ limiter: { decide: () => ({ allowed: true, limit: 1, remaining: 1, retryAfterMs: 0, resetMs: 0 }) } });
    assert.equal(g.check(req, asRes(new FakeRes())), undefined);
    g.setFault({ abort: { percent: 100 } });
    assert.equal((g.check(req, asRes(new FakeRes())) as Refusal).status, 503);
    assert.throws(
      () => g.setFault({ abort: { percent: 100, status: 99 } }),
      (e: unknown) => e instanceof RangeError && e.message === 'HttpGuard: fault.abort.status must be an integer in [200, 599], got 99',
    );
    assert.equal((g.check(req, asRes(new FakeRes())) as Refusal).status, 503);
    g.setFault(undefined);
    assert.equal(g.fault, undefined);
    assert.equal(g.check(req, asRes(new FakeRes())), undefined);
  });

  it('on a real server: a fault that aborts every request opens the breaker behind it, and expires on its own', async () => {
    const clock = new ManualClock();
    const breaker = new CircuitBreaker({ minimumCalls: 5, failureRate: 0.5, clock });
    const guard = new HttpGuard({ breaker, fault: { abort: { percent: 100, status: 503 }, ttlMs: 60_000, clock } });
    const server = createServer(wrapHandler(guard, (_req, res) => res.end('ok')));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    try {
      for (let i = 0; i < 5; i++) {
        const res = await fetch(url);
        assert.equal(res.status, 503);
        assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'ERR_FAULT_INJECTED');
      }
      for (let t = Date.now(); breaker.state !== 'open' && Date.now() - t < 5_000;) await new Promise((r) => setTimeout(r, 5));
      assert.equal(breaker.state, 'open', 'the breaker counted the injected 503s');
      clock.advance(60_000);
      assert.equal(guard.fault!.stats().expired, true);
    } finally {
      await new Promise<void>((r) => (server.close(() => r()), server.closeAllConnections()));
    }
  });
});
