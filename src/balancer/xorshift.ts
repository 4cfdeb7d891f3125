/**
 * xorshift32 (Marsaglia, "Xorshift RNGs", 2003; shifts 13, 17, 5): the balancers' cheap source of
 * chance where none was injected — a call to `Math.random` costs more than the rest of a P2C pick —
 * and the stream of jump consistent hashing (ring-handover.ts).
 */

/** xorshift32 is the state after `x`, as a signed 32-bit integer; a non-zero state never becomes 0. */
export function xorshift32(x: number): number {
  x ^= x << 13;
  x ^= x >>> 17;
  x ^= x << 5;
  return x;
}

/** Xorshift32 answers uniform random numbers in [0, 1), seeded from `Math.random`. */
export class Xorshift32 {
  private state = (Math.random() * 0x100000000) | 0 || 1;

  /** next answers the next number in [0, 1). */
  next(): number {
    const x = xorshift32(this.state);
    this.state = x;
    return (x >>> 0) / 0x100000000;
  }
}
