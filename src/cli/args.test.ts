import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseDuration, parseFlags, UsageError } from './args.js';

const specs = {
  duration: { kind: 'duration', alias: 'd' },
  concurrency: { kind: 'integer', alias: 'c' },
  plain: { kind: 'boolean' },
  name: { kind: 'string' },
} as const;

describe('parseDuration', () => {
  for (const [text, ms] of [
    ['20s', 20_000],
    ['500ms', 500],
    ['1.5m', 90_000],
    ['1h', 3_600_000],
    ['3', 3_000],
    [' 2s ', 2_000],
  ] as const) {
    it(`reads ${JSON.stringify(text)} as ${ms} ms`, () => assert.equal(parseDuration('duration', text), ms));
  }
  for (const text of ['', 'soon', '-1s', '0s', '10 s', '1e3', 's']) {
    it(`refuses ${JSON.stringify(text)} with a UsageError naming the flag`, () =>
      assert.throws(
        () => parseDuration('duration', text),
        (e: unknown) => e instanceof UsageError && /--duration/.test(e.message),
      ));
  }
});

describe('parseFlags', () => {
  it('reads --name value, --name=value, short aliases and booleans', () => {
    assert.deepEqual(parseFlags(['--duration', '3s', '-c', '4', '--plain', '--name=x'], specs), { duration: 3_000, concurrency: 4, plain: true, name: 'x' });
    assert.deepEqual(parseFlags(['-d', '250ms'], specs), { duration: 250 });
    assert.deepEqual(parseFlags([], specs), {});
  });
  it('joins the values of a repeated flag with commas', () => {
    assert.deepEqual(parseFlags(['--peer', 'a', '--peer=b,c'], { peer: { kind: 'string', repeat: true } }), { peer: 'a,b,c' });
    assert.deepEqual(parseFlags(['--name', 'a', '--name', 'b'], specs), { name: 'b' }, 'a flag that does not repeat keeps its last value');
  });
  it('reads what parseArgs reads: a value glued to a short alias, a value starting with -- given with =', () => {
    assert.deepEqual(parseFlags(['-d250ms', '-c', '4'], specs), { duration: 250, concurrency: 4 });
    assert.deepEqual(parseFlags(['--name=--x'], specs), { name: '--x' });
  });
  it("says which flag was wrong, in the CLI's words", () => {
    const message = (argv: string[]) => {
      try {
        parseFlags(argv, specs);
      } catch (err) {
        return (err as Error).message;
      }
      return 'no error';
    };
    assert.equal(message(['--colour']), 'unknown option --colour');
    assert.equal(message(['-x']), 'unknown option -x');
    assert.equal(message(['extra']), 'unexpected argument "extra"');
    assert.equal(message(['--duration']), '--duration needs a value');
    assert.equal(message(['--duration', '--plain']), '--duration needs a value');
    assert.equal(message(['--plain=yes']), '--plain takes no value');
    assert.equal(message(['--', 'x']), 'unknown option --');
  });
  it('refuses unknown flags, stray arguments, missing values and values on booleans', () => {
    for (const argv of [
      ['--colour'],
      ['-x'],
      ['extra'],
      ['--duration'],
      ['--duration', '--plain'],
      ['--plain=yes'],
      ['--concurrency', '2.5'],
      ['--toString'],
      ['--', 'x'],
      ['-d'],
    ]) {
      assert.throws(() => parseFlags(argv, specs), UsageError, argv.join(' '));
    }
  });
});
