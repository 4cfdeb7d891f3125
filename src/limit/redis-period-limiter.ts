/**
 * RedisPeriodLimiter is go-zero's PeriodLimit: `quota` calls per client key per `periodMs`, counted
 * in Redis so that a fleet shares them; one atomic Lua script per decision (see redis-scripts.ts).
 * Each client key is one Redis key, `prefix{key}` (hash-tagged for Cluster), expiring with its window.
 *
 * Windows, as PeriodLimiter's: `fixed` from a key's first call, or with `align` at multiples of
 * `periodMs` of Redis's wall clock (plus `alignOffsetMs`); or `sliding` (the sliding-window counter,
 * windows aligned like `align`: within any `periodMs` about `quota`, never 2 ×).
 *
 * When Redis fails or does not answer within `timeoutMs`, decisions go at once to an in-process
 * PeriodLimiter with `quota / instances` (at least 1) and come back to Redis after two PONGs in a row (see rescue.ts).
 */
import { finite, integer, options as optionsOf, positive, type OptionKeys } from '../core/validate.js';
import { redisKey } from './keys.js';
import { PeriodLimiter } from './period-limiter.js';
import type { RedisCommonOptions } from './redis-limiter-options.js';
import { RedisLimiterBase } from './redis-limiter-base.js';
import { isIntArray, PERIOD_SCRIPT, Script } from './redis-scripts.js';
import type { LimitDecision, PeriodAnswer, PeriodWindow, SharedRateLimiter } from './types.js';

/** The keys of RedisPeriodLimiterOptions, all of them: any other is refused (see `options`). */
const REDIS_PERIOD_LIMITER_KEYS = {
  prefix: true, periodMs: true, quota: true, window: true, align: true, alignOffsetMs: true, redis: true,
  timeoutMs: true, probeIntervalMs: true, instances: true, registry: true, service: true,
  instancesRefreshMs: true, maxKeys: true, clock: true,
} as const satisfies OptionKeys<RedisPeriodLimiterOptions>;

/** RedisPeriodLimiterOptions configures a RedisPeriodLimiter. */
export interface RedisPeriodLimiterOptions extends RedisCommonOptions {
  /** The prefix of the Redis keys (≤ 256 bytes, no braces): client key `k` is counted at `${prefix}{${k}}`. Required. */
  prefix: string;
  /** The window's length in milliseconds (≥ 1). Required. */
  periodMs: number;
  /** Calls allowed per key per window, an integer ≥ 1. Required. */
  quota: number;
  /** `fixed` or `sliding` (the sliding-window counter, windows aligned to Redis's clock). Defaults to 'fixed'. */
  window?: PeriodWindow;
  /** Fixed windows start at multiples of `periodMs` of Redis's clock (UTC) instead of at a key's first call. Defaults to false. */
  align?: boolean;
  /** Shifts aligned windows: e.g. 8 × 3 600 000 for days in UTC+8. Defaults to 0. */
  alignOffsetMs?: number;
}

/** Defaults for RedisPeriodLimiterOptions (and see redisCommonDefaults). */
export const redisPeriodLimiterDefaults = Object.freeze({ window: 'fixed' as const, align: false, alignOffsetMs: 0 });

const script = new Script(PERIOD_SCRIPT);

/** RedisPeriodLimiter is a quota per key per period in Redis, with an in-process rescue. */
export class RedisPeriodLimiter extends RedisLimiterBase<PeriodLimiter> implements SharedRateLimiter {
  readonly periodMs: number;
  readonly quota: number;
  readonly window: PeriodWindow;
  readonly align: boolean;
  private readonly offset: number;
  private readonly args: [string, string, string, string];

  constructor(options: RedisPeriodLimiterOptions) {
    const o = optionsOf('RedisPeriodLimiter', options, REDIS_PERIOD_LIMITER_KEYS);
    const periodMs = finite('RedisPeriodLimiter', 'periodMs', o.periodMs, 1);
    positive('RedisPeriodLimiter', 'periodMs', periodMs);
    const quota = integer('RedisPeriodLimiter', 'quota', o.quota, 1);
    const window = o.window ?? redisPeriodLimiterDefaults.window;
    if (window !== 'fixed' && window !== 'sliding') throw new TypeError(`RedisPeriodLimiter: window must be 'fixed' or 'sliding', got ${String(window)}`);
    if (o.align !== undefined && typeof o.align !== 'boolean') throw new TypeError(`RedisPeriodLimiter: align must be a boolean, got ${typeof o.align}`);
    const align = o.align ?? redisPeriodLimiterDefaults.align;
    const offset = finite('RedisPeriodLimiter', 'alignOffsetMs', o.alignOffsetMs ?? redisPeriodLimiterDefaults.alignOffsetMs);
    super('RedisPeriodLimiter', [script.lua], o);
    this.periodMs = periodMs;
    this.quota = quota;
    this.window = window;
    this.align = align;
    this.offset = offset;
    this.args = [String(periodMs), String(quota), window === 'sliding' ? 's' : align ? '1' : '0', String(offset)];
  }

  /** takeAnswer counts one call for `key` and answers go-zero's three answers (`hit-quota`: the last one allowed). */
  takeAnswer(key: string): Promise<PeriodAnswer> {
    const p = this.decideAnswer(key);
    return this.answered(p, key, 1);
  }

  private decideAnswer(key: string): Promise<PeriodAnswer> {
    return this.send('takeAnswer', key, 1, (r) => (r[0] === 0 ? 'over-quota' : r[1]! > 0 ? 'allowed' : 'hit-quota'), () => this.rescue().answer(key));
  }

  /** take counts `n` calls (default 1) for `key` when the quota has room for them. Never rejects for a Redis failure. */
  take(key: string, n = 1): Promise<boolean> {
    const p = this.decideTake(key, n);
    return this.answered(p, key, n);
  }

  private decideTake(key: string, n: number): Promise<boolean> {
    if (n > this.quota && !this.closed) return redisKeyOrReject(this.prefix, key).then(() => false);
    return this.send('take', key, n, (r) => r[0] === 1, () => this.rescue().allow(key, n));
  }

  /** takeDecision is `take` with the numbers behind the answer. */
  takeDecision(key: string, n = 1): Promise<LimitDecision> {
    const p = this.decideTakeDecision(key, n);
    return this.answered(p, key, n);
  }

  private decideTakeDecision(key: string, n: number): Promise<LimitDecision> {
    const quota = this.quota;
    if (n > quota && !this.closed) {
      return redisKeyOrReject(this.prefix, key).then(() => ({ allowed: false, limit: quota, remaining: 0, retryAfterMs: Infinity, resetMs: 0 }));
    }
    return this.send(
      'takeDecision',
      key,
      n,
      (r) => ({ allowed: r[0] === 1, limit: quota, remaining: r[1]!, retryAfterMs: r[3]! < 0 ? Infinity : r[3]!, resetMs: r[2]! }),
      () => this.rescue().decide(key, n),
    );
  }

  private send<R>(method: string, key: string, n: number, answer: (r: number[]) => R, local: () => R): Promise<R> {
    if (this.closed) return Promise.reject(this.closedError(method));
    if (!(n >= 0)) return Promise.reject(new RangeError(`RedisPeriodLimiter.${method}: n must be a number ≥ 0, got ${String(n)}`));
    let k: string;
    try {
      k = redisKey('RedisPeriodLimiter', this.prefix, key);
    } catch (err) {
      return Promise.reject(err);
    }
    const a = this.args;
    const count = String(n);
    return this.switch.run(
      k,
      () => script.evalsha(this.client, k, a[0], a[1], count, a[2], a[3]),
      (r) => (isReply(r) ? answer(r) : undefined),
      local,
      1,
      () => script.eval(this.client, k, a[0], a[1], count, a[2], a[3]),
    );
  }

  protected makeRescue(instances: number): PeriodLimiter {
    return new PeriodLimiter({
      periodMs: this.periodMs,
      quota: Math.max(1, Math.floor(this.quota / instances)),
      window: this.window,
      align: this.align,
      alignOffsetMs: this.offset,
      maxKeys: this.maxKeys,
      // Aligned windows follow wall time, like Redis's; otherwise the limiter's clock.
      ...(this.align ? {} : { clock: this.clock }),
    });
  }
}

function redisKeyOrReject(prefix: string, key: string): Promise<string> {
  try {
    return Promise.resolve(redisKey('RedisPeriodLimiter', prefix, key));
  } catch (err) {
    return Promise.reject(err);
  }
}

function isReply(r: unknown): r is [number, number, number, number] {
  return isIntArray(r, 4) && (r[0] === 0 || r[0] === 1) && r[1]! >= 0 && r[2]! >= 0 && r[3]! >= -1;
}
