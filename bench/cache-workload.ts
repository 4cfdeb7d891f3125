/**
 * Shared workload for bench/cache.bench.ts: a Zipf (s = 1) stream over 100 000 keys, precomputed so that
 * the sampling costs nothing while measuring.
 */
export const KEY_COUNT = 100_000;
export const CAPACITY = 10_000;
export const VALUE = 'v'.repeat(100);
export const keys = Array.from({ length: KEY_COUNT }, (_, i) => `key:${i}`);
/** Bytes that hold about CAPACITY entries of `key:<i>` + a 100-byte value. */
export const CAPACITY_BYTES = CAPACITY * (VALUE.length + 9);

/** zipfStream returns `n` key indices drawn from Zipf(1) over KEY_COUNT ranks (a seeded LCG, so every run is the same). */
export function zipfStream(n: number): Int32Array {
  const cdf = new Float64Array(KEY_COUNT);
  let sum = 0;
  for (let i = 0; i < KEY_COUNT; i++) cdf[i] = sum += 1 / (i + 1);
  let seed = 12345;
  const rand = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296;
  const out = new Int32Array(n);
  for (let j = 0; j < n; j++) {
    const u = rand() * sum;
    let lo = 0;
    let hi = KEY_COUNT - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (cdf[mid]! < u) lo = mid + 1;
      else hi = mid;
    }
    // Scatter ranks over the key space so hot keys are not neighbours.
    out[j] = Math.imul(lo, 7919) % KEY_COUNT;
  }
  return out;
}
