/**
 * PointHistory keeps a feed's points for a bounded time, oldest first, and answers them as JSON text
 * (a page that opens draws its charts from it at once).
 */
import type { Point } from './types.js';

export class PointHistory {
  private readonly points: Point[] = [];
  private text: string | undefined = '[]';

  constructor(private readonly keepMs: number) {}

  add(p: Point): void {
    this.points.push(p);
    while (this.points.length > 1 && this.points[0]!.t < p.t - this.keepMs) this.points.shift();
    this.text = undefined;
  }

  /** json answers the points as a JSON array, made at most once per tick however many pages open. */
  json(): string {
    return (this.text ??= JSON.stringify(this.points));
  }

  get size(): number {
    return this.points.length;
  }
}
