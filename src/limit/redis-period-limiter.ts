/**
 * RedisPeriodLimiter is go-zero's PeriodLimit: `quota` calls per key per `periodMs`, counted in Redis
 * so that a fleet shares them; one atomic Lua script per decision (see redis-scripts.ts). Windows are
 * fixed: from a key's first call, or with `align` at multiples of `periodMs` of Redis's wall clock
 * (plus `alignOffsetMs`).
 *
 * When Redis fails or does not answer within `timeoutMs`, decisions go at once to an in-process
 * PeriodLimiter with `quota / instances` (at least 1) and come back to Redis at the first PONG.
 */
import type { Clock } from '../core/clock.js';
import { finite, integer, options as optionsOf, positive } from '../core/validate.js';
import type { KeyedRateLimiter, LimitDecision, PeriodAnswer } from './index.js';
import { checkKey } from './keys.js';
import { PeriodLimiter } from './period-limiter.js';
import type { RedisCommonOptions } from './redis-common.js';
import { RedisLimiterBase } from './redis-limiter-base.js';
import { isIntArray, PERIOD_SCRIPT, Script } from './redis-scripts.js';

/** RedisPeriodLimiterOptions configures a RedisPeriodLimiter. */
export interface RedisPeriodLimiterOptions extends RedisCommonOptions {
  /** Prefix of the Redis keys: a key `k` is counted at `${key}:${k}`. Required. */
  key: string;
  /** The window's length in milliseconds (≥ 1). Required. */
  periodMs: number;
  /** Calls allowed per key per window, an integer ≥ 1. Required. */
  quota: number;
  /** Windows start at multiples of `periodMs` of Redis's clock (UTC) instead of at a key's first call. Defaults to false. */
  align?: boolean;
  /** Shifts aligned windows: e.g. 8 × 3 600 000 for days in UTC+8. Defaults to 0. */
  alignOffsetMs?: number;
  /** The most keys the rescue limiter keeps. Defaults to 10 000. */
  maxKeys?: number;
  /** The time source for deadlines and the rescue limiter. Defaults to the monotonic system clock. */
  clock?: Clock;
}

/** Defaults for RedisPeriodLimiterOptions (and see redisCommonDefaults). */
export const redisPeriodLimiterDefaults = Object.freeze({ align: false, alignOffsetMs: 0, maxKeys: 10_000 });

const script = new Script(PERIOD_SCRIPT);

/** RedisPeriodLimiter is a quota per key per period in Redis, with an in-process rescue. */
export class RedisPeriodLimiter extends RedisLimiterBase<PeriodLimiter> implements KeyedRateLimiter {
  readonly periodMs: number;
  readonly quota: number;
  readonly align: boolean;
  private readonly maxKeys: number;
  private readonly offset: number;
  private readonly args: [string, string];
  private readonly alignArgs: [string, string];

  constructor(options: RedisPeriodLimiterOptions) {
    const o = optionsOf('RedisPeriodLimiter', options);
    const key = checkKey('RedisPeriodLimiter', o.key);
    const periodMs = finite('RedisPeriodLimiter', 'periodMs', o.periodMs, 1);
    positive('RedisPeriodLimiter', 'periodMs', periodMs);
    const quota = integer('RedisPeriodLimiter', 'quota', o.quota, 1);
    if (o.align !== undefined && typeof o.align !== 'boolean') throw new TypeError(`RedisPeriodLimiter: align must be a boolean, got ${typeof o.align}`);
    const align = o.align ?? redisPeriodLimiterDefaults.align;
    const offset = finite('RedisPeriodLimiter', 'alignOffsetMs', o.alignOffsetMs ?? redisPeriodLimiterDefaults.alignOffsetMs);
    const maxKeys = integer('RedisPeriodLimiter', 'maxKeys', o.maxKeys ?? redisPeriodLimiterDefaults.maxKeys, 1, 1 << 26);
    super('RedisPeriodLimiter', key, script.lua, o);
    this.periodMs = periodMs;
    this.quota = quota;
    this.align = align;
    this.offset = offset;
    this.maxKeys = maxKeys;
    this.args = [String(periodMs), String(quota)];
    this.alignArgs = [align ? '1' : '0', String(offset)];
  }

  /** take counts one call for `key` and answers go-zero's three answers (`hit-quota`: the last one allowed). */
  take(key: string): Promise<PeriodAnswer> {
    const k = this.redisKey(key);
    const quota = this.quota;
    return this.switch.run(
      () => this.send(k, '1'),
      (r) => (isReply(r) ? (r[0] === 0 ? 'over-quota' : r[1]! < quota ? 'allowed' : 'hit-quota') : undefined),
      () => this.rescue().take(key),
    );
  }

  /** allow counts `n` calls (default 1) for `key` when the quota has room for them. */
  allow(key: string, n = 1): Promise<boolean> {
    const k = this.redisKey(key);
    if (!(n >= 0)) return Promise.reject(new RangeError(`RedisPeriodLimiter.allow: n must be a number ≥ 0, got ${String(n)}`));
    if (n > this.quota) return Promise.resolve(false);
    return this.switch.run(
      () => this.send(k, String(n)),
      (r) => (isReply(r) ? r[0] === 1 : undefined),
      () => this.rescue().allow(key, n),
    );
  }

  /** decide is `allow` with the numbers behind the answer. */
  decide(key: string, n = 1): Promise<LimitDecision> {
    const k = this.redisKey(key);
    if (!(n >= 0)) return Promise.reject(new RangeError(`RedisPeriodLimiter.decide: n must be a number ≥ 0, got ${String(n)}`));
    const quota = this.quota;
    if (n > quota) return Promise.resolve({ allowed: false, limit: quota, remaining: 0, retryAfterMs: Infinity, resetMs: 0 });
    return this.switch.run(
      () => this.send(k, String(n)),
      (r) => {
        if (!isReply(r)) return undefined;
        const allowed = r[0] === 1;
        return { allowed, limit: quota, remaining: Math.max(0, quota - r[1]!), retryAfterMs: allowed ? 0 : r[2]!, resetMs: r[2]! };
      },
      () => this.rescue().decide(key, n),
    );
  }

  private redisKey(key: string): string {
    return `${this.key}:${checkKey('RedisPeriodLimiter', key)}`;
  }

  private send(k: string, n: string): Promise<unknown> {
    return script.run(this.client, k, this.args[0], this.args[1], n, this.alignArgs[0], this.alignArgs[1]);
  }

  protected makeRescue(instances: number): PeriodLimiter {
    return new PeriodLimiter({
      periodMs: this.periodMs,
      quota: Math.max(1, Math.floor(this.quota / instances)),
      align: this.align,
      alignOffsetMs: this.offset,
      maxKeys: this.maxKeys,
      // Aligned rescue windows follow wall time, like Redis's; otherwise the limiter's clock.
      ...(this.align ? {} : { clock: this.clock }),
    });
  }
}

function isReply(r: unknown): r is [number, number, number] {
  return isIntArray(r, 3) && (r[0] === 0 || r[0] === 1) && r[1]! >= 0 && r[2]! > 0;
}
