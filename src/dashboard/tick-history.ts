/**
 * TickHistory: what a dashboard feed keeps of its ticks and hands out — the last frame's JSON text, the
 * points of the last `keepMs` (oldest first, for a page that opens to draw its charts at once) and the
 * listeners each new frame goes to. ProcessFeed and FleetFeed extend it: their tick builds a point and
 * a frame and ends with `publish`.
 */
import type { Point } from './types.js';

export abstract class TickHistory {
  private readonly points: Point[] = [];
  /** The points as JSON text, made at most once per tick however many pages ask. */
  private pointsText: string | undefined = '[]';
  private readonly listeners = new Set<(frame: string) => void>();
  private last: string | undefined;

  constructor(private readonly keepMs: number) {}

  /** latest answers the last frame as JSON text, or undefined before the first tick. */
  latest(): string | undefined {
    return this.last;
  }

  /** history answers the points kept (oldest first) as JSON text. */
  history(): string {
    return (this.pointsText ??= JSON.stringify(this.points));
  }

  /** onTick calls `listener` with each frame's JSON text, once per tick; answers its disposer. */
  onTick(listener: (frame: string) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  /** publish keeps `point` (dropping those older than `keepMs` before it) and `frame`, and hands the frame to every listener. */
  protected publish(point: Point, frame: string): void {
    this.points.push(point);
    while (this.points.length > 1 && this.points[0]!.t < point.t - this.keepMs) this.points.shift();
    this.pointsText = undefined;
    this.last = frame;
    for (const l of this.listeners) l(frame);
  }

  /** forgetListeners drops every listener (a feed that closes). */
  protected forgetListeners(): void {
    this.listeners.clear();
  }
}
