/**
 * RedisTokenLimiter is one token bucket shared by every process that uses the same Redis key: `rate`
 * tokens per second, up to `burst`, decided by an atomic Lua script in Redis (see redis-scripts.ts).
 *
 * Single-token decisions (`allow()`, `decide()`) made on Redis in the same tick are batched: they go
 * to Redis as ONE script call for k tokens that admits as many as the bucket holds, up to k, and the
 * first m callers in call order are allowed, the rest refused — the answers k calls in a row would get
 * at that instant (GCRA: admitting m of k is taking m tokens). A batch is sent at the end of the tick
 * (process.nextTick), or at once when it reaches 1 024 callers. `allow(n)` for n ≠ 1 is one
 * script call of its own. If the batch's call fails, times out or answers a bad shape, each of its
 * callers is decided by the rescue limiter, one by one, in call order.
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
  /** Tokens per second for the whole fleet, fractions allowed, at most 100 000 (see MAX_REDIS_RATE). Required. */
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
/** The script's 4th argument for a batch, and for a reply of 1 or 0 alone (`allow`). */
const BATCH = '1';
const ANSWER_ONLY = 'a';
/**
 * The highest rate a Redis bucket takes. Its state is a time in ms since the epoch, a double precise to
 * 2.4e-4 ms (0.24 µs) until 2039; each token moves it by 1 000 / rate ms, so above 100 000 tokens/s
 * the rounding of every step would exceed 0.1 % of a token — 2.4 % at 1 M/s, and from ~8 M/s a step
 * rounds to nothing and the bucket never empties. (A local TokenLimiter counts from process start and
 * has no such bound.)
 */
export const MAX_REDIS_RATE = 100_000;
/** The most single-token decisions one script call carries; a full batch is sent at once. */
const maxBatch = 1024;

/** A caller in a batch: its resolve, and whether it asked for the numbers (decide) or a boolean (allow). */
type Waiter = { resolve: (answer: boolean | LimitDecision) => void; decide: boolean };

/** RedisTokenLimiter is a token bucket in Redis with an in-process rescue. */
export class RedisTokenLimiter extends RedisLimiterBase<TokenLimiter> {
  readonly rate: number;
  readonly burst: number;
  private readonly interval: string;
  private readonly burstArg: string;
  /** One token, the answer alone (allow). */
  private readonly send1: () => Promise<unknown>;
  /** One token, the answer and its numbers (decide). */
  private readonly decide1: () => Promise<unknown>;
  private readonly local1: () => boolean;
  /** The single-token callers of this tick, not sent yet (undefined: no batch open). */
  private waiting: Waiter[] | undefined;
  private readonly flushTick = (): void => {
    const w = this.waiting;
    if (w !== undefined) this.flush(w);
  };

  constructor(options: RedisTokenLimiterOptions) {
    const o = optionsOf('RedisTokenLimiter', options);
    const key = checkKey('RedisTokenLimiter', o.key);
    const rate = positive('RedisTokenLimiter', 'rate', o.rate);
    if (rate > MAX_REDIS_RATE) {
      throw new RangeError(`RedisTokenLimiter: rate must be ≤ ${MAX_REDIS_RATE} tokens per second (the bucket's time in Redis would round by more than 0.1 % of a token per step), got ${rate}`);
    }
    const burst = finite('RedisTokenLimiter', 'burst', o.burst ?? Math.max(1, rate), 1);
    super('RedisTokenLimiter', key, script.lua, o);
    this.rate = rate;
    this.burst = burst;
    this.interval = String(1000 / this.rate);
    this.burstArg = String(this.burst);
    this.send1 = () => script.run(this.client, this.key, this.interval, this.burstArg, ONE, ANSWER_ONLY);
    this.decide1 = () => script.run(this.client, this.key, this.interval, this.burstArg, ONE);
    this.local1 = () => this.rescue().allow(1);
  }

  /**
   * allow takes `n` tokens (default 1) from the shared bucket when it holds them. n > burst answers
   * false without asking Redis; n < 0 rejects with RangeError. Never rejects for a Redis failure.
   */
  allow(n = 1): Promise<boolean> {
    if (n === 1) {
      if (this.switch.mode === 'rescue') return this.switch.run(this.send1, parseAllowed, this.local1);
      return this.enqueue(false) as Promise<boolean>;
    }
    if (!(n >= 0)) return Promise.reject(new RangeError(`RedisTokenLimiter.allow: n must be a number ≥ 0, got ${String(n)}`));
    if (n > this.burst) return Promise.resolve(false);
    return this.switch.run(() => script.run(this.client, this.key, this.interval, this.burstArg, String(n), ANSWER_ONLY), parseAllowed, () => this.rescue().allow(n));
  }

  /** decide is `allow` with the numbers behind the answer. */
  decide(n = 1): Promise<LimitDecision> {
    if (!(n >= 0)) return Promise.reject(new RangeError(`RedisTokenLimiter.decide: n must be a number ≥ 0, got ${String(n)}`));
    if (n > this.burst) return Promise.resolve({ allowed: false, limit: this.burst, remaining: 0, retryAfterMs: Infinity, resetMs: 0 });
    if (n === 1 && this.switch.mode === 'redis') return this.enqueue(true) as Promise<LimitDecision>;
    const burst = this.burst;
    return this.switch.run(
      n === 1 ? this.decide1 : () => script.run(this.client, this.key, this.interval, this.burstArg, String(n)),
      (r) => parseDecision(r, burst),
      () => this.rescue().decide(n),
    );
  }

  /** enqueue adds a single-token caller to this tick's batch (opening one if needed). */
  private enqueue(decide: boolean): Promise<boolean | LimitDecision> {
    let w = this.waiting;
    if (w === undefined) {
      w = this.waiting = [];
      process.nextTick(this.flushTick);
    }
    const p = new Promise<boolean | LimitDecision>((resolve) => w.push({ resolve, decide }));
    if (w.length >= maxBatch) this.flush(w);
    return p;
  }

  /** flush sends a batch as one script call: the plain one-token call for a lone caller, else the batch call. */
  private flush(w: Waiter[]): void {
    if (this.waiting === w) this.waiting = undefined;
    if (w.length === 1) {
      const c = w[0]!;
      void this.switch.run(c.decide ? this.decide1 : this.send1, (r) => this.answerOne(c, r), () => this.rescueBatch(w));
      return;
    }
    const count = String(w.length);
    void this.switch.run(
      () => script.run(this.client, this.key, this.interval, this.burstArg, count, BATCH),
      (r) => this.answerBatch(w, r),
      () => this.rescueBatch(w),
      w.length,
    );
  }

  /** answerOne checks a one-token reply and answers the lone caller; undefined (not answered) for a bad shape. */
  private answerOne(c: Waiter, r: unknown): true | undefined {
    const answer = c.decide ? parseDecision(r, this.burst) : parseAllowed(r);
    if (answer === undefined) return undefined;
    c.resolve(answer);
    return true;
  }

  /** answerBatch checks a batch reply and answers its callers; undefined (nobody answered) for a bad shape. */
  private answerBatch(w: Waiter[], r: unknown): true | undefined {
    const k = w.length;
    if (!isIntArray(r, 5) || r[0]! < 0 || r[0]! > k || r[1]! < 0 || r[3]! < 0) return undefined;
    const m = r[0]!;
    if (m < k && r[2]! < 1) return undefined;
    const burst = this.burst;
    const interval = 1000 / this.rate;
    const start = r[4]! / 1000;
    for (let i = 0; i < k; i++) {
      const c = w[i]!;
      if (!c.decide) {
        c.resolve(i < m);
      } else if (i < m) {
        const d = start + (i + 1) * interval; // the bucket's "full again" time after this caller's token
        c.resolve({ allowed: true, limit: burst, remaining: Math.max(0, Math.floor(burst - d / interval + 1e-9)), retryAfterMs: 0, resetMs: Math.ceil(d) });
      } else {
        c.resolve({ allowed: false, limit: burst, remaining: r[1]!, retryAfterMs: r[2]!, resetMs: r[3]! });
      }
    }
    return true;
  }

  /** rescueBatch decides each caller of a batch in process, in call order. */
  private rescueBatch(w: Waiter[]): true {
    const local = this.rescue();
    for (let i = 0; i < w.length; i++) {
      const c = w[i]!;
      c.resolve(c.decide ? local.decide(1) : local.allow(1));
    }
    return true;
  }

  protected makeRescue(instances: number): TokenLimiter {
    return new TokenLimiter({ rate: this.rate / instances, burst: Math.max(1, this.burst / instances), clock: this.clock });
  }
}

function parseDecision(r: unknown, burst: number): LimitDecision | undefined {
  if (!isIntArray(r, 4) || (r[0] !== 0 && r[0] !== 1)) return undefined;
  return { allowed: r[0] === 1, limit: burst, remaining: r[1]!, retryAfterMs: r[2]! < 0 ? Infinity : r[2]!, resetMs: r[3]! };
}

/** parseAllowed reads an ANSWER_ONLY reply: 1 or 0, anything else is a bad shape. */
function parseAllowed(r: unknown): boolean | undefined {
  return r === 1 ? true : r === 0 ? false : undefined;
}
