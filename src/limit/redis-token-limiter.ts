/**
 * RedisTokenLimiter is one token bucket shared by every process that uses the same Redis key: `rate`
 * tokens per second, up to `burst`, one atomic Lua script per decision (see redis-scripts.ts).
 *
 * When Redis fails or does not answer within `timeoutMs`, decisions go at once to an in-process
 * TokenLimiter of `rate / instances` (see rescue.ts) and come back to Redis at the first PONG.
 */
import type { Clock } from '../core/clock.js';
import { checkKey } from './keys.js';
import { finite, options as optionsOf, positive } from '../core/validate.js';
import type { LimitDecision } from './index.js';
import type { RedisCommonOptions } from './redis-common.js';
import { RedisLimiterBase } from './redis-limiter-base.js';
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
export class RedisTokenLimiter extends RedisLimiterBase<TokenLimiter> {
  readonly rate: number;
  readonly burst: number;
  private readonly interval: string;
  private readonly burstArg: string;
  private readonly send1: () => Promise<unknown>;
  private readonly local1: () => boolean;

  constructor(options: RedisTokenLimiterOptions) {
    const o = optionsOf('RedisTokenLimiter', options);
    const key = checkKey('RedisTokenLimiter', o.key);
    const rate = positive('RedisTokenLimiter', 'rate', o.rate);
    const burst = finite('RedisTokenLimiter', 'burst', o.burst ?? Math.max(1, rate), 1);
    super('RedisTokenLimiter', key, script.lua, o);
    this.rate = rate;
    this.burst = burst;
    this.interval = String(1000 / this.rate);
    this.burstArg = String(this.burst);
    this.send1 = () => script.run(this.client, this.key, this.interval, this.burstArg, ONE);
    this.local1 = () => this.rescue().allow(1);
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

  protected makeRescue(instances: number): TokenLimiter {
    return new TokenLimiter({ rate: this.rate / instances, burst: Math.max(1, this.burst / instances), clock: this.clock });
  }
}

function parseAllowed(r: unknown): boolean | undefined {
  if (!isIntArray(r, 4)) return undefined;
  return r[0] === 1 ? true : r[0] === 0 ? false : undefined;
}
