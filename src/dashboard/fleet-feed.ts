/**
 * FleetFeed: the dashboard feed of a fleet, as Turbine aggregates Hystrix streams. It lists a
 * registry's services every `refreshMs` and follows every instance whose metadata announces a status
 * path (`STATUS_PATH_KEY`) with one stream, to that path on the instance's registered address only.
 * Once per tick, whatever the number of viewers, it merges the last frame of every instance into one
 * fleet frame (the instances' frames copied as they came, not parsed and written again) and keeps each
 * instance's headline numbers as history. An instance that leaves the registry is shown as gone for
 * `goneKeepMs`; one whose stream fails is shown as unreachable with the reason.
 */
import { systemClock, type Clock, type TimerHandle } from '../core/clock.js';
import { NotFoundError } from '../core/errors.js';
import { clockOption, integer, options as checkOptions, type OptionKeys } from '../core/validate.js';
import type { Registry, ServiceInstance } from '../registry/types.js';
import { addressParts, InstanceStream, statusPathOk } from './instance-stream.js';
import { TickHistory } from './tick-history.js';
import type { Feed, InstanceState, Point, PointValues } from './types.js';

const OWNER = 'FleetFeed';

/**
 * STATUS_PATH_KEY is the metadata key under which an instance announces the path of its dashboard's
 * event stream (e.g. `/dashboard/events`): `{ metadata: { [STATUS_PATH_KEY]: '/dashboard/events' } }`.
 */
export const STATUS_PATH_KEY = 'bulwark.status';

/** FleetFeedOptions configures a FleetFeed. */
export interface FleetFeedOptions {
  /** How often the instances' frames are merged and sent to viewers, ms. Defaults to 1 000. */
  tickMs?: number;
  /** How often the registry is listed, ms. Defaults to 2 000. */
  refreshMs?: number;
  /** How much history is kept for a page that opens, ms. Defaults to 300 000. */
  historyMs?: number;
  /** How long an instance that left the registry is still shown, as gone, ms. Defaults to 300 000. */
  goneKeepMs?: number;
  /** The token sent to every instance (`Authorization: Bearer`), for instances beyond loopback. Defaults to none. */
  token?: string;
  /** The clock of the timers and the points' times. Defaults to systemClock. */
  clock?: Clock;
  /** Called with a message when an instance announces a path or address it will not follow. Defaults to none. */
  onWarning?: (message: string) => void;
}

const KEYS = {
  tickMs: true,
  refreshMs: true,
  historyMs: true,
  goneKeepMs: true,
  token: true,
  clock: true,
  onWarning: true,
} as const satisfies OptionKeys<FleetFeedOptions>;

/** fleetFeedDefaults are FleetFeed's defaults. */
export const fleetFeedDefaults = Object.freeze({ tickMs: 1_000, refreshMs: 2_000, historyMs: 300_000, goneKeepMs: 300_000 });

/** Followed is one instance the feed knows. */
interface Followed {
  readonly service: string;
  readonly id: string;
  readonly address: string;
  readonly path: string;
  stream: InstanceStream | undefined;
  /** Clock ms when it left the registry, or undefined while it is registered. */
  goneAt: number | undefined;
  /** Clock ms of its last frame, kept once it is gone. */
  lastFrameAt: number | undefined;
}

export class FleetFeed extends TickHistory implements Feed {
  readonly mode = 'fleet' as const;
  readonly tickMs: number;
  private readonly refreshMs: number;
  private readonly goneKeepMs: number;
  private readonly token: string | undefined;
  private readonly clock: Clock;
  private readonly onWarning: ((message: string) => void) | undefined;
  private readonly followed = new Map<string, Followed>();
  private readonly warned = new Set<string>();
  private tickTimer: TimerHandle | undefined;
  private refreshTimer: TimerHandle | undefined;
  private refreshing: Promise<void> | undefined;
  private closed = false;
  /** The registry's last listing failure, shown until a listing succeeds. */
  registryError: string | undefined;

  constructor(
    private readonly registry: Pick<Registry, 'listServices' | 'getService'>,
    options?: FleetFeedOptions,
  ) {
    if (registry === null || typeof registry !== 'object' || typeof registry.listServices !== 'function' || typeof registry.getService !== 'function') {
      throw new TypeError(`${OWNER}: registry must be a Registry (listServices, getService)`);
    }
    const o = checkOptions(OWNER, options, KEYS);
    super(integer(OWNER, 'historyMs', o.historyMs ?? fleetFeedDefaults.historyMs, 0, 86_400_000));
    this.tickMs = integer(OWNER, 'tickMs', o.tickMs ?? fleetFeedDefaults.tickMs, 10, 3_600_000);
    this.refreshMs = integer(OWNER, 'refreshMs', o.refreshMs ?? fleetFeedDefaults.refreshMs, 10, 3_600_000);
    this.goneKeepMs = integer(OWNER, 'goneKeepMs', o.goneKeepMs ?? fleetFeedDefaults.goneKeepMs, 0, 86_400_000);
    if (o.token !== undefined && (typeof o.token !== 'string' || o.token.length === 0)) throw new TypeError(`${OWNER}: token must be a non-empty string`);
    this.token = o.token;
    this.clock = clockOption(OWNER, o.clock, systemClock);
    if (o.onWarning !== undefined && typeof o.onWarning !== 'function') throw new TypeError(`${OWNER}: onWarning must be a function`);
    this.onWarning = o.onWarning;
    void this.refresh();
    this.refreshTimer = this.clock.setInterval(() => void this.refresh(), this.refreshMs);
    this.refreshTimer.unref();
    this.tickTimer = this.clock.setInterval(() => this.tick(), this.tickMs);
    this.tickTimer.unref();
  }

  /** size answers the number of instances shown (followed, and gone but still kept). */
  get size(): number {
    return this.followed.size;
  }

  /** refresh lists the registry once and follows what it announces (a listing under way is joined); the refresh timer calls it. */
  refresh(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.refreshing ??= this.list().finally(() => {
      this.refreshing = undefined;
    });
    return this.refreshing;
  }

  private async list(): Promise<void> {
    try {
      const now: ServiceInstance[] = [];
      for (const name of await this.registry.listServices()) {
        try {
          now.push(...(await this.registry.getService(name)));
        } catch (err) {
          if ((err as { code?: string }).code !== NotFoundError.code) throw err; // it left between the two calls
        }
      }
      if (this.closed) return;
      this.registryError = undefined;
      this.apply(now);
    } catch (err) {
      // A registry that does not answer changes nothing: the instances keep streaming, and the page says so.
      this.registryError = err instanceof Error ? err.message : String(err);
    }
  }

  private apply(list: readonly ServiceInstance[]): void {
    const t = this.clock.now();
    const seen = new Set<string>();
    for (const inst of list) {
      const path = inst.metadata?.[STATUS_PATH_KEY];
      if (path === undefined) continue;
      const key = `${inst.name}/${inst.id}`;
      const where = addressParts(inst.address);
      if (!statusPathOk(path) || where === undefined) {
        if (!this.warned.has(key)) {
          this.warned.add(key);
          this.onWarning?.(
            `${OWNER}: ${key} is not followed: ${where === undefined ? `address ${JSON.stringify(inst.address)} is not host:port` : `${STATUS_PATH_KEY} ${JSON.stringify(path)} is not a plain absolute path`}`,
          );
        }
        continue;
      }
      seen.add(key);
      const have = this.followed.get(key);
      if (have !== undefined && have.goneAt === undefined && have.address === inst.address && have.path === path) continue;
      have?.stream?.close();
      this.followed.set(key, {
        service: inst.name,
        id: inst.id,
        address: inst.address,
        path,
        stream: new InstanceStream(where.host, where.port, path, this.token, this.clock),
        goneAt: undefined,
        lastFrameAt: undefined,
      });
    }
    for (const [key, f] of this.followed) {
      if (seen.has(key)) continue;
      if (f.goneAt === undefined) {
        f.goneAt = t;
        f.lastFrameAt = f.stream?.frameAt;
        f.stream?.close();
        f.stream = undefined;
      } else if (t - f.goneAt > this.goneKeepMs) this.followed.delete(key);
    }
  }

  /** tick merges the instances' last frames once and sends the result; the timer calls it. */
  tick(): void {
    if (this.closed) return;
    const t = this.clock.now();
    const c: Record<string, PointValues> = {};
    const parts: string[] = [];
    const sorted = [...this.followed.values()].sort((a, b) => (a.service === b.service ? (a.id < b.id ? -1 : 1) : a.service < b.service ? -1 : 1));
    for (const f of sorted) {
      const s = f.stream;
      const state: InstanceState = f.goneAt !== undefined ? 'gone' : s?.connected === true ? 'up' : s?.frame === undefined ? 'connecting' : 'unreachable';
      const reason = state === 'gone' ? 'left the registry' : state === 'up' ? undefined : s?.reason;
      const frame = s?.frame;
      const lastAt = s?.frameAt ?? f.lastFrameAt;
      const ageMs = lastAt === undefined ? null : Math.round(t - lastAt);
      let frameText = 'null';
      if (frame !== undefined && state !== 'gone') {
        const head = headline(frame);
        if (head === undefined) frameText = 'null';
        else {
          frameText = frame;
          if (state === 'up' && ageMs !== null && ageMs <= 3 * this.tickMs) c[`${f.service}/${f.id}`] = head;
        }
      }
      parts.push(
        `{"service":${JSON.stringify(f.service)},"id":${JSON.stringify(f.id)},"address":${JSON.stringify(f.address)},"state":"${state}"${reason === undefined ? '' : `,"reason":${JSON.stringify(reason)}`},"ageMs":${ageMs === null ? 'null' : ageMs},"frame":${frameText}}`,
      );
    }
    const point: Point = { t, c };
    const registry = this.registryError === undefined ? '' : `,"registryError":${JSON.stringify(this.registryError)}`;
    const text = `{"mode":"fleet","at":${JSON.stringify(new Date().toISOString())},"tickMs":${this.tickMs}${registry},"instances":[${parts.join(',')}],"point":${JSON.stringify(point)}}`;
    this.publish(point, text);
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.clock.clearTimeout(this.tickTimer);
      this.clock.clearTimeout(this.refreshTimer);
      for (const f of this.followed.values()) f.stream?.close();
      this.forgetListeners();
    }
    return Promise.resolve();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/**
 * headline parses an instance's frame and answers its numbers: calls/s and errors/s of its busiest
 * component, p50/p99 of the busiest one with percentiles; undefined when the frame is not a process
 * frame (it is then left out: an instance's text goes into the fleet frame only once it parsed).
 */
function headline(text: string): PointValues | undefined {
  let f: unknown;
  try {
    f = JSON.parse(text);
  } catch {
    return undefined;
  }
  const c = (f as { mode?: unknown; point?: { c?: unknown } } | null)?.point?.c;
  if ((f as { mode?: unknown }).mode !== 'process' || c === null || typeof c !== 'object') return undefined;
  let calls: PointValues | undefined;
  let lat: PointValues | undefined;
  for (const v of Object.values(c as Record<string, unknown>)) {
    if (!Array.isArray(v) || v.length !== 4) continue;
    const x = v as PointValues;
    if (calls === undefined || (x[0] ?? -1) > (calls[0] ?? -1)) calls = x;
    if (x[3] !== null && (lat === undefined || (x[0] ?? -1) > (lat[0] ?? -1))) lat = x;
  }
  return [calls?.[0] ?? null, calls?.[1] ?? null, lat?.[2] ?? null, lat?.[3] ?? null];
}
