/**
 * Property: whatever the guard decides and however the response ends (finished with any status,
 * closed early, 'close' emitted again, errors noted, a second guard on the same response, an async
 * limiter), every token handed out is completed exactly once, and with the documented outcome.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import fc from 'fast-check';
import { BreakerOpenError, OverloadedError } from '../core/errors.js';
import { HttpGuard } from './guard.js';
import { noteError } from './pass.js';
import type { AdmissionToken, LimitDecision } from '../core/admission.js';

class FakeRes extends EventEmitter {
  statusCode = 200;
  writableFinished = false;
  destroyed = false;
  setHeader(): this {
    return this;
  }
}

interface Issued {
  kind: 'shed' | 'breaker';
  calls: Array<'success' | 'failure' | 'release'>;
}

const scenario = fc.record({
  overloaded: fc.boolean(),
  allowed: fc.boolean(),
  asyncLimiter: fc.boolean(),
  open: fc.boolean(),
  nested: fc.boolean(),
  error: fc.boolean(),
  ending: fc.oneof(
    fc.record({ finished: fc.constant(true), status: fc.constantFrom(200, 204, 400, 429, 500, 502, 503) }),
    fc.constant({ finished: false, status: 200 }),
  ),
  extraCloses: fc.integer({ min: 0, max: 3 }),
  leaveWhileDeciding: fc.boolean(),
});

describe('token completion (property)', () => {
  it('completes every token exactly once with the documented outcome', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (sc) => {
        const issued: Issued[] = [];
        const token = (kind: Issued['kind']): AdmissionToken => {
          const t: Issued = { kind, calls: [] };
          issued.push(t);
          return {
            success: () => void t.calls.push('success'),
            failure: () => void t.calls.push('failure'),
            release: () => void t.calls.push('release'),
          };
        };
        const decision: LimitDecision = { allowed: sc.allowed, limit: 5, remaining: sc.allowed ? 1 : 0, retryAfterMs: sc.allowed ? 0 : 300, resetMs: 1000 };
        const make = () =>
          new HttpGuard({
            shedder: { admit: () => (sc.overloaded ? throwing(new OverloadedError()) : token('shed')) },
            limiter: sc.asyncLimiter ? { takeDecision: () => Promise.resolve(decision) } : { decide: () => decision },
            breaker: { admit: () => (sc.open ? throwing(new BreakerOpenError()) : token('breaker')) },
          });
        const guards = sc.nested ? [make(), make()] : [make()];
        const res = new FakeRes();
        const r = { headers: {}, socket: { remoteAddress: '10.0.0.1' } } as unknown as IncomingMessage;
        let handled = true;
        let leftWhileDeciding = false;
        for (const g of guards) {
          const pending = g.check(r, res as unknown as ServerResponse);
          if (pending instanceof Promise && sc.leaveWhileDeciding) {
            res.destroyed = true;
            leftWhileDeciding = true;
            res.emit('close');
          }
          const v = await pending;
          if (v !== undefined) {
            handled = false;
            break;
          }
        }
        if (handled && sc.error) noteError(res as unknown as ServerResponse, new Error('boom'));
        if (!res.destroyed) {
          res.statusCode = sc.ending.status;
          res.writableFinished = sc.ending.finished;
          res.emit('close');
        }
        for (let i = 0; i < sc.extraCloses; i++) res.emit('close');

        for (const t of issued) assert.equal(t.calls.length, 1, `${t.kind} token completed ${t.calls.length} times`);
        if (!handled) {
          // Refused by a later check of this guard, or gone while the limiter decided: never handled, so released.
          for (const t of issued) if (t.calls[0] === 'release') assert.equal(t.kind, 'shed', 'only a shed token is ever released');
          const refusedAfterShed = !sc.overloaded && (!sc.allowed || sc.open || leftWhileDeciding);
          if (refusedAfterShed)
            assert.ok(
              issued.some((t) => t.kind === 'shed' && t.calls[0] === 'release'),
              'the shed token was released',
            );
        }
        if (handled && !res.destroyed) {
          const { finished, status } = sc.ending;
          for (const t of issued) {
            const ok = t.kind === 'breaker' ? finished && status < 500 : finished && status !== 503;
            assert.equal(t.calls[0], ok ? 'success' : 'failure', `${t.kind} after ${JSON.stringify(sc.ending)}`);
          }
        }
      }),
      { numRuns: 500 },
    );
  });
});

function throwing(err: Error): never {
  throw err;
}
