/**
 * RedisTokenLimiter is one token bucket shared by every process that uses the same Redis key: `rate`
 * tokens per second, up to `burst`, one atomic Lua script per decision (see redis-scripts.ts).
 *
 * When Redis fails or does not answer within `timeoutMs`, decisions go at once to an in-process
 * TokenLimiter of `rate / instances` (see rescue.ts) and come back to Redis at the first PONG.
 */
import { systemClock, type Clock } from '../core/clock.js';
import { checkKey } from './keys.js';
import { clockOption, finite, options as optionsOf, positive } from '../core/validate.js';
import type { Disposer } from '../core/events.js';
import type { LimitDecision, LimiterMode } from './index.js';
import { RedisRescue, type ModeChange, type RedisClient, type RedisLimiterStats } from './rescue.js';
import { checkCommon, Instances, resolveClient, type RedisCommonOptions } from './redis-common.js';
import { isIntArray, Script, TOKEN_SCRIPT } from './redis-scripts.js';
import { TokenLimiter } from './token-limiter.js';

/** RedisTokenLimiterOptions configures a RedisTokenLimiter. */
export interface RedisTokenLimiterOptions extends RedisCommonOptions {
  /** The Redis key that holds the bucket (≤ 1 KiB). Required. */
  key: string;
  /** Tokens per second for the whole fleet, fractions allowed. Required. */
  rate: number;
  /** The bucket's size, ≥ 1. Defaults to `rate` (at least 1). */
  burst?: number;
  /** The time source for deadlines and the rescue limiter. Defaults to the monotonic system clock. */
  clock?: Clock;
}

/** Defaults for RedisTokenLimiterOptions (and see redisCommonDefaults). */
export const redisTokenLimiterDefaults = Object.freeze({ timeoutMs: 50, probeIntervalMs: 100, instances: 1 });

const script = new Script(TOKEN_SCRIPT);
const ONE = '1';

/** RedisTokenLimiter is a token bucket in Redis with an in-process rescue. */
export class RedisTokenLimiter {
  readonly key: string;
  readonly rate: number;
  readonly burst: number;
  readonly timeoutMs: number;
  private readonly client: RedisClient;
  private readonly owned: boolean;
  private readonly clock: Clock;
  private readonly switch: RedisRescue;
  private readonly instances: Instances;
  private readonly interval: string;
  private readonly burstArg: string;
  private rescueLimiter: TokenLimiter;
  private rescueFor: number;
  private readonly send1: () => Promise<unknown>;
  private readonly local1: () => boolean;

  constructor(options: RedisTokenLimiterOptions) {
    const o = optionsOf('RedisTokenLimiter', options);
    this.key = checkKey('RedisTokenLimiter', o.key);
    this.rate = positive('RedisTokenLimiter', 'rate', o.rate);
    this.burst = finite('RedisTokenLimiter', 'burst', o.burst ?? Math.max(1, this.rate), 1);
    this.clock = clockOption('RedisTokenLimiter', o.clock, systemClock);
    const { timeoutMs, probeIntervalMs } = checkCommon('RedisTokenLimiter', o);
    this.timeoutMs = timeoutMs;
    const { client, owned } = resolveClient('RedisTokenLimiter', o.redis);
    try {
      this.instances = new Instances('RedisTokenLimiter', o);
    } catch (err) {
      if (owned) client.disconnect(); // a bad option must not leave a connection behind
      throw err;
    }
    this.client = client;
    this.owned = owned;
    this.interval = String(1000 / this.rate);
    this.burstArg = String(this.burst);
    this.rescueFor = this.instances.get();
    this.rescueLimiter = this.makeRescue(this.rescueFor);
    this.switch = new RedisRescue(`RedisTokenLimiter(${this.key})`, client, timeoutMs, probeIntervalMs, this.clock, script.lua);
    this.switch.onModeChange((e) => {
      if (e.mode === 'rescue') this.instances.refresh();
    });
    this.send1 = () => script.run(this.client, this.key, this.interval, this.burstArg, ONE);
    this.local1 = () => this.rescue().allow(1);
  }

  /** mode says where decisions are made now: 'redis', or 'rescue' (in process). */
  get mode(): LimiterMode {
    return this.switch.mode;
  }

  /**
   * allow takes `n` tokens (default 1) from the shared bucket when it holds them. n > burst answers
   * false without asking Redis; n < 0 rejects with RangeError. Never rejects for a Redis failure.
   */
  allow(n = 1): Promise<boolean> {
    if (n === 1) return this.switch.run(this.send1, parseAllowed, this.local1);
    if (!(n >= 0)) return Promise.reject(new RangeError(`RedisTokenLimiter.allow: n must be a number ≥ 0, got ${String(n)}`));
    if (n > this.burst) return Promise.resolve(false);
    return this.switch.run(() => script.run(this.client, this.key, this.interval, this.burstArg, String(n)), parseAllowed, () => this.rescue().allow(n));
  }

  /** decide is `allow` with the numbers behind the answer. */
  decide(n = 1): Promise<LimitDecision> {
    if (!(n >= 0)) return Promise.reject(new RangeError(`RedisTokenLimiter.decide: n must be a number ≥ 0, got ${String(n)}`));
    if (n > this.burst) return Promise.resolve({ allowed: false, limit: this.burst, remaining: 0, retryAfterMs: Infinity, resetMs: 0 });
    const burst = this.burst;
    return this.switch.run(
      () => script.run(this.client, this.key, this.interval, this.burstArg, n === 1 ? ONE : String(n)),
      (r) => {
        if (!isIntArray(r, 4) || (r[0] !== 0 && r[0] !== 1)) return undefined;
        return { allowed: r[0] === 1, limit: burst, remaining: r[1]!, retryAfterMs: r[2]! < 0 ? Infinity : r[2]!, resetMs: r[3]! };
      },
      () => this.rescue().decide(n),
    );
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

  /** The rescue limiter, made again when the instance count changed. */
  private rescue(): TokenLimiter {
    const n = this.instances.get();
    if (n !== this.rescueFor) {
      this.rescueFor = n;
      this.rescueLimiter = this.makeRescue(n);
    }
    return this.rescueLimiter;
  }

  private makeRescue(instances: number): TokenLimiter {
    return new TokenLimiter({ rate: this.rate / instances, burst: Math.max(1, this.burst / instances), clock: this.clock });
  }
}

function parseAllowed(r: unknown): boolean | undefined {
  if (!isIntArray(r, 4)) return undefined;
  return r[0] === 1 ? true : r[0] === 0 ? false : undefined;
}
