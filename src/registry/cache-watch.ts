/**
 * CacheWatch is RegistryCache's watch of one service: it applies events as they come and, when the
 * watch fails or ends, starts it again after an exponential backoff plus 0–100 ms of jitter (go-micro's
 * registry cache), asking its host to look the service up again once the new watch is established.
 */
import { delay } from '../core/abort.js';
import type { Backoff } from '../core/backoff.js';
import type { Registry, RegistryEvent } from './types.js';

/** The longest a first lookup waits for its watch to be established before asking the registry anyway. */
const READY_CAP_MS = 1_000;
/** go-micro adds 0–100 ms of jitter before a watcher reconnects. */
const JITTER_MS = 100;

/** WatchHost is what a CacheWatch needs from its cache. */
export interface WatchHost {
  registry: Registry;
  backoff: Backoff;
  random: () => number;
  /** apply folds one event into the cache. */
  apply(event: RegistryEvent): void;
  /** restarted is called each time the watch is started again. */
  restarted(): void;
  /** reconnected is called when a restarted watch is established: changes made meanwhile need a lookup. */
  reconnected(): void;
}

/** CacheWatch keeps one service's watch running until stopped. */
export class CacheWatch {
  /** Resolves once the first watch is established (or failed, or after 1 s): a lookup then misses nothing. */
  readonly ready: Promise<void>;
  private markReady!: () => void;
  private readonly ac = new AbortController();
  private stopped = false;

  constructor(
    readonly service: string,
    private readonly host: WatchHost,
  ) {
    this.ready = new Promise<void>((resolve) => {
      const cap = setTimeout(resolve, READY_CAP_MS);
      cap.unref();
      this.markReady = () => {
        clearTimeout(cap);
        resolve();
      };
    });
    void this.run();
  }

  /** stop ends the watch; it is not started again. */
  stop(): void {
    this.stopped = true;
    this.ac.abort();
    this.markReady();
  }

  private async run(): Promise<void> {
    for (let attempt = 0; !this.stopped; attempt++) {
      const first = attempt === 0;
      if (!first) this.host.restarted();
      try {
        const events = this.host.registry.watch({
          service: this.service,
          signal: this.ac.signal,
          onReady: () => {
            this.host.backoff.reset();
            if (first) this.markReady();
            else if (!this.stopped) this.host.reconnected();
          },
        });
        for await (const event of events) {
          if (this.stopped) break;
          this.host.apply(event);
        }
      } catch {
        // failed or told to resync: start again below
      }
      if (first) this.markReady();
      if (this.stopped) break;
      try {
        await delay(this.host.backoff.next() + this.host.random() * JITTER_MS, this.ac.signal, { unref: true });
      } catch {
        break;
      }
    }
  }
}
