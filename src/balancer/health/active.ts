/**
 * ActiveHealthChecker probes every instance with an HTTP GET on a health path (as Envoy's and nginx's
 * active health checks do):
 * every `intervalMs` (±`jitter`, the first probe at a random point of the first interval so a fleet's
 * probes do not arrive together), each probe aborted after `timeoutMs` (one timer turn later after a
 * stall of this process: core DeadlineTimer). `unhealthyThreshold` failures
 * in a row mark an instance down, `healthyThreshold` successes in a row mark it up again; a 2xx or
 * 3xx answer is a success. Instances start up, so a new fleet is usable before its first probes. Probes
 * of an instance that leaves the list stop at once: its timer is cleared and a probe in flight is aborted.
 * Every timer (the probe schedule and each probe's timeout) is set through the injected `clock`.
 *
 * Probing is one function (`probe`), so tests and other transports can replace it; `checkNow()` runs
 * one round immediately without waiting for the timers.
 */
import http from 'node:http';
import { systemClock, type Clock, type TimerHandle } from '../../core/clock.js';
import { DeadlineTimer } from '../../core/deadline-timer.js';
import { Emitter } from '../../core/events.js';
import { clockOption, finite, fn, integer, options as checkOptions, type OptionKeys } from '../../core/validate.js';
import type { ServiceInstance } from '../../registry/types.js';

/** The keys of ActiveHealthOptions, all of them: any other is refused (see `options`). */
const ACTIVE_HEALTH_CHECKER_KEYS = {
  path: true,
  intervalMs: true,
  jitter: true,
  timeoutMs: true,
  unhealthyThreshold: true,
  healthyThreshold: true,
  probe: true,
  random: true,
  clock: true,
} as const satisfies OptionKeys<ActiveHealthOptions>;

/** Probe answers whether `instance` is healthy; `signal` aborts it (timeout, removal, close). */
export type Probe = (instance: ServiceInstance, signal: AbortSignal) => Promise<boolean>;

/** ActiveHealthOptions configures an ActiveHealthChecker. */
export interface ActiveHealthOptions {
  /** The path to GET, starting with `/` (a query is allowed). Defaults to `'/health'`. */
  path?: string;
  /** Time between probes of one instance, in ms. Defaults to 10 000. */
  intervalMs?: number;
  /** Each interval is spread by ± this fraction, in [0, 1). Defaults to 0.2. */
  jitter?: number;
  /** A probe that has not answered after this many ms fails. Defaults to 3 000. */
  timeoutMs?: number;
  /** Failures in a row that mark an instance down. Defaults to 3. */
  unhealthyThreshold?: number;
  /** Successes in a row that mark a down instance up. Defaults to 2. */
  healthyThreshold?: number;
  /** How to probe. Defaults to `httpProbe(path)`: HTTP GET over node:http, no keep-alive. */
  probe?: Probe;
  /** Uniform random numbers in [0, 1), for jitter. Defaults to `Math.random`. */
  random?: () => number;
  /** Sets the probe schedule and timeouts. Defaults to `systemClock`. */
  clock?: Clock;
}

/** Defaults for ActiveHealthOptions (3 failures down, 2 successes up: the architecture's defaults table). */
export const activeHealthDefaults = Object.freeze({
  path: '/health',
  intervalMs: 10_000,
  jitter: 0.2,
  timeoutMs: 3_000,
  unhealthyThreshold: 3,
  healthyThreshold: 2,
});

/** HealthEvent tells that an instance was marked down (`healthy: false`) or up. */
export interface HealthEvent {
  readonly id: string;
  readonly healthy: boolean;
}

/** An origin-form request target: `/`, then path characters, optionally `?query`; no `//` start, no fragment. */
const PATH = /^\/(?!\/)[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*(\?[A-Za-z0-9\-._~!$&'()*+,;=:@%/?]*)?$/;

/** checkHealthPath throws TypeError unless `path` is an origin-form path such as `/health` or `/ready?deep=1`. */
export function checkHealthPath(owner: string, path: unknown): string {
  if (typeof path !== 'string' || path.length > 2048 || !PATH.test(path)) {
    throw new TypeError(`${owner}: path must be a URL path starting with '/' (e.g. '/health'), got ${JSON.stringify(path)}`);
  }
  return path;
}

/**
 * httpProbe returns a Probe that GETs `http://<instance.address><path>` with node:http (a fresh
 * connection per probe: one every few seconds needs no pool) and answers true for 2xx and 3xx.
 */
export function httpProbe(path: string = activeHealthDefaults.path): Probe {
  checkHealthPath('httpProbe', path);
  return (instance, signal) =>
    new Promise<boolean>((resolve) => {
      let url: URL;
      try {
        url = new URL(`http://${instance.address}${path}`);
      } catch {
        resolve(false);
        return;
      }
      const req = http.get(url, { agent: false, signal, headers: { 'user-agent': 'bulwark-health' } }, (res) => {
        const ok = res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 400;
        res.on('error', () => resolve(false));
        res.on('end', () => resolve(ok));
        res.resume();
      });
      req.on('error', () => resolve(false));
    });
}

interface ProbeState {
  instance: ServiceInstance;
  healthy: boolean;
  failures: number;
  successes: number;
  timer: TimerHandle | undefined;
  inFlight: AbortController | undefined;
  removed: boolean;
}

/** ActiveHealthChecker marks instances up or down by probing them on a timer. */
export class ActiveHealthChecker {
  readonly path: string;
  readonly intervalMs: number;
  readonly jitter: number;
  readonly timeoutMs: number;
  readonly unhealthyThreshold: number;
  readonly healthyThreshold: number;
  private readonly probe: Probe;
  private readonly random: () => number;
  private readonly clock: Clock;
  private readonly states = new Map<string, ProbeState>();
  private readonly changes = new Emitter<HealthEvent>();
  private closed = false;

  constructor(options?: ActiveHealthOptions) {
    const o = checkOptions('ActiveHealthChecker', options, ACTIVE_HEALTH_CHECKER_KEYS);
    this.path = checkHealthPath('ActiveHealthChecker', o.path ?? activeHealthDefaults.path);
    this.intervalMs = finite('ActiveHealthChecker', 'intervalMs', o.intervalMs ?? activeHealthDefaults.intervalMs, 1, 2 ** 31 - 1);
    this.jitter = finite('ActiveHealthChecker', 'jitter', o.jitter ?? activeHealthDefaults.jitter, 0, 0.99);
    this.timeoutMs = finite('ActiveHealthChecker', 'timeoutMs', o.timeoutMs ?? activeHealthDefaults.timeoutMs, 1, 2 ** 31 - 1);
    this.unhealthyThreshold = integer('ActiveHealthChecker', 'unhealthyThreshold', o.unhealthyThreshold ?? activeHealthDefaults.unhealthyThreshold, 1, 1000);
    this.healthyThreshold = integer('ActiveHealthChecker', 'healthyThreshold', o.healthyThreshold ?? activeHealthDefaults.healthyThreshold, 1, 1000);
    this.probe = o.probe === undefined ? httpProbe(this.path) : fn<Probe>('ActiveHealthChecker', 'probe', o.probe);
    this.random = o.random === undefined ? Math.random : fn('ActiveHealthChecker', 'random', o.random);
    this.clock = clockOption('ActiveHealthChecker', o.clock, systemClock);
  }

  /** onChange subscribes to up/down changes; the returned disposer unsubscribes. */
  onChange(listener: (event: HealthEvent) => void): () => void {
    return this.changes.on(listener);
  }

  /**
   * update sets the instances to probe: new ones start (up, first probe within one interval), removed
   * ones stop at once (timer cleared, probe in flight aborted, state dropped). O(instances); `add` and
   * `remove` do the same for one instance in O(1).
   */
  update(instances: readonly ServiceInstance[]): void {
    if (this.closed) return;
    const keep = new Set<string>();
    for (const inst of instances) {
      keep.add(inst.id);
      this.add(inst);
    }
    for (const [id, s] of this.states) if (!keep.has(id)) this.stop(id, s);
  }

  /** add starts probing `instance` (up until probes say otherwise), or takes its new object when probed already. */
  add(instance: ServiceInstance): void {
    if (this.closed) return;
    const s = this.states.get(instance.id);
    if (s !== undefined) {
      s.instance = instance;
      return;
    }
    const fresh: ProbeState = { instance, healthy: true, failures: 0, successes: 0, timer: undefined, inFlight: undefined, removed: false };
    this.states.set(instance.id, fresh);
    this.schedule(fresh, this.random() * this.intervalMs);
  }

  /** remove stops probing `id` at once: its timer is cleared and a probe in flight aborted. */
  remove(id: string): void {
    const s = this.states.get(id);
    if (s !== undefined) this.stop(id, s);
  }

  /** isHealthy tells whether `id` is up (instances not probed count as up). */
  isHealthy(id: string): boolean {
    return this.states.get(id)?.healthy ?? true;
  }

  /** stats answers how many instances are probed, how many of them are down, and how many probes are in flight. */
  stats(): { instances: number; down: number; probing: number } {
    let down = 0;
    let probing = 0;
    for (const s of this.states.values()) {
      if (!s.healthy) down++;
      if (s.inFlight !== undefined) probing++;
    }
    return { instances: this.states.size, down, probing };
  }

  /** checkNow probes every instance once, now, and resolves when all probes have settled. */
  async checkNow(): Promise<void> {
    await Promise.all([...this.states.values()].map((s) => this.run(s, false)));
  }

  /** close stops every timer and aborts probes in flight; later updates are ignored. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    for (const [id, s] of this.states) this.stop(id, s);
    this.changes.clear();
  }

  /** [Symbol.asyncDispose] closes the checker (`await using checker = …`). */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private stop(id: string, s: ProbeState): void {
    s.removed = true;
    if (s.timer !== undefined) this.clock.clearTimeout(s.timer);
    s.timer = undefined;
    s.inFlight?.abort(new Error('instance removed'));
    this.states.delete(id);
  }

  private schedule(s: ProbeState, ms: number): void {
    s.timer = this.clock.setTimeout(() => {
      s.timer = undefined;
      void this.run(s, true);
    }, ms);
    s.timer.unref();
  }

  private async run(s: ProbeState, reschedule: boolean): Promise<void> {
    if (s.removed || s.inFlight !== undefined) return;
    const controller = new AbortController();
    s.inFlight = controller;
    // Not unref'd: it lives only as long as the probe (whose socket holds the loop open anyway). A
    // DeadlineTimer: after a stall of this process, a probe answered meanwhile passes.
    const timer = new DeadlineTimer(this.clock, this.timeoutMs, () => controller.abort(new Error('health probe timed out')));
    let ok: boolean;
    try {
      ok = (await this.probe(s.instance, controller.signal)) === true && !controller.signal.aborted;
    } catch {
      ok = false;
    } finally {
      timer.cancel();
      s.inFlight = undefined;
    }
    if (s.removed) return; // removed while probing: no verdict, no next probe
    this.record(s, ok);
    if (reschedule && s.timer === undefined) {
      const spread = 1 - this.jitter + 2 * this.jitter * this.random();
      this.schedule(s, this.intervalMs * spread);
    }
  }

  private record(s: ProbeState, ok: boolean): void {
    if (ok) {
      s.failures = 0;
      s.successes++;
      if (!s.healthy && s.successes >= this.healthyThreshold) {
        s.healthy = true;
        this.changes.emit({ id: s.instance.id, healthy: true });
      }
    } else {
      s.successes = 0;
      s.failures++;
      if (s.healthy && s.failures >= this.unhealthyThreshold) {
        s.healthy = false;
        this.changes.emit({ id: s.instance.id, healthy: false });
      }
    }
  }
}
