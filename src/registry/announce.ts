/**
 * announce registers this process's instance, keeps it registered, and at SIGTERM / SIGINT deregisters
 * it first — so that clients stop picking it while it still answers — then lets the application drain
 * and exit: `shutdown` resolves (with the signal's name) once the instance is gone from the registry.
 * It never exits the process itself.
 *
 * Why this order: a process that stops accepting before it leaves the registry turns every client's
 * next pick into an error until their watches catch up; one that leaves first only loses new picks,
 * and finishes what it already has (Kubernetes' graceful termination, go-zero's `proc` shutdown listeners).
 *
 * While announce listens for a signal, Node's default reaction (exit at once) is off. At the first
 * signal its listeners are removed, so a second SIGTERM / SIGINT ends the process the default way
 * (unless the application listens too) — a stuck drain can always be interrupted.
 */
import { AbortedError } from '../core/errors.js';
import { systemClock, type Clock, type TimerHandle } from '../core/clock.js';
import { clockOption, fn, integer, options as checkOptions, type OptionKeys } from '../core/validate.js';
import type { Announcement, AnnouncementStats, AnnounceOptions, Registry, ServiceInstance } from './types.js';
import { checkInstance } from './validate.js';

/** The keys of AnnounceOptions, all of them: any other is refused (see `options`). */
const ANNOUNCE_KEYS = {
  ttlMs: true,
  signals: true,
  deregisterTimeoutMs: true,
  signal: true,
  onError: true,
  clock: true,
} as const satisfies OptionKeys<AnnounceOptions>;

/** Defaults for AnnounceOptions. */
export const announceDefaults = Object.freeze({
  signals: Object.freeze(['SIGTERM', 'SIGINT']) as readonly NodeJS.Signals[],
  deregisterTimeoutMs: 5_000,
});

/**
 * announce registers `instance` in `registry` and answers the live Announcement once it is registered
 * (it rejects with the registry's error when the first registration fails, and registers nothing more).
 * See the module comment for renewal and signals.
 */
export async function announce(
  registry: Pick<Registry, 'register' | 'deregister'>,
  instance: ServiceInstance,
  options?: AnnounceOptions,
): Promise<Announcement> {
  const o = checkOptions('announce', options, ANNOUNCE_KEYS);
  if (registry === null || typeof registry !== 'object' || typeof registry.register !== 'function' || typeof registry.deregister !== 'function') {
    throw new TypeError('announce: registry must implement register() and deregister()');
  }
  const inst = checkInstance('announce', instance);
  const ttlMs = o.ttlMs === undefined ? undefined : integer('announce', 'ttlMs', o.ttlMs, 1);
  const signals = o.signals ?? announceDefaults.signals;
  if (!Array.isArray(signals) || signals.some((s) => typeof s !== 'string' || !/^SIG[A-Z0-9]+$/.test(s))) {
    throw new TypeError(`announce: signals must be an array of signal names like 'SIGTERM', got ${JSON.stringify(signals)}`);
  }
  const deregisterTimeoutMs = integer('announce', 'deregisterTimeoutMs', o.deregisterTimeoutMs ?? announceDefaults.deregisterTimeoutMs, 1);
  const onError = o.onError === undefined ? warn : fn<(error: unknown) => void>('announce', 'onError', o.onError);
  const clock = clockOption('announce', o.clock, systemClock);
  await registry.register(inst, { ...(ttlMs === undefined ? {} : { ttlMs }), signal: o.signal });
  return new Announced(registry, inst, ttlMs, [...signals], deregisterTimeoutMs, onError, clock);
}

class Announced implements Announcement {
  readonly shutdown: Promise<NodeJS.Signals | undefined>;
  private resolveShutdown!: (signal: NodeJS.Signals | undefined) => void;
  private readonly renewTimer: TimerHandle | undefined;
  private readonly listeners = new Map<NodeJS.Signals, () => void>();
  private ending: Promise<void> | undefined;
  private readonly counters = { registrations: 1, failures: 0, registered: true };

  constructor(
    private readonly registry: Pick<Registry, 'register' | 'deregister'>,
    readonly instance: ServiceInstance,
    private readonly ttlMs: number | undefined,
    signals: NodeJS.Signals[],
    private readonly deregisterTimeoutMs: number,
    private readonly onError: (error: unknown) => void,
    private readonly clock: Clock,
  ) {
    this.shutdown = new Promise((resolve) => (this.resolveShutdown = resolve));
    if (ttlMs !== undefined) {
      this.renewTimer = clock.setInterval(() => this.renew(), Math.max(1, Math.floor(ttlMs / 3)));
      this.renewTimer.unref();
    }
    for (const signal of signals) {
      const listener = () => void this.end(signal);
      this.listeners.set(signal, listener);
      process.on(signal, listener);
    }
  }

  stats(): AnnouncementStats {
    return { ...this.counters };
  }

  close(): Promise<void> {
    return this.end(undefined);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  private renew(): void {
    if (this.ending !== undefined) return;
    this.registry.register(this.instance, { ttlMs: this.ttlMs }).then(
      () => void this.counters.registrations++,
      (err: unknown) => {
        this.counters.failures++;
        if (this.ending === undefined) this.onError(err);
      },
    );
  }

  /** end stops renewing and listening, deregisters (bounded by deregisterTimeoutMs), then resolves `shutdown`. */
  private end(signal: NodeJS.Signals | undefined): Promise<void> {
    this.ending ??= (async () => {
      this.clock.clearTimeout(this.renewTimer);
      for (const [s, l] of this.listeners) process.removeListener(s, l);
      this.listeners.clear();
      const ac = new AbortController();
      const timer = this.clock.setTimeout(
        () => ac.abort(new AbortedError(`deregistration took more than ${this.deregisterTimeoutMs} ms`)),
        this.deregisterTimeoutMs,
      );
      try {
        await new Promise<void>((resolve, reject) => {
          ac.signal.addEventListener('abort', () => reject(ac.signal.reason), { once: true });
          this.registry.deregister(this.instance, { signal: ac.signal }).then(resolve, reject);
        });
      } catch (err) {
        this.onError(err);
      } finally {
        this.clock.clearTimeout(timer);
        this.counters.registered = false;
      }
      this.resolveShutdown(signal);
    })();
    return this.ending;
  }
}

function warn(error: unknown): void {
  process.emitWarning(`announce: ${error instanceof Error ? error.message : String(error)}`, { code: 'BULWARK_ANNOUNCE' });
}
