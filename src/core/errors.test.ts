import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as errors from './errors.js';

const docs = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');

describe('errors', () => {
  it('every code is unique', () => {
    const codes = errors.errorClasses.map((c) => c.code);
    assert.equal(new Set(codes).size, codes.length);
  });

  it('every error class exported is listed in errorClasses', () => {
    const exported = Object.values(errors).filter(
      (v): v is typeof errors.BulwarkError => typeof v === 'function' && v.prototype instanceof errors.BulwarkError,
    );
    assert.deepEqual(new Set(exported), new Set(errors.errorClasses));
  });

  it('every code is documented in docs/errors.md with its class', () => {
    for (const c of errors.errorClasses) {
      assert.match(docs, new RegExp(`\\| \`${c.code}\` \\| \`${c.name}\` \\|`), `${c.code} (${c.name}) missing from docs/errors.md`);
    }
  });

  it('docs/errors.md lists no code that does not exist', () => {
    const documented = [...docs.matchAll(/^\| `(ERR_[A-Z_]+)` \|/gm)].map((m) => m[1]);
    const codes = new Set<string>(errors.errorClasses.map((c) => c.code));
    for (const code of documented) assert.ok(codes.has(code!), `docs/errors.md lists unknown code ${code}`);
    assert.equal(documented.length, codes.size);
  });

  it('instances carry code, name, message and cause', () => {
    const cause = new Error('root');
    for (const C of errors.errorClasses) {
      const e = new C('msg', { cause });
      assert.equal(e.code, C.code);
      assert.equal(e.name, C.name);
      assert.equal(e.message, 'msg');
      assert.equal(e.cause, cause);
      assert.ok(e instanceof errors.BulwarkError);
      assert.ok(e instanceof Error);
    }
  });

  it('withoutStack builds an error with no stack frames and restores the limit', () => {
    const before = Error.stackTraceLimit;
    const e = errors.withoutStack(() => new errors.BreakerOpenError('open'));
    assert.equal(Error.stackTraceLimit, before);
    assert.ok(!String(e.stack).includes('\n    at '));
    assert.equal(e.code, 'ERR_BREAKER_OPEN');
  });
});
