/**
 * RedisLimiterBase is what RedisTokenLimiter and RedisPeriodLimiter share: the client (given, or made
 * from a URL and then owned), the key prefix, the Redis ⇄ rescue switch, the instance count that
 * divides the rescue limit, the in-process rescue limiter — one budget per client key, made again
 * when that count changes — `mode`, `stats()`, `onModeChange()` and `close()`. The subclasses own
 * their script, their arguments and their answers.
 */
import { systemClock, type Clock } from '../core/clock.js';
import { limitRefusedChannel, publishRefusal, quietLimiter, refusedAnswer } from '../core/diagnostics.js';
import { ClosedError } from '../core/errors.js';
import type { Disposer } from '../core/events.js';
import { clockOption, integer } from '../core/validate.js';
import { checkPrefix } from './keys.js';
import { Instances } from './instance-count.js';
import { resolveClient } from './redis-client.js';
import { checkCommon, redisCommonDefaults, type RedisCommonOptions } from './redis-limiter-options.js';
import { RedisRescue } from './rescue.js';
import type { LimiterMode, ModeChange, RedisClient, RedisLimiterStats } from './types.js';
import type { MetricsDescription } from '../core/metrics-description.js';
import { describeRedisLimiter } from './limiter-metrics.js';

/** RedisLimiterBase holds the client, the rescue switch and the rescue limiter of a Redis limiter. */
export abstract class RedisLimiterBase<Rescue extends { readonly size: number }> {
  /** The prefix of the Redis keys: client key `k` is counted at `${prefix}{${k}}`. */
  readonly prefix: string;
  /** Milliseconds a decision may wait for Redis before it is made in process. */
  readonly timeoutMs: number;
  /** The most client keys the rescue limiter keeps. */
  readonly maxKeys: number;
  protected readonly client: RedisClient;
  protected readonly clock: Clock;
  protected readonly switch: RedisRescue;
  protected readonly instances: Instances;
  protected closed = false;
  private readonly owned: boolean;
  private rescueLimiter: Rescue | undefined;
  private rescueFor = 0;
  private closing: Promise<void> | undefined;
  private allowed = 0;
  private limited = 0;
  /**
   * Tokens the rescue admitted per Redis key while its part was in rescue, owed to the key's Redis
   * bucket when its part comes back (see owe, chargeBack). At most `maxKeys` keys: a key first admitted
   * while the tally is full is charged nothing.
   */
  private readonly owed = new Map<string, number>();
  /** Charge calls sent, and tokens they took from Redis buckets (for tests and diagnosis). */
  protected chargeCalls = 0;
  protected chargedTokens = 0;

  /** Subclasses validate their own options first, so that a bad option never opens a connection. */
  protected constructor(
    private readonly owner: 'RedisTokenLimiter' | 'RedisPeriodLimiter',
    lua: readonly string[],
    o: Partial<RedisCommonOptions> & { prefix?: string },
  ) {
    this.prefix = checkPrefix(owner, o.prefix);
    this.clock = clockOption(owner, o.clock, systemClock);
    const { timeoutMs, probeIntervalMs } = checkCommon(owner, o);
    this.timeoutMs = timeoutMs;
    this.maxKeys = integer(owner, 'maxKeys', o.maxKeys ?? redisCommonDefaults.maxKeys, 1, 1 << 24);
    const { client, owned } = resolveClient(owner, o.redis);
    try {
      this.instances = new Instances(owner, o, this.clock);
    } catch (err) {
      if (owned) client.disconnect(); // a bad option must not leave a connection behind
      throw err;
    }
    this.client = client;
    this.owned = owned;
    this.switch = new RedisRescue(`${owner}(${this.prefix})`, client, timeoutMs, probeIntervalMs, this.clock, lua);
    this.switch.onModeChange((e) => {
      if (e.mode === 'rescue') this.instances.refresh();
    });
    this.switch.onBack = () => this.chargeBack();
  }

  /** owe records `n` tokens the rescue admitted for the Redis key `k` (charged to its bucket when its part is back on Redis). */
  protected owe(k: string, n: number): void {
    if (!(n > 0)) return;
    const owed = this.owed;
    const v = owed.get(k);
    if (v !== undefined) owed.set(k, v + n);
    else if (owed.size < this.maxKeys) owed.set(k, n);
  }

  /**
   * chargeBack sends, for each key whose part is back on Redis, one charge call of what the rescue
   * admitted for it (`charge`), in the background: no caller waits for it, and a failed charge is
   * dropped (the tokens are then simply not charged).
   */
  private chargeBack(): void {
    if (this.owed.size === 0 || this.closed) return;
    for (const [k, n] of this.owed) {
      if (this.switch.rescues(k)) continue;
      this.owed.delete(k);
      let sent: Promise<number>;
      try {
        sent = this.charge(k, n);
      } catch {
        continue;
      }
      this.chargeCalls++;
      sent.then(
        (taken) => {
          this.chargedTokens += taken;
        },
        () => {},
      );
    }
  }

  /** charge takes up to `n` tokens from the Redis key `k`'s state (never below empty) and answers how many it took. */
  protected charge(_k: string, _n: number): Promise<number> {
    return Promise.resolve(0);
  }

  /** mode says where decisions are made now: 'redis', or 'rescue' (in process). */
  get mode(): LimiterMode {
    return this.switch.mode;
  }

  /**
   * describeMetrics answers the limiter's families (`limiter_decisions_total`, `limiter_mode`,
   * `limiter_redis_…`, `limiter_rescue_…`, `limiter_keys`), read from its stats at scrape time.
   */
  describeMetrics(): MetricsDescription {
    return describeRedisLimiter(this, this.owner, () => this.closed);
  }

  /** stats is a snapshot of the counters, the mode and the cause of the last outage. */
  stats(): RedisLimiterStats {
    const s = this.switch;
    return {
      mode: s.mode,
      redisDecisions: s.redisDecisions,
      rescueDecisions: s.rescueDecisions,
      allowed: this.allowed,
      limited: this.limited,
      failures: s.failures,
      outages: s.outages,
      cause: s.cause,
      rescueSince: s.rescueSince,
      instances: this.instances.get(),
      rescueKeys: this.rescueLimiter?.size ?? 0,
    };
  }

  /** onModeChange subscribes to switches between Redis and rescue; returns the disposer. */
  onModeChange(listener: (event: ModeChange) => void): Disposer {
    return this.switch.onModeChange(listener);
  }

  /**
   * close stops the probe and timers, answers decisions still waiting on Redis from rescue, and closes
   * the client when the limiter made it from a URL. Later `take…()` calls reject with ClosedError. Idempotent.
   */
  close(): Promise<void> {
    if (this.closing === undefined) {
      this.closed = true;
      this.beforeClose();
      this.switch.close();
      this.owed.clear();
      this.instances.close();
      this.closing = this.owned
        ? this.client.quit().then(
            () => {},
            () => this.client.disconnect(),
          )
        : Promise.resolve();
    }
    return this.closing;
  }

  /** Symbol.asyncDispose closes the limiter (`await using limiter = new RedisTokenLimiter(…)`). */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** beforeClose lets a subclass settle what it holds (batches not sent yet, leases) before the switch closes. */
  protected beforeClose(): void {}

  /** closedError is what a call after close() rejects with. */
  protected closedError(method: string): ClosedError {
    return new ClosedError(`${this.constructor.name}.${method}: the limiter is closed`);
  }

  /** rescue is the in-process limiter for the current instance count, made again when the count changed. */
  protected rescue(): Rescue {
    const n = this.instances.get();
    if (this.rescueLimiter === undefined || n !== this.rescueFor) {
      this.rescueFor = n;
      this.rescueLimiter = quietLimiter(this.makeRescue(n)); // its refusals are this limiter's (see observe)
    }
    return this.rescueLimiter;
  }

  /**
   * rescueInUse is the rescue limiter made so far and the instance count it was made for, or undefined: a
   * reconfigured subclass resizes it in place, so that the counts of an outage under way are kept.
   */
  protected rescueInUse(): { limiter: Rescue; instances: number } | undefined {
    return this.rescueLimiter === undefined ? undefined : { limiter: this.rescueLimiter, instances: this.rescueFor };
  }

  /**
   * answered counts `p`'s answer (allowed or limited) and publishes it on `bulwark:limit:refused` when
   * it is a refusal and someone listens. One reaction per call, with no closure made unless someone listens.
   */
  protected answered<R>(p: Promise<R>, key: string, n: number): Promise<R> {
    if (!limitRefusedChannel.hasSubscribers) return p.then(this.count);
    return p.then((r) => {
      this.count(r);
      if (refusedAnswer(r) && limitRefusedChannel.hasSubscribers) publishRefusal(this.owner, this, key, n, this.switch.mode);
      return r;
    });
  }

  /**
   * tally counts an answer that is made where it is known (not through `answered`), and publishes it on
   * `bulwark:limit:refused` when it is a refusal and someone listens.
   */
  protected readonly tally = (r: unknown, key: string, n: number): void => {
    if (r === true) {
      this.allowed++; // a take()'s admission, the common answer: no shape to read
    } else if (refusedAnswer(r)) {
      this.limited++;
      if (limitRefusedChannel.hasSubscribers) publishRefusal(this.owner, this, key, n, this.switch.mode);
    } else {
      this.allowed++;
    }
  };

  /** count counts one answer: allowed, or limited. */
  private readonly count = <R>(r: R): R => {
    if (refusedAnswer(r)) this.limited++;
    else this.allowed++;
    return r;
  };

  /** makeRescue builds the in-process limiter that stands in for Redis, sized for `instances`. */
  protected abstract makeRescue(instances: number): Rescue;
}
