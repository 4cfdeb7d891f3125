import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { checkInstance, sameInstance } from './validate.js';

const ok = { id: 'i-1', name: 'api.v1', address: '127.0.0.1:8080' };

describe('checkInstance', () => {
  const bad: Array<[string, unknown, RegExp]> = [
    ['a non-object', 'x', /instance must be an object/],
    ['an empty name', { ...ok, name: '' }, /instance\.name/],
    ['a name with a slash', { ...ok, name: 'a/b' }, /instance\.name/],
    ['a 256-character id', { ...ok, id: 'x'.repeat(256) }, /instance\.id/],
    ['an address without port', { ...ok, address: 'host' }, /instance\.address/],
    ['port 0', { ...ok, address: 'host:0' }, /instance\.address/],
    ['port 70000', { ...ok, address: 'host:70000' }, /instance\.address/],
    ['bare IPv6', { ...ok, address: '::1:80' }, /instance\.address/],
    ['a numeric metadata value', { ...ok, metadata: { w: 1 } }, /instance\.metadata\.w/],
    ['65 KiB of metadata', { ...ok, metadata: { big: 'x'.repeat(65 * 1024) } }, /instance\.metadata/],
    ['a numeric version', { ...ok, version: 2 }, /instance\.version/],
  ];
  for (const [what, value, msg] of bad) {
    it(`rejects ${what} with a TypeError naming the field`, () => {
      assert.throws(
        () => checkInstance('t', value),
        (err: unknown) => err instanceof TypeError && msg.test(err.message),
      );
    });
  }

  it('accepts IPv6 in brackets and hostnames, and answers a frozen copy of the known fields', () => {
    const v = checkInstance('t', { ...ok, address: '[::1]:80', extra: 1, metadata: { zone: 'a' } });
    assert.deepEqual(v, { ...ok, address: '[::1]:80', metadata: { zone: 'a' } });
    assert.ok(Object.isFrozen(v) && Object.isFrozen(v.metadata));
    assert.equal(checkInstance('t', { ...ok, address: 'svc-1.local:1' }).address, 'svc-1.local:1');
  });

  it('compares instances by content', () => {
    assert.ok(sameInstance(ok, { ...ok }));
    assert.ok(sameInstance({ ...ok, metadata: { a: '1' } }, { ...ok, metadata: { a: '1' } }));
    assert.ok(!sameInstance({ ...ok, metadata: { a: '1' } }, { ...ok, metadata: { a: '2' } }));
    assert.ok(!sameInstance(ok, { ...ok, version: '2' }));
  });
});
