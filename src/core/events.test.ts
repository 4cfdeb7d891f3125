import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Emitter } from './events.js';

describe('Emitter', () => {
  it('delivers to every listener until disposed', () => {
    const e = new Emitter<number>();
    const got: number[] = [];
    const off = e.on((n) => got.push(n));
    e.on((n) => got.push(n * 10));
    e.emit(1);
    off();
    off();
    e.emit(2);
    assert.deepEqual(got, [1, 10, 20]);
  });

  it('a listener that throws does not stop the others and becomes a warning', async () => {
    const e = new Emitter<string>();
    const got: string[] = [];
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.message);
    process.on('warning', onWarning);
    try {
      e.on(() => {
        throw new Error('bad listener');
      });
      e.on((s) => got.push(s));
      e.emit('x');
      await new Promise((r) => setImmediate(r));
      assert.deepEqual(got, ['x']);
      assert.ok(warnings.some((w) => w.includes('bad listener')));
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('a listener added during emit sees only later events', () => {
    const e = new Emitter<number>();
    const got: number[] = [];
    e.on(() => e.on((n) => got.push(n)));
    e.emit(1);
    assert.deepEqual(got, []);
    e.emit(2);
    assert.deepEqual(got, [2]);
  });

  it('rejects a listener that is not a function', () => {
    assert.throws(() => new Emitter<number>().on(42 as never), TypeError);
  });
});
