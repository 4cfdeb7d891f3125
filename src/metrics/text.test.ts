/**
 * TextBuffer copies the lines that did not change since the last scrape from that scrape's buffer: the
 * bytes must be those written afresh, whatever changed, moved, appeared or disappeared in between.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { TextBuffer } from './text.js';

const HEADS = [Buffer.from('a_total{name="', 'latin1'), Buffer.from('b{name="', 'latin1')];
const TAILS = [Buffer.from('",kind="x"} ', 'latin1'), Buffer.from('"} ', 'latin1'), Buffer.from('",group="g",state="open"} ', 'latin1')];
const KEYS = ['k0', 'k1', 'svc-22', 'x'.repeat(60), 'caf\xc3\xa9'];

/** One step of a scrape: a sample line from parts, or a line written as a byte string. */
type Op = { line: [number, number, number, number] } | { write: string };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 9,
    arbitrary: fc
      .tuple(fc.nat(HEADS.length - 1), fc.nat(KEYS.length - 1), fc.nat(TAILS.length - 1), fc.constantFrom(0, 1, 7, 12, 123456789, 0.25, -3, NaN, Infinity))
      .map((line) => ({ line })),
  },
  { weight: 1, arbitrary: fc.constantFrom('# HELP x y\n', 'other{a="b"} 1\n', '').map((write) => ({ write })) },
);

function play(b: TextBuffer, ops: Op[]): Buffer {
  for (const o of ops) {
    if ('write' in o) b.write(o.write);
    else b.line(HEADS[o.line[0]]!, KEYS[o.line[1]]!, TAILS[o.line[2]]!, o.line[3]);
  }
  return Buffer.from(b.bytes());
}

describe('TextBuffer', () => {
  it('writes, scrape after scrape, the bytes a fresh buffer writes, copying unchanged lines (property)', () => {
    fc.assert(
      fc.property(
        // Each scrape is the previous one with some lines changed, or an unrelated one.
        fc.array(op, { maxLength: 40 }),
        fc.array(fc.tuple(fc.boolean(), fc.array(fc.tuple(fc.nat(39), op), { maxLength: 6 }), fc.array(op, { maxLength: 40 })), { minLength: 1, maxLength: 6 }),
        (first, later) => {
          const buffers = [new TextBuffer(0), new TextBuffer(0)];
          let last: TextBuffer | undefined;
          let ops = first;
          for (let s = 0; s <= later.length; s++) {
            if (s > 0) {
              const [fresh, edits, other] = later[s - 1]!;
              ops = fresh ? other : [...ops];
              for (const [at, o] of edits) if (at < ops.length) ops[at] = o;
            }
            const out = buffers[s % 2]!;
            out.clear(last);
            const got = play(out, ops);
            const plain = new TextBuffer(0);
            plain.clear();
            assert.deepEqual(got, play(plain, ops));
            assert.equal(out.length, plain.length);
            last = out;
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it('copies a run of unchanged lines, and writes only the line that changed', () => {
    const a = new TextBuffer(0);
    a.clear();
    const head = HEADS[0]!;
    const tail = TAILS[1]!;
    for (let i = 0; i < 100; i++) a.line(head, `k${i}`, tail, i);
    const before = Buffer.from(a.bytes());
    const b = new TextBuffer(0);
    b.clear(a);
    for (let i = 0; i < 100; i++) b.line(head, `k${i}`, tail, i === 50 ? 5_000 : i);
    const text = b.bytes().toString('latin1');
    assert.equal(text, before.toString('latin1').replace('k50"} 50\n', 'k50"} 5000\n'));
    // The last scrape's buffer is read, never written.
    assert.deepEqual(Buffer.from(a.bytes()), before);
  });
});
