/**
 * TokenLimiter is an in-process token bucket: `rate` tokens per second up to `burst`, refilled
 * continuously (fractions of a token count), starting full.
 *
 * The state is one number, the bucket's "theoretical arrival time" (GCRA, as in ATM networks and
 * redis-cell): `tat` is the time at which the bucket would be full again. Taking n tokens moves it
 * n × interval later; a call is allowed when that keeps it within burst × interval of now. This is
 * exactly a token bucket, refill included, yet costs one clock read, a few arithmetic operations and
 * no allocation — and a rejection costs the same as an admission. Because time is never multiplied
 * by a rate, a whole-millisecond interval (rate 100/s → 10 ms) keeps the arithmetic exact.
 *
 * `reconfigure({ rate, burst })` changes it live and keeps the tokens the bucket holds (at most the new
 * burst; a debt of reserved `wait()`s stays a debt), refilling at the new rate from then on.
 */
import { systemClock, type Clock } from '../core/clock.js';
import { publishRefusal, limitRefusedChannel } from '../core/diagnostics.js';
import { AbortedError } from '../core/errors.js';
import { clockOption, finite, liveOptions, options as optionsOf, positive, type OptionKeys } from '../core/validate.js';
import type { Reconfigurable } from '../core/reconfigurable.js';
import type { LimitDecision, Limiter } from './types.js';
import type { MetricsDescription } from '../core/metrics-description.js';
import { describeLocalLimiter } from './limiter-metrics.js';

/** The keys of TokenLimiterOptions, all of them: any other is refused (see `options`). */
const TOKEN_LIMITER_KEYS = { rate: true, burst: true, clock: true } as const satisfies OptionKeys<TokenLimiterOptions>;
/** The options a running TokenLimiter cannot change (see `reconfigure`). */
const TOKEN_LIMITER_FIXED = ['clock'] as const;

/** TokenLimiterLiveOptions are the options `TokenLimiter.reconfigure` changes and `options()` answers. */
export type TokenLimiterLiveOptions = Omit<TokenLimiterOptions, 'clock'>;

/** TokenLimiterOptions configures a TokenLimiter. */
export interface TokenLimiterOptions {
  /** Tokens added per second, fractions allowed (0.5 = one every 2 s). Required. */
  rate: number;
  /** The bucket's size: the most tokens that can be taken at once, ≥ 1. Defaults to `rate` (at least 1). */
  burst?: number;
  /** The time source. Defaults to the monotonic system clock. */
  clock?: Clock;
}

/** WaitOptions are the options of `TokenLimiter.wait`. */
export interface WaitOptions {
  /** Ends the wait with `AbortedError`; the tokens reserved for it are given back. */
  signal?: AbortSignal | undefined;
}

/** Defaults for TokenLimiterOptions (burst defaults to the rate). */
export const tokenLimiterDefaults = Object.freeze({});

/**
 * Rounding slack, in intervals: with an interval that is not a whole number of milliseconds
 * (rate 3/s), sums of intervals carry rounding errors of ~1e-13; a call must not be refused for them.
 */
const SLACK = 1e-9;

/**
 * OWNED marks a TokenLimiter whose refusals its owner publishes on `bulwark:limit:refused` (a
 * KeyedLimiter's bucket: the owner knows the key), so that one refusal is one message. @internal
 */
export const OWNED: unique symbol = Symbol('bulwark.limit.owned');

/** TokenLimiter is an in-process token bucket with exact continuous refill. */
export class TokenLimiter implements Limiter, Reconfigurable<TokenLimiterLiveOptions> {
  /** @internal see OWNED */
  [OWNED] = false;
  /** rate is tokens per second. */
  readonly rate: number;
  /** burst is the bucket's size. */
  readonly burst: number;
  private readonly clock: Clock;
  /** Milliseconds per token. */
  private interval: number;
  /** burst × interval (plus rounding slack): how far ahead of now `tat` may run. */
  private span: number;
  /** The time at which the bucket is full again; ≤ now means full. */
  private tat: number;

  /** Decisions since the limiter was made that allowed / refused (`stats().allowed`, `stats().limited`). */
  private allowedCount = 0;
  private limitedCount = 0;

  constructor(options: TokenLimiterOptions) {
    const o = optionsOf('TokenLimiter', options, TOKEN_LIMITER_KEYS);
    this.rate = positive('TokenLimiter', 'rate', o.rate);
    this.burst = tokenBurst(o.burst, this.rate);
    this.clock = clockOption('TokenLimiter', o.clock, systemClock);
    this.interval = 1000 / this.rate;
    this.span = this.burst * this.interval + SLACK * this.interval;
    this.tat = this.clock.now();
  }

  /** options answers the options this limiter runs now: those `reconfigure` may change. */
  options(): Required<TokenLimiterLiveOptions> {
    return { rate: this.rate, burst: this.burst };
  }

  /**
   * reconfigure sets `rate` and `burst`, validated as the constructor validates them (the same errors;
   * `clock` is refused: fixed at construction), both or, when it throws, neither. `burst` not given stays
   * as it is; `burst: undefined` goes back to its default (the rate). The bucket keeps the tokens it holds,
   * at most the new burst; a debt (tokens reserved by `wait()` ahead of the refill) stays owed and is
   * refilled at the new rate. Waits already scheduled keep their time.
   */
  reconfigure(partial: Partial<TokenLimiterLiveOptions>): void {
    const p = liveOptions('TokenLimiter', partial, TOKEN_LIMITER_KEYS, TOKEN_LIMITER_FIXED);
    const rate = positive('TokenLimiter', 'rate', p.rate ?? this.rate);
    const burst = tokenBurst(Object.hasOwn(p, 'burst') ? p.burst : this.burst, rate);
    const now = this.clock.now();
    const held = this.tat > now ? this.burst - (this.tat - now) / this.interval : this.burst;
    const self = this as { -readonly [K in 'rate' | 'burst']: TokenLimiter[K] };
    self.rate = rate;
    self.burst = burst;
    this.interval = 1000 / rate;
    this.span = burst * this.interval + SLACK * this.interval;
    this.tat = now + (burst - Math.min(held, burst)) * this.interval;
  }

  /**
   * allow takes `n` tokens (default 1) when the bucket holds them and answers whether it did.
   * n > burst can never be satisfied: it answers false, always. n must be ≥ 0 (RangeError).
   */
  allow(n = 1): boolean {
    const now = this.clock.now();
    const tat = this.tat > now ? this.tat : now;
    const next = tat + n * this.interval;
    if (next - now <= this.span && n >= 0) {
      this.tat = next;
      this.allowedCount++;
      return true;
    }
    if (!(n >= 0)) throw badCount('allow', n);
    this.limitedCount++;
    if (limitRefusedChannel.hasSubscribers && !this[OWNED]) publishRefusal('TokenLimiter', this, undefined, n);
    return false;
  }

  /** decide is `allow` with the numbers behind the answer (see LimitDecision). */
  decide(n = 1): LimitDecision {
    if (!(n >= 0)) throw badCount('decide', n);
    const now = this.clock.now();
    const tat = this.tat > now ? this.tat : now;
    const next = tat + n * this.interval;
    const allowed = next - now <= this.span;
    if (allowed) {
      this.tat = next;
      this.allowedCount++;
    } else {
      this.limitedCount++;
      if (limitRefusedChannel.hasSubscribers && !this[OWNED]) publishRefusal('TokenLimiter', this, undefined, n);
    }
    const ahead = (allowed ? next : tat) - now;
    return {
      allowed,
      limit: this.burst,
      remaining: Math.max(0, Math.floor(this.burst - ahead / this.interval + SLACK)),
      retryAfterMs: allowed ? 0 : n > this.burst ? Infinity : Math.max(0, next - now - this.burst * this.interval),
      resetMs: ahead,
    };
  }

  /** idle tells whether the bucket is full, as a new one would be: forgetting it loses nothing. */
  idle(): boolean {
    return this.tat <= this.clock.now();
  }

  /** tokens is how many tokens the bucket holds now (fractional). */
  tokens(): number {
    const ahead = this.tat - this.clock.now();
    return ahead <= 0 ? this.burst : Math.max(0, this.burst - ahead / this.interval);
  }

  /** describeMetrics answers the limiter's families (`limiter_decisions_total`, `limiter_tokens`), read from its stats at scrape time. */
  describeMetrics(): MetricsDescription {
    return describeLocalLimiter(this, 'TokenLimiter');
  }

  /** stats is a snapshot: tokens in the bucket now (fractional), the rate and the burst. */
  stats(): { readonly tokens: number; readonly rate: number; readonly burst: number; readonly allowed: number; readonly limited: number } {
    return { tokens: this.tokens(), rate: this.rate, burst: this.burst, allowed: this.allowedCount, limited: this.limitedCount };
  }

  /**
   * wait resolves once `n` tokens (default 1) were taken. The tokens are reserved at once, in call
   * order, so that waiters are served first-come first-served and `allow()` callers cannot starve
   * them; the wait is the time the bucket needs to refill them (a timer set through the clock).
   * Rejects with RangeError when n > burst (it could never be served), and with AbortedError when
   * `signal` aborts (the reserved tokens are given back).
   */
  wait(n = 1, options?: WaitOptions): Promise<void> {
    if (!(n >= 0) || n > this.burst) {
      return Promise.reject(new RangeError(`TokenLimiter.wait: n must be a number in [0, burst = ${this.burst}], got ${String(n)}`));
    }
    const signal = options?.signal;
    if (signal?.aborted) return Promise.reject(new AbortedError('wait aborted', { cause: signal.reason }));
    const now = this.clock.now();
    const tat = this.tat > now ? this.tat : now;
    const next = tat + n * this.interval;
    this.tat = next;
    const waitMs = next - now - this.burst * this.interval;
    if (waitMs <= 0) return Promise.resolve();
    const give = n * this.interval;
    return new Promise<void>((resolve, reject) => {
      const clock = this.clock;
      const onAbort = () => {
        clock.clearTimeout(timer);
        this.tat -= give;
        reject(new AbortedError('wait aborted', { cause: signal!.reason }));
      };
      const timer = clock.setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, Math.ceil(waitMs));
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}

/** tokenBurst validates a bucket size, defaulting to the rate (at least 1). */
function tokenBurst(burst: unknown, rate: number): number {
  return finite('TokenLimiter', 'burst', burst ?? Math.max(1, rate), 1);
}

function badCount(method: string, n: unknown): RangeError {
  return new RangeError(`TokenLimiter.${method}: n must be a number ≥ 0, got ${String(n)}`);
}
