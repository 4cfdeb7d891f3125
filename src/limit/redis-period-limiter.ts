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
 *
 * `reconfigure({ quota, periodMs, algorithm, align, alignOffsetMs })` changes it live; the other options
 * (the client, prefix, timing, instances, clock) are fixed at construction. What Redis counted is kept:
 * a new quota counts against each key's current window at once; a new period or algorithm applies to a
 * key from its next window (its Redis key expires with its old one). The rescue limiter in use, if any, is
 * reconfigured in place (quota / instances), keeping its counts.
 */
import { finite, liveOptions, options as optionsOf, type OptionKeys } from '../core/validate.js';
import type { Reconfigurable } from '../core/reconfigurable.js';
import { redisKey } from './keys.js';
import { PeriodLimiter, periodSettings, renamedWindow, type PeriodLimiterLiveOptions } from './period-limiter.js';
import { REDIS_COMMON_KEYS, type RedisCommonOptions } from './redis-limiter-options.js';
import { RedisLimiterBase } from './redis-limiter-base.js';
import { isIntArray, PERIOD_SCRIPT, Script } from './redis-scripts.js';
import type { LimitDecision, PeriodAlgorithm, PeriodAnswer, SharedRateLimiter } from './types.js';

/** The keys of RedisPeriodLimiterOptions, all of them: any other is refused (see `options`). */
const REDIS_PERIOD_LIMITER_KEYS = {
  prefix: true,
  periodMs: true,
  quota: true,
  algorithm: true,
  align: true,
  alignOffsetMs: true,
  ...REDIS_COMMON_KEYS,
} as const satisfies OptionKeys<RedisPeriodLimiterOptions>;
/** The options a running RedisPeriodLimiter cannot change: all but the live ones (see `reconfigure`). */
const REDIS_PERIOD_LIMITER_FIXED = Object.keys(REDIS_PERIOD_LIMITER_KEYS).filter(
  (k) => !['periodMs', 'quota', 'algorithm', 'align', 'alignOffsetMs'].includes(k),
);

/** RedisPeriodLimiterOptions configures a RedisPeriodLimiter. */
export interface RedisPeriodLimiterOptions extends RedisCommonOptions {
  /** The prefix of the Redis keys (≤ 256 bytes, no braces): client key `k` is counted at `${prefix}{${k}}`. Required. */
  prefix: string;
  /** The window's length in milliseconds (≥ 1). Required. */
  periodMs: number;
  /** Calls allowed per key per window, an integer ≥ 1. Required. */
  quota: number;
  /** How calls are counted: `fixed` windows or the `sliding`-window counter (windows aligned to Redis's clock). Defaults to 'fixed'. */
  algorithm?: PeriodAlgorithm;
  /** Fixed windows start at multiples of `periodMs` of Redis's clock (UTC) instead of at a key's first call. Defaults to false. */
  align?: boolean;
  /** Shifts aligned windows: e.g. 8 × 3 600 000 for days in UTC+8. Defaults to 0. */
  alignOffsetMs?: number;
}

/** Defaults for RedisPeriodLimiterOptions (and see redisCommonDefaults). */
export const redisPeriodLimiterDefaults = Object.freeze({ algorithm: 'fixed' as const, align: false, alignOffsetMs: 0 });

const script = new Script(PERIOD_SCRIPT);

/** RedisPeriodLimiter is a quota per key per period in Redis, with an in-process rescue. */
export class RedisPeriodLimiter extends RedisLimiterBase<PeriodLimiter> implements SharedRateLimiter, Reconfigurable<PeriodLimiterLiveOptions> {
  readonly periodMs: number;
  readonly quota: number;
  readonly algorithm: PeriodAlgorithm;
  readonly align: boolean;
  private offset: number;
  private args: [string, string, string, string];

  constructor(options: RedisPeriodLimiterOptions) {
    const o = optionsOf('RedisPeriodLimiter', renamedWindow('RedisPeriodLimiter', options), REDIS_PERIOD_LIMITER_KEYS);
    const s = redisPeriodSettings(o);
    super('RedisPeriodLimiter', [script.lua], o);
    this.periodMs = s.periodMs;
    this.quota = s.quota;
    this.algorithm = s.algorithm;
    this.align = s.align;
    this.offset = s.alignOffsetMs;
    this.args = scriptArgs(s);
  }

  /** options answers the options this limiter runs now: those `reconfigure` may change. */
  options(): Required<PeriodLimiterLiveOptions> {
    return { periodMs: this.periodMs, quota: this.quota, algorithm: this.algorithm, align: this.align, alignOffsetMs: this.offset };
  }

  /**
   * reconfigure lays `partial` over `options()` and applies the result, validated as the constructor
   * validates it (the same errors; every other option refused: fixed at construction), all of it or, when
   * it throws, none. The next decision sends the new quota and period with its script call (decisions in
   * flight keep the old ones); the rescue limiter in use is reconfigured in place (see the file comment).
   */
  reconfigure(partial: Partial<PeriodLimiterLiveOptions>): void {
    const p = liveOptions('RedisPeriodLimiter', renamedWindow('RedisPeriodLimiter', partial), REDIS_PERIOD_LIMITER_KEYS, REDIS_PERIOD_LIMITER_FIXED);
    const s = redisPeriodSettings({ ...this.options(), ...p });
    const self = this as { -readonly [K in 'periodMs' | 'quota' | 'algorithm' | 'align']: RedisPeriodLimiter[K] };
    self.periodMs = s.periodMs;
    self.quota = s.quota;
    self.algorithm = s.algorithm;
    self.align = s.align;
    this.offset = s.alignOffsetMs;
    this.args = scriptArgs(s);
    const rescue = this.rescueInUse();
    rescue?.limiter.reconfigure({ ...s, quota: Math.max(1, Math.floor(s.quota / rescue.instances)) });
  }

  /** takeAnswer counts one call for `key` and answers go-zero's three answers (`hit-quota`: the last one allowed). */
  takeAnswer(key: string): Promise<PeriodAnswer> {
    const p = this.decideAnswer(key);
    return this.answered(p, key, 1);
  }

  private decideAnswer(key: string): Promise<PeriodAnswer> {
    return this.send(
      'takeAnswer',
      key,
      1,
      (r) => (r[0] === 0 ? 'over-quota' : r[1]! > 0 ? 'allowed' : 'hit-quota'),
      () => this.rescue().answer(key),
    );
  }

  /** take counts `n` calls (default 1) for `key` when the quota has room for them. Never rejects for a Redis failure. */
  take(key: string, n = 1): Promise<boolean> {
    const p = this.decideTake(key, n);
    return this.answered(p, key, n);
  }

  private decideTake(key: string, n: number): Promise<boolean> {
    if (n > this.quota && !this.closed) return redisKeyOrReject(this.prefix, key).then(() => false);
    return this.send(
      'take',
      key,
      n,
      (r) => r[0] === 1,
      () => this.rescue().allow(key, n),
    );
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
      algorithm: this.algorithm,
      align: this.align,
      alignOffsetMs: this.offset,
      maxKeys: this.maxKeys,
      // Aligned windows follow wall time, like Redis's; otherwise the limiter's clock.
      ...(this.align ? {} : { clock: this.clock }),
    });
  }
}

/** redisPeriodSettings validates the live options as PeriodLimiter does, the period ≥ 1 ms (Redis counts whole milliseconds). */
function redisPeriodSettings(o: Partial<PeriodLimiterLiveOptions>): ReturnType<typeof periodSettings> {
  finite('RedisPeriodLimiter', 'periodMs', o.periodMs, 1);
  return periodSettings('RedisPeriodLimiter', o);
}

/** scriptArgs are PERIOD_SCRIPT's arguments for these settings: period, quota, mode, offset. */
function scriptArgs(s: ReturnType<typeof periodSettings>): [string, string, string, string] {
  return [String(s.periodMs), String(s.quota), s.algorithm === 'sliding' ? 's' : s.align ? '1' : '0', String(s.alignOffsetMs)];
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
