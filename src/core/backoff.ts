/**
 * Backoff computes waits between attempts: exponential, capped, with full or decorrelated jitter
 * (AWS Architecture Blog, "Exponential Backoff And Jitter"). Chance is injected (`random`).
 */
import { finite, fn, options as checkOptions, positive, type OptionKeys } from './validate.js';

/** The keys of BackoffOptions, all of them: any other is refused (see `options`). */
export const BACKOFF_KEYS = { initialMs: true, maxMs: true, multiplier: true, jitter: true, random: true } as const satisfies OptionKeys<BackoffOptions>;

/** Jitter chooses how a wait is randomised: `none`, `full` (uniform in [0, exp]) or `decorrelated` (uniform in [initial, 3 × previous]). */
export type Jitter = 'none' | 'full' | 'decorrelated';

/** BackoffOptions configures a Backoff. */
export interface BackoffOptions {
  /** The first wait in milliseconds (before jitter). Defaults to 100. */
  initialMs?: number;
  /** The longest wait in milliseconds. Defaults to 10 000. */
  maxMs?: number;
  /** Growth factor per attempt. Defaults to 2. */
  multiplier?: number;
  /** How waits are randomised. Defaults to `'full'`. */
  jitter?: Jitter;
  /** Uniform random numbers in [0, 1). Defaults to `Math.random`. */
  random?: () => number;
}

/** Defaults for BackoffOptions. */
export const backoffDefaults = Object.freeze({ initialMs: 100, maxMs: 10_000, multiplier: 2, jitter: 'full' as Jitter });

/** Backoff yields successive waits; `reset()` starts over after a success. */
export class Backoff {
  readonly initialMs: number;
  readonly maxMs: number;
  readonly multiplier: number;
  readonly jitter: Jitter;
  private readonly random: () => number;
  private attempt = 0;
  private previous: number;

  constructor(options: BackoffOptions = {}) {
    checkOptions('Backoff', options, BACKOFF_KEYS);
    this.initialMs = finite('Backoff', 'initialMs', options.initialMs ?? backoffDefaults.initialMs, 0);
    this.maxMs = finite('Backoff', 'maxMs', options.maxMs ?? backoffDefaults.maxMs, this.initialMs);
    this.multiplier = finite('Backoff', 'multiplier', options.multiplier ?? backoffDefaults.multiplier, 1);
    const jitter = options.jitter ?? backoffDefaults.jitter;
    if (jitter !== 'none' && jitter !== 'full' && jitter !== 'decorrelated') {
      throw new RangeError(`Backoff: jitter must be 'none', 'full' or 'decorrelated', got ${String(jitter)}`);
    }
    this.jitter = jitter;
    this.random = options.random === undefined ? Math.random : fn('Backoff', 'random', options.random);
    this.previous = this.initialMs;
  }

  /** attempts is how many waits have been handed out since the last reset. */
  get attempts(): number {
    return this.attempt;
  }

  /** next returns the wait before the next attempt, in milliseconds. */
  next(): number {
    const n = this.attempt++;
    if (this.jitter === 'decorrelated') {
      const upper = Math.min(this.maxMs, this.previous * 3);
      const wait = Math.min(this.maxMs, this.initialMs + this.random() * Math.max(0, upper - this.initialMs));
      this.previous = Math.max(wait, this.initialMs);
      return wait;
    }
    const exp = Math.min(this.maxMs, this.initialMs * Math.pow(this.multiplier, n));
    return this.jitter === 'full' ? this.random() * exp : exp;
  }

  /** reset starts the sequence over. */
  reset(): void {
    this.attempt = 0;
    this.previous = this.initialMs;
  }
}

/** addJitter spreads `ms` by ±`fraction` (e.g. 0.1 for ±10 %), so that things started together do not fire together. */
export function addJitter(ms: number, fraction: number, random: () => number = Math.random): number {
  positive('addJitter', 'ms', ms);
  return ms * (1 - fraction + 2 * fraction * random());
}
