/**
 * RedisLimiterBase is what RedisTokenLimiter and RedisPeriodLimiter share: the client (given, or made
 * from a URL and then owned), the Redis ⇄ rescue switch, the instance count that divides the rescue
 * limit, the in-process rescue limiter (made again when that count changes), `mode`, `stats()`,
 * `onModeChange()` and `close()`. The subclasses own their script, their arguments and their answers.
 */
import { systemClock, type Clock } from '../core/clock.js';
import type { Disposer } from '../core/events.js';
import { clockOption } from '../core/validate.js';
import type { LimiterMode } from './index.js';
import { checkCommon, Instances, resolveClient, type RedisCommonOptions } from './redis-common.js';
import { RedisRescue, type ModeChange, type RedisClient, type RedisLimiterStats } from './rescue.js';

/** RedisLimiterBase holds the client, the rescue switch and the rescue limiter of a Redis limiter. */
export abstract class RedisLimiterBase<Rescue> {
  /** The Redis key (or key prefix) the limiter counts at. */
  readonly key: string;
  /** Milliseconds a decision may wait for Redis before it is made in process. */
  readonly timeoutMs: number;
  protected readonly client: RedisClient;
  protected readonly clock: Clock;
  protected readonly switch: RedisRescue;
  protected readonly instances: Instances;
  private readonly owned: boolean;
  private rescueLimiter: Rescue | undefined;
  private rescueFor = 0;

  /** Subclasses validate their own options first, so that a bad option never opens a connection. */
  protected constructor(owner: string, key: string, lua: string, o: Partial<RedisCommonOptions> & { clock?: Clock }) {
    this.key = key;
    this.clock = clockOption(owner, o.clock, systemClock);
    const { timeoutMs, probeIntervalMs } = checkCommon(owner, o);
    this.timeoutMs = timeoutMs;
    const { client, owned } = resolveClient(owner, o.redis);
    try {
      this.instances = new Instances(owner, o);
    } catch (err) {
      if (owned) client.disconnect(); // a bad option must not leave a connection behind
      throw err;
    }
    this.client = client;
    this.owned = owned;
    this.switch = new RedisRescue(`${owner}(${key})`, client, timeoutMs, probeIntervalMs, this.clock, lua);
    this.switch.onModeChange((e) => {
      if (e.mode === 'rescue') this.instances.refresh();
    });
  }

  /** mode says where decisions are made now: 'redis', or 'rescue' (in process). */
  get mode(): LimiterMode {
    return this.switch.mode;
  }

  /** stats is a snapshot of the counters, the mode and the cause of the last outage. */
  stats(): RedisLimiterStats {
    const s = this.switch;
    return {
      mode: s.mode,
      redisDecisions: s.redisDecisions,
      rescueDecisions: s.rescueDecisions,
      failures: s.failures,
      outages: s.outages,
      cause: s.cause,
      rescueSince: s.rescueSince,
      instances: this.instances.get(),
    };
  }

  /** onModeChange subscribes to switches between Redis and rescue; returns the disposer. */
  onModeChange(listener: (event: ModeChange) => void): Disposer {
    return this.switch.onModeChange(listener);
  }

  /** close stops the probe and timers, and closes the client when the limiter made it from a URL. */
  async close(): Promise<void> {
    this.switch.close();
    this.instances.close();
    if (this.owned) await this.client.quit().catch(() => this.client.disconnect());
  }

  /** rescue is the in-process limiter for the current instance count, made again when the count changed. */
  protected rescue(): Rescue {
    const n = this.instances.get();
    if (this.rescueLimiter === undefined || n !== this.rescueFor) {
      this.rescueFor = n;
      this.rescueLimiter = this.makeRescue(n);
    }
    return this.rescueLimiter;
  }

  /** makeRescue builds the in-process limiter that stands in for Redis, sized for `instances`. */
  protected abstract makeRescue(instances: number): Rescue;
}
