/**
 * The cache's hash rings. Two kinds, both on the core `HashRing`:
 *
 * - bulwark's: MurmurHash3 over the key, virtual node i of peer p at `hash("i-p")`, `replicas` per peer
 *   (1 280 by default; see `CACHE_REPLICAS` for the measurement).
 * - golang/groupcache's (`consistenthash.Map` as `HTTPPool` builds it): crc32 IEEE over the UTF-8
 *   bytes, virtual node i of peer p at `crc32(strconv.Itoa(i) + p)`, 50 per peer, the peer strings
 *   exactly as given. A Node node with this ring names the same owner for every key as a Go node
 *   holding the same peer list (test/groupcache-interop.test.ts checks it against real Go peers).
 */
import { HashRing } from '../core/hash-ring.js';

/**
 * CACHE_REPLICAS is the cache ring's default virtual nodes per peer, chosen as the balancer's
 * `RingHash` chose its own: over 300 random peer sets the busiest peer's share of the keys, at p95, is
 * 1.25 / 1.30 / 1.36 × the mean for 3 / 5 / 10 peers with groupcache's 50, 1.07 / 1.09 / 1.11 with 640
 * and 1.05 / 1.06 / 1.07 with 1 280, the first that stays ≤ 1.10 up to 10 peers (bench/cache.bench.ts,
 * section "ring quality"). An owner lookup costs 1.1–1.8× the 50-replica ring's (~100 ns more, and only on a cache miss); a rolling upgrade from
 * 50 must set `replicas: 50` until every node runs the new default, or the nodes disagree on owners.
 */
export const CACHE_REPLICAS = 1_280;

/** GROUPCACHE_REPLICAS is golang/groupcache's `defaultReplicas`. */
export const GROUPCACHE_REPLICAS = 50;

/** CRC_TABLE is the byte-wise table of the IEEE polynomial (reversed 0xEDB88320), as Go's `crc32.IEEETable`. */
const CRC_TABLE = (() => {
  const t = new Int32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c;
  }
  return t;
})();

/**
 * crc32Utf8 is Go's `crc32.ChecksumIEEE([]byte(s))`: the CRC-32 (IEEE) of the string's UTF-8 bytes,
 * encoded on the fly without allocating. A lone surrogate counts as U+FFFD, as Go's conversion of
 * invalid text does and as `TextEncoder` does.
 */
export function crc32Utf8(s: string): number {
  let c = -1;
  const n = s.length;
  for (let i = 0; i < n; i++) {
    let cp = s.charCodeAt(i);
    if (cp < 0x80) {
      c = CRC_TABLE[(c ^ cp) & 0xff]! ^ (c >>> 8);
      continue;
    }
    if (cp >= 0xd800 && cp <= 0xdbff && i + 1 < n) {
      const lo = s.charCodeAt(i + 1);
      if (lo >= 0xdc00 && lo <= 0xdfff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        i++;
      } else cp = 0xfffd;
    } else if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
    if (cp < 0x800) {
      c = CRC_TABLE[(c ^ (0xc0 | (cp >> 6))) & 0xff]! ^ (c >>> 8);
    } else if (cp < 0x10000) {
      c = CRC_TABLE[(c ^ (0xe0 | (cp >> 12))) & 0xff]! ^ (c >>> 8);
      c = CRC_TABLE[(c ^ (0x80 | ((cp >> 6) & 0x3f))) & 0xff]! ^ (c >>> 8);
    } else {
      c = CRC_TABLE[(c ^ (0xf0 | (cp >> 18))) & 0xff]! ^ (c >>> 8);
      c = CRC_TABLE[(c ^ (0x80 | ((cp >> 12) & 0x3f))) & 0xff]! ^ (c >>> 8);
      c = CRC_TABLE[(c ^ (0x80 | ((cp >> 6) & 0x3f))) & 0xff]! ^ (c >>> 8);
    }
    c = CRC_TABLE[(c ^ (0x80 | (cp & 0x3f))) & 0xff]! ^ (c >>> 8);
  }
  return (c ^ -1) >>> 0;
}

/** groupcachePointName is `strconv.Itoa(i) + peer`, golang/groupcache's virtual node name. */
function groupcachePointName(member: string, index: number): string {
  return `${index}${member}`;
}

/** cacheRing makes the ring of a protocol: bulwark's (MurmurHash3, `replicas` per peer) or Go groupcache's. */
export function cacheRing(protocol: 'bulwark' | 'groupcache', replicas: number): HashRing {
  return protocol === 'groupcache' ? new HashRing({ replicas, hash: crc32Utf8, pointName: groupcachePointName }) : new HashRing({ replicas });
}
