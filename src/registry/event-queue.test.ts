import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { WatchResyncError } from '../core/errors.js';
import { EventQueue } from './event-queue.js';
import type { RegistryEvent } from './types.js';

const ev = (n: number): RegistryEvent => ({ type: 'create', instance: { id: `i${n}`, name: 'api', address: '127.0.0.1:1' } });

describe('EventQueue', () => {
  it('delivers pushed events in order, and after an overflow the queued ones, then WatchResyncError once, then done', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 8 }),
        fc.array(fc.oneof(fc.constant('push' as const), fc.constant('read' as const)), { maxLength: 60 }),
        async (capacity, script) => {
          const q = new EventQueue(capacity, undefined, undefined);
          let pushed = 0;
          const got: number[] = [];
          let model: number[] = []; // what the consumer is owed
          let overflowed = false;
          for (const step of script) {
            if (step === 'push') {
              const n = pushed++;
              q.push(ev(n));
              if (!overflowed) {
                if (model.length >= capacity) overflowed = true;
                else model.push(n);
              }
              assert.ok(q.length <= capacity);
            } else if (model.length > 0) {
              const r = await q.next();
              assert.equal(r.done, false);
              got.push(Number(r.value!.instance.id.slice(1)));
              model = model.slice(1);
            }
          }
          // drain: a producer that did not overflow says it is done
          if (!overflowed) q.end();
          for (;;) {
            let r: IteratorResult<RegistryEvent>;
            try {
              r = await q.next();
            } catch (err) {
              assert.ok(overflowed && err instanceof WatchResyncError);
              assert.equal((await q.next()).done, true);
              break;
            }
            if (r.done) break;
            got.push(Number(r.value.instance.id.slice(1)));
          }
          // the consumer saw a gapless prefix of what was pushed
          assert.deepEqual(
            got,
            got.map((_, i) => i),
          );
          if (!overflowed) assert.equal(got.length, pushed);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('hands an event straight to a waiting reader, and ends a waiting reader on end()', async () => {
    const q = new EventQueue(1, undefined, undefined);
    const p = q.next();
    q.push(ev(1));
    assert.equal((await p).value?.instance.id, 'i1');
    const p2 = q.next();
    q.end();
    assert.equal((await p2).done, true);
  });

  it('calls onClose once, whether the consumer returns, the signal aborts or the producer ends it', async () => {
    let closes = 0;
    const ac = new AbortController();
    const q = new EventQueue(4, ac.signal, () => closes++);
    ac.abort();
    await q.return();
    q.end();
    assert.equal(closes, 1);
  });
});
