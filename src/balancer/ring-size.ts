/**
 * RingSize is RingHash's sizing of its ring: how many virtual nodes each unit of weight gets (the
 * scale), and the total the listed instances want at it. The scale starts at `replicas`; it halves
 * while the points would pass `maxRingSize` and doubles back (up to `replicas`) once they fit twice
 * over, or while the ring is below `minRingSize` (Envoy's ring hash bounds its ring the same way).
 * RingHash alone uses it; it is not part of the package API.
 * @internal
 */
export class RingSize {
  /** Virtual nodes per unit of weight now. */
  scale: number;
  /** Σ points the instances in the list want at `scale` (kept by RingHash as the list changes). */
  present = 0;

  constructor(
    readonly replicas: number,
    readonly minRingSize: number,
    readonly maxRingSize: number,
  ) {
    this.scale = replicas;
  }

  /** pointsFor is the number of virtual nodes for `weight` at scale `s` (at least 1, at most `maxRingSize`). */
  pointsFor(weight: number, s = this.scale): number {
    return Math.min(this.maxRingSize, Math.max(1, Math.round(weight * s)));
  }

  /**
   * rescale keeps the ring within [minRingSize, maxRingSize]: when the present instances' points leave
   * that range it picks a new number of points per unit of weight (a power of two times `replicas`),
   * and answers true. O(1) unless a change of scale is near: the present total is kept as the list
   * changes, and the total at half the scale is known within ± n of half of it (rounding; at least
   * one point each), so it is counted only when that does not settle the question.
   */
  rescale(entries: readonly { readonly weight: number }[]): boolean {
    const n = entries.length;
    const { minRingSize: min, maxRingSize: max, replicas } = this;
    const memo = new Map<number, number>([[this.scale, this.present]]);
    const total = (s: number): number => {
      let sum = memo.get(s);
      if (sum === undefined) {
        sum = 0;
        for (let i = 0; i < n; i++) sum += this.pointsFor(entries[i]!.weight, s);
        memo.set(s, sum);
      }
      return sum;
    };
    // More per unit of weight than `replicas` though half the points would still reach the minimum.
    const halfFits = (s: number, now: number) => s > replicas && (now / 2 - n >= min || (now / 2 + n >= min && total(s / 2) >= min));
    let s = this.scale;
    let now = this.present;
    if (now > max || halfFits(s, now)) {
      while (s > 2 ** -30 && (now > max || halfFits(s, now))) now = total((s /= 2));
    } else {
      // Grow back towards `replicas` only when twice the points fit twice over (hysteresis), or while below the minimum.
      while (n > 0 && ((s < replicas && now * 4 <= max) || now < min)) {
        const next = total(s * 2);
        if (next > max || (next * 2 > max && now >= min)) break;
        s *= 2;
        now = next;
      }
    }
    if (s === this.scale) return false;
    this.scale = s;
    this.present = now;
    return true;
  }
}
