/**
 * MemoryFleetStore: the fleet store in one process's memory, for unit tests and examples. Each store
 * made with `peer()` is another "process" (its own caller id) on the same data; `setDown(true)` makes
 * every operation of this one reject, as a store that cannot be reached. TTLs run on the clock.
 */
import type { Clock } from '../core/clock.js';
import { systemClock } from '../core/clock.js';
import { Emitter, type Disposer } from '../core/events.js';
import { clockOption, options as optionsObject, showValue } from '../core/validate.js';
import type { BreakerFleetOptions, FleetLink, FleetMember } from '../breaker/types.js';
import { newCallerId } from './caller-id.js';
import { FleetView } from './fleet-view.js';
import type { FleetReport } from './quorum.js';
import type { FleetEvent, FleetSnapshot, FleetStore, PermitAnswer } from './types.js';

/** MemoryFleetStoreOptions configures a MemoryFleetStore. */
export interface MemoryFleetStoreOptions {
  /** This store's caller id. Defaults to a fresh one (host, pid, random). */
  callerId?: string;
  /** The time source of TTLs, permit periods and the views' timers. Defaults to `systemClock`. */
  clock?: Clock;
}

interface Permits {
  start: number;
  taken: number;
  ok: number;
  failed: number;
}

/** The data the peers share. */
class MemoryFleetData {
  readonly reports = new Map<string, Map<string, { report: FleetReport; expiresAt: number }>>();
  readonly gens = new Map<string, number>();
  readonly permits = new Map<string, Permits>();
  readonly events = new Map<string, Emitter<FleetEvent>>();
  constructor(readonly clock: Clock) {}
  emitter(key: string): Emitter<FleetEvent> {
    let e = this.events.get(key);
    if (e === undefined) this.events.set(key, (e = new Emitter<FleetEvent>()));
    return e;
  }
  live(key: string): Map<string, { report: FleetReport; expiresAt: number }> {
    let m = this.reports.get(key);
    if (m === undefined) this.reports.set(key, (m = new Map()));
    const now = this.clock.now();
    for (const [caller, r] of m) {
      if (r.expiresAt <= now) {
        m.delete(caller);
        this.emitter(key).emit({ type: 'gone', caller });
      }
    }
    return m;
  }
}

/** MemoryFleetStore keeps a fleet in memory; see the module comment. */
export class MemoryFleetStore implements FleetStore {
  readonly callerId: string;
  private readonly data: MemoryFleetData;
  private down = false;
  private readonly statusListeners = new Set<(up: boolean) => void>();

  constructor(options?: MemoryFleetStoreOptions);
  /** @internal peer() shares its data with a new store. */
  constructor(options: MemoryFleetStoreOptions | undefined, data: MemoryFleetData);
  constructor(options?: MemoryFleetStoreOptions, data?: MemoryFleetData) {
    const o = optionsObject('MemoryFleetStore', options);
    const id = o.callerId ?? newCallerId();
    if (typeof id !== 'string' || id === '') throw new TypeError(`MemoryFleetStore: callerId must be a non-empty string, got ${showValue(id)}`);
    this.callerId = id;
    this.data = data ?? new MemoryFleetData(clockOption('MemoryFleetStore', o.clock, systemClock));
  }

  /** peer answers another store on the same data: another process of the fleet. */
  peer(options?: { callerId?: string }): MemoryFleetStore {
    return new MemoryFleetStore({ ...(options?.callerId === undefined ? {} : { callerId: options.callerId }) }, this.data);
  }

  /** setDown makes every operation of this store reject (true) or answer again (false), as an outage would. */
  setDown(down: boolean): void {
    if (this.down === down) return;
    this.down = down;
    for (const l of this.statusListeners) l(!down);
  }

  join(member: FleetMember, options: BreakerFleetOptions): FleetLink {
    return new FleetView(this, member, options, this.data.clock);
  }

  async publish(key: string, report: FleetReport, ttlMs: number): Promise<void> {
    this.check();
    const m = this.data.live(key);
    m.set(report.caller, { report: { ...report }, expiresAt: this.data.clock.now() + ttlMs });
    this.data.emitter(key).emit({ type: 'report', report: { ...report } });
  }

  async snapshot(key: string): Promise<FleetSnapshot> {
    this.check();
    const reports = [...this.data.live(key).values()].map((r) => ({ ...r.report }));
    return { reports, gen: this.data.gens.get(key) ?? 0 };
  }

  watch(key: string, listener: (event: FleetEvent) => void, onStatus: (up: boolean) => void): Disposer {
    const off = this.data.emitter(key).on((e) => {
      if (!this.down) listener(e);
    });
    this.statusListeners.add(onStatus);
    return () => {
      off();
      this.statusListeners.delete(onStatus);
    };
  }

  async takePermit(key: string, gen: number, limit: number, periodMs: number): Promise<PermitAnswer> {
    this.check();
    const now = this.data.clock.now();
    const id = `${key}\n${gen}`;
    let p = this.data.permits.get(id);
    if (p === undefined || now - p.start >= periodMs) {
      p = { start: now, taken: 0, ok: 0, failed: 0 };
      this.data.permits.set(id, p);
    }
    const left = p.start + periodMs - now;
    if (p.taken >= limit) return { granted: false, periodLeftMs: left, periodStart: p.start };
    p.taken++;
    return { granted: true, periodLeftMs: left, periodStart: p.start };
  }

  async probeResult(key: string, gen: number, ok: boolean, needed: number): Promise<number> {
    this.check();
    const current = this.data.gens.get(key) ?? 0;
    const p = this.data.permits.get(`${key}\n${gen}`);
    if (current !== gen || p === undefined) return current;
    if (!ok) {
      p.failed++;
      return current;
    }
    if (++p.ok < needed || p.failed > 0) return current;
    this.data.gens.set(key, current + 1);
    this.data.permits.delete(`${key}\n${gen}`);
    this.data.emitter(key).emit({ type: 'generation', gen: current + 1 });
    return current + 1;
  }

  async leave(key: string): Promise<void> {
    this.check();
    if (this.data.live(key).delete(this.callerId)) this.data.emitter(key).emit({ type: 'gone', caller: this.callerId });
  }

  async close(): Promise<void> {
    this.statusListeners.clear();
  }

  private check(): void {
    if (this.down) throw new Error('MemoryFleetStore: the store is down (setDown)');
  }
}
