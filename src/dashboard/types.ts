/**
 * The types of bulwark/dashboard: the handler's options and what its feeds answer (the JSON a page or
 * an aggregator reads from `<path>/status.json` and `<path>/events`).
 */
import type { Clock } from '../core/clock.js';
import type { ComponentSnapshot } from '../metrics/types.js';

/**
 * PointValues are one component's numbers at one tick: calls/s, errors/s (both over the last tick) and
 * p50, p99 in milliseconds (over the latency window); null where it has none.
 */
export type PointValues = [callsPerS: number | null, errorsPerS: number | null, p50Ms: number | null, p99Ms: number | null];

/** Point is one tick's numbers per component name (per instance id and component name in a fleet). */
export interface Point {
  /** The tick's time, milliseconds on the feed's clock. */
  readonly t: number;
  readonly c: Readonly<Record<string, PointValues>>;
}

/** ProcessFrame is one tick of a process's dashboard: its status snapshot and its numbers. */
export interface ProcessFrame {
  readonly mode: 'process';
  /** Wall-clock time of the snapshot (ISO 8601). */
  readonly at: string;
  readonly tickMs: number;
  readonly components: readonly ComponentSnapshot[];
  readonly point: Point;
}

/** InstanceState says where an instance of the fleet stands: streaming, not reached (yet or any more), or gone from the registry. */
export type InstanceState = 'up' | 'connecting' | 'unreachable' | 'gone';

/** FleetInstance is one instance in a fleet frame: its registration, its state and its last frame. */
export interface FleetInstance {
  readonly service: string;
  readonly id: string;
  readonly address: string;
  readonly state: InstanceState;
  /** Why it is not up (the last error), when it is not. */
  readonly reason?: string;
  /** Milliseconds since its last frame, or null when none came. */
  readonly ageMs: number | null;
  /** Its last frame, as the instance sent it, or null. */
  readonly frame: ProcessFrame | null;
}

/** FleetFrame is one tick of the fleet view: every instance found, merged once per tick. */
export interface FleetFrame {
  readonly mode: 'fleet';
  readonly at: string;
  readonly tickMs: number;
  readonly instances: readonly FleetInstance[];
  /** The numbers per `<instance id>/<component>` (instance ids are unique per service: `<service>/<id>/<component>`). */
  readonly point: Point;
}

/** Feed is what a dashboard handler serves: frames once per tick, and the points of the last minutes. */
export interface Feed {
  readonly mode: 'process' | 'fleet';
  readonly tickMs: number;
  /** latest answers the last frame as JSON text, or undefined before the first tick. */
  latest(): string | undefined;
  /** history answers the points kept (oldest first) as JSON text. */
  history(): string;
  /** onTick calls `listener` with each frame's JSON text, once per tick; answers its disposer. */
  onTick(listener: (frame: string) => void): () => void;
  close(): Promise<void>;
}

/** ProcessFeedOptions configures the feed of one process (what `dashboardHandler` makes from a BulwarkMetrics). */
export interface ProcessFeedOptions {
  /** How often the snapshot is taken and sent to viewers, ms. Defaults to 1 000. */
  tickMs?: number;
  /** How much history is kept for a page that opens, ms. Defaults to 300 000 (5 minutes). */
  historyMs?: number;
  /** The window p50 and p99 are computed over, ms. Defaults to 60 000. */
  latencyWindowMs?: number;
  /** The clock of the tick timer and the points' times. Defaults to systemClock. */
  clock?: Clock;
}
