/**
 * hash32 is MurmurHash3 (x86, 32-bit; Austin Appleby) over a string's UTF-16 code units, two units per
 * 32-bit block. Well mixed (full avalanche through fmix32), allocation-free and ~10× faster than the md5
 * that the `hashring` package uses. Every node computes the same value for the same key, so rings agree.
 */

const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;

/** hash32 hashes `key` to an unsigned 32-bit integer. */
export function hash32(key: string, seed = 0): number {
  let h = seed | 0;
  const len = key.length;
  const pairs = len & ~1;
  for (let i = 0; i < pairs; i += 2) {
    let k = key.charCodeAt(i) | (key.charCodeAt(i + 1) << 16);
    k = Math.imul(k, C1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, C2);
    h ^= k;
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  if (len & 1) {
    let k = key.charCodeAt(len - 1);
    k = Math.imul(k, C1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, C2);
    h ^= k;
  }
  h ^= len * 2;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** HashFn maps a string to an unsigned 32-bit integer. */
export type HashFn = (key: string) => number;
