/**
 * The count of instances that divides a Redis limiter's rescue limit: a number, a function, or a registry's count.
 */
import type { Clock, TimerHandle } from '../core/clock.js';
import { fn, integer, positive } from '../core/validate.js';
import { redisCommonDefaults, type RedisCommonOptions } from './redis-limiter-options.js';

/** Instances answers how many instances share a limit, from a number, a function or a registry. */
export class Instances {
  private count: number;
  private readonly ask: (() => number) | undefined;
  private timer: TimerHandle | undefined;

  constructor(
    owner: string,
    o: Partial<RedisCommonOptions>,
    private readonly clock: Clock,
  ) {
    const v = o.instances;
    this.count = 1;
    if (typeof v === 'function') {
      this.ask = fn<() => number>(owner, 'instances', v);
      this.refresh();
    } else {
      this.count = integer(owner, 'instances', v ?? redisCommonDefaults.instances, 1);
    }
    if (o.registry !== undefined) {
      if (v !== undefined) throw new TypeError(`${owner}: give instances or registry, not both`);
      const registry = o.registry;
      if (registry === null || typeof registry !== 'object' || typeof registry.getService !== 'function') {
        throw new TypeError(`${owner}: registry must have getService(service) (a Registry), got ${registry === null ? 'null' : typeof registry}`);
      }
      const service = o.service;
      if (typeof service !== 'string' || service.length === 0)
        throw new TypeError(`${owner}: service must be a non-empty string with registry, got ${String(service)}`);
      const every = positive(owner, 'instancesRefreshMs', o.instancesRefreshMs ?? redisCommonDefaults.instancesRefreshMs);
      const poll = () => {
        let answer: PromiseLike<ArrayLike<unknown>>;
        try {
          answer = registry.getService(service);
        } catch {
          return; // keep the last count
        }
        Promise.resolve(answer).then(
          (list) => {
            const n = list?.length;
            if (typeof n === 'number' && Number.isInteger(n) && n > 0) this.count = n;
          },
          () => {}, // keep the last count: the registry may be down too
        );
      };
      poll();
      this.timer = clock.setInterval(poll, every);
      this.timer.unref();
    }
  }

  /** get answers the current count (≥ 1). */
  get(): number {
    return this.count;
  }

  /** refresh asks the `instances` function again (when decisions go to rescue). */
  refresh(): void {
    if (this.ask === undefined) return;
    let n: unknown;
    try {
      n = this.ask();
    } catch {
      return;
    }
    if (typeof n === 'number' && Number.isInteger(n) && n >= 1) this.count = n;
  }

  close(): void {
    this.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }
}
