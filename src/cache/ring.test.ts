import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import * as zlib from 'node:zlib';
import fc from 'fast-check';
import { CACHE_REPLICAS, cacheRing, crc32Utf8 } from './ring.js';

/** goRing is golang/groupcache's consistenthash.Map, written out: sorted crc32(i + peer), first ≥ crc32(key), wrapping. */
function goRing(peers: string[], replicas = 50): (key: string) => string {
  const points: [number, string][] = [];
  for (const p of peers) for (let i = 0; i < replicas; i++) points.push([crc32Utf8(`${i}${p}`), p]);
  points.sort((a, b) => a[0] - b[0]);
  return (key) => {
    const h = crc32Utf8(key);
    return (points.find(([x]) => x >= h) ?? points[0]!)[1];
  };
}

describe('cache rings', () => {
  it("crc32Utf8 is the CRC-32 (IEEE) of the string's UTF-8 bytes", () => {
    assert.equal(crc32Utf8('123456789'), 0xcbf43926); // the standard check value
    const crc32 = (zlib as { crc32?: (s: string | Uint8Array) => number }).crc32;
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 64 }), (s) => {
        const bytes = Buffer.from(s, 'utf8');
        const want = crc32 !== undefined ? crc32(bytes) : undefined;
        if (want !== undefined) assert.equal(crc32Utf8(s), want >>> 0);
      }),
    );
  });

  it("the groupcache ring names the same owner as Go's consistenthash for every key", () => {
    const peers = ['http://10.0.0.1:8080', 'http://10.0.0.2:8080', 'http://10.0.0.3:8080', 'http://10.0.0.4:8080'];
    const ring = cacheRing('groupcache', 50);
    ring.set(peers);
    const go = goRing(peers);
    fc.assert(fc.property(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }), (key) => assert.equal(ring.get(key), go(key))));
  });

  it('the default ring has CACHE_REPLICAS virtual nodes per peer', () => {
    const ring = cacheRing('bulwark', CACHE_REPLICAS);
    ring.set(['a', 'b']);
    assert.equal(ring.pointCount, 2 * CACHE_REPLICAS);
  });
});
