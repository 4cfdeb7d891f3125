/**
 * keySlot, the Cluster hash slot the Redis limiters group and rescue keys by: the Cluster spec's
 * CRC16 of the hash tag (or of the whole key), checked against the values Redis documents and against
 * a real cluster node's CLUSTER KEYSLOT (in limit-cluster.test.ts).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { keySlot } from '../src/limit/redis-cluster.js';

describe('keySlot', () => {
  const cases: [string, number][] = [
    ['foo', 12182],
    ['somekey', 11058],
    ['foo{hash_tag}', 2515],
    ['bar{hash_tag}', 2515],
    ['{user1000}.following', keySlot('user1000')],
    ['foo{}{bar}', keySlot('foo{}{bar}')], // an empty first tag: the whole key
    ['', 0],
  ];
  for (const [key, slot] of cases) it(`hashes ${JSON.stringify(key)} to slot ${slot}`, () => assert.equal(keySlot(key), slot));

  it('hashes the first tag only, and non-ASCII keys by their UTF-8 bytes', () => {
    assert.equal(keySlot('a{x}{y}'), keySlot('x'));
    assert.equal(keySlot('p:{é}'), keySlot('é'));
    assert.notEqual(keySlot('é'), keySlot('e'));
    assert.ok(keySlot('🙂') >= 0 && keySlot('🙂') < 16_384);
  });
});
