/**
 * RedisPeriodLimiter is go-zero's PeriodLimit: `quota` calls per key per `periodMs`, counted in Redis
 * so that a fleet shares them; one atomic Lua script per decision (see redis-scripts.ts). Windows are
 * fixed: from a key's first call, or with `align` at multiples of `periodMs` of Redis's wall clock
 * (plus `alignOffsetMs`).
 *
 * When Redis fails or does not answer within `timeoutMs`, decisions go at once to an in-process
 * PeriodLimiter with `quota / instances` (at least 1) and come back to Redis at the first PONG.
 */
import { systemClock, type Clock } from '../core/clock.js';
import { clockOption, finite, integer, options as optionsOf, positive } from '../core/validate.js';
import type { Disposer } from '../core/events.js';
import type { KeyedRateLimiter, LimitDecision, LimiterMode, PeriodAnswer } from './index.js';
import { checkKey } from './keys.js';
import { PeriodLimiter } from './period-limiter.js';
import { RedisRescue, type ModeChange, type RedisClient, type RedisLimiterStats } from './rescue.js';
import { checkCommon, Instances, resolveClient, type RedisCommonOptions } from './redis-common.js';
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
export class RedisPeriodLimiter implements KeyedRateLimiter {
  readonly key: string;
  readonly periodMs: number;
  readonly quota: number;
  readonly align: boolean;
  readonly timeoutMs: number;
  private readonly client: RedisClient;
  private readonly owned: boolean;
  private readonly clock: Clock;
  private readonly switch: RedisRescue;
  private readonly instances: Instances;
  private readonly maxKeys: number;
  private readonly offset: number;
  private readonly args: [string, string];
  private readonly alignArgs: [string, string];
  private rescueLimiter: PeriodLimiter;
  private rescueFor: number;

  constructor(options: RedisPeriodLimiterOptions) {
    const o = optionsOf('RedisPeriodLimiter', options);
    this.key = checkKey('RedisPeriodLimiter', o.key);
    this.periodMs = finite('RedisPeriodLimiter', 'periodMs', o.periodMs, 1);
    positive('RedisPeriodLimiter', 'periodMs', this.periodMs);
    this.quota = integer('RedisPeriodLimiter', 'quota', o.quota, 1);
    if (o.align !== undefined && typeof o.align !== 'boolean') throw new TypeError(`RedisPeriodLimiter: align must be a boolean, got ${typeof o.align}`);
    this.align = o.align ?? redisPeriodLimiterDefaults.align;
    this.offset = finite('RedisPeriodLimiter', 'alignOffsetMs', o.alignOffsetMs ?? redisPeriodLimiterDefaults.alignOffsetMs);
    this.maxKeys = integer('RedisPeriodLimiter', 'maxKeys', o.maxKeys ?? redisPeriodLimiterDefaults.maxKeys, 1, 1 << 26);
    this.clock = clockOption('RedisPeriodLimiter', o.clock, systemClock);
    const { timeoutMs, probeIntervalMs } = checkCommon('RedisPeriodLimiter', o);
    this.timeoutMs = timeoutMs;
    const { client, owned } = resolveClient('RedisPeriodLimiter', o.redis);
    try {
      this.instances = new Instances('RedisPeriodLimiter', o);
    } catch (err) {
      if (owned) client.disconnect(); // a bad option must not leave a connection behind
      throw err;
    }
    this.client = client;
    this.owned = owned;
    this.args = [String(this.periodMs), String(this.quota)];
    this.alignArgs = [this.align ? '1' : '0', String(this.offset)];
    this.rescueFor = this.instances.get();
    this.rescueLimiter = this.makeRescue(this.rescueFor);
    this.switch = new RedisRescue(`RedisPeriodLimiter(${this.key})`, client, timeoutMs, probeIntervalMs, this.clock, script.lua);
    this.switch.onModeChange((e) => {
      if (e.mode === 'rescue') this.instances.refresh();
    });
  }

  /** mode says where decisions are made now: 'redis', or 'rescue' (in process). */
  get mode(): LimiterMode {
    return this.switch.mode;
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

  private redisKey(key: string): string {
    return `${this.key}:${checkKey('RedisPeriodLimiter', key)}`;
  }

  private send(k: string, n: string): Promise<unknown> {
    return script.run(this.client, k, this.args[0], this.args[1], n, this.alignArgs[0], this.alignArgs[1]);
  }

  private rescue(): PeriodLimiter {
    const n = this.instances.get();
    if (n !== this.rescueFor) {
      this.rescueFor = n;
      this.rescueLimiter = this.makeRescue(n);
    }
    return this.rescueLimiter;
  }

  private makeRescue(instances: number): PeriodLimiter {
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
