/**
 * checkRule validates a rule offline (the CLI's `check` and `set`, before anything is written): its
 * shape (parse-rule.ts), then its options with the component's own constructor — a throwaway built
 * from the rule's `set` over placeholders for the options a constructor requires, on a ManualClock so
 * no timer runs, and closed at once — so the message is the constructor's, word for word. A running
 * component checks again in `reconfigure`, against the options it runs: that check is the one that
 * decides; this one refuses early what no component would take.
 */
import { ManualClock } from '../core/clock.js';
import { RuleInvalidError } from '../core/errors.js';
import { parseRule } from './parse-rule.js';
import { ruleKey } from './rule-key.js';
import type { OptionsRuleKind, Rule } from './types.js';

type Set = Record<string, unknown>;
/** A throwaway component: only closing it matters. */
type Throwaway = { close?: () => unknown } | object;

/**
 * One builder per options kind. Options come from JSON and are checked by the constructor, whose type
 * cannot be known before that check: hence the `never` they are passed as. Modules are loaded on use,
 * so that bulwark/rules does not load ioredis or undici until a rule of theirs is checked.
 */
const builders: Readonly<Record<OptionsRuleKind, (set: Set, clock: ManualClock) => Promise<Throwaway>>> = {
  'token-limiter': async (set, clock) => new (await import('../limit/token-limiter.js')).TokenLimiter({ rate: 1, clock, ...set } as never),
  'keyed-limiter': async (set, clock) => new (await import('../limit/keyed-limiter.js')).KeyedLimiter({ rate: 1, clock, ...set } as never),
  'period-limiter': async (set, clock) => new (await import('../limit/period-limiter.js')).PeriodLimiter({ periodMs: 1000, quota: 1, clock, ...set } as never),
  'redis-token-limiter': async (set, clock) =>
    withRedis(
      async (redis) => new (await import('../limit/redis-token-limiter.js')).RedisTokenLimiter({ redis, prefix: 'check:', rate: 1, clock, ...set } as never),
    ),
  'redis-period-limiter': async (set, clock) =>
    withRedis(
      async (redis) =>
        new (await import('../limit/redis-period-limiter.js')).RedisPeriodLimiter({
          redis,
          prefix: 'check:',
          periodMs: 1000,
          quota: 1,
          clock,
          ...set,
        } as never),
    ),
  bulkhead: async (set) => new (await import('../policy/bulkhead.js')).Bulkhead(set as never),
  'adaptive-shedder': async (set, clock) => new (await import('../limit/adaptive-shedder.js')).AdaptiveShedder({ clock, ...set } as never),
  'circuit-breaker': async (set, clock) => new (await import('../breaker/circuit-breaker.js')).CircuitBreaker({ clock, ...set } as never),
  'sre-breaker': async (set, clock) => new (await import('../breaker/sre-breaker.js')).SreBreaker({ clock, ...set } as never),
  timeout: async (set, clock) => new (await import('../policy/timeout.js')).Timeout({ clock, ...set } as never),
  retry: async (set, clock) => new (await import('../policy/retry.js')).Retry({ clock, ...set } as never),
  'retry-budget': async (set, clock) => new (await import('../policy/retry-budget.js')).RetryBudget({ clock, ...set } as never),
  // A client's rule sets one service's live options: checked by reconfigureService, which refuses the
  // options fixed at construction with the message a running client gives.
  client: async (set, clock) => {
    const { ResilientClient } = await import('../client/resilient-client.js');
    const { MemoryRegistry } = await import('../registry/memory-registry.js');
    const client = new ResilientClient({ registry: new MemoryRegistry(), clock });
    try {
      client.reconfigureService('check', set as never);
    } catch (err) {
      await client.close();
      throw err;
    }
    return client;
  },
};

/** withRedis builds a Redis limiter on a client that never connects, and disconnects it whatever happens. */
async function withRedis(build: (redis: unknown) => Promise<Throwaway>): Promise<Throwaway> {
  const { Redis } = await import('ioredis');
  const redis = new Redis({ lazyConnect: true, enableOfflineQueue: false, retryStrategy: () => null });
  try {
    const made = await build(redis);
    return {
      close: async () => {
        await (made as { close?: () => unknown }).close?.();
        redis.disconnect();
      },
    };
  } catch (err) {
    redis.disconnect();
    throw err;
  }
}

/** The options field a constructor's message names: `Owner: field …` → `field`. */
export function fieldOf(message: string): string | undefined {
  return /^[\w.]+: ([\w.[\]-]+)/.exec(message)?.[1];
}

/** checkRuleOptions validates a parsed rule's options with its component's validation; throws RuleInvalidError. */
export async function checkRuleOptions(rule: Rule): Promise<void> {
  const key = ruleKey(rule);
  if (rule.kind === 'fault') return checkFault(rule.fault, key);
  if (!('set' in rule)) return;
  const build = builders[rule.kind];
  let made: Throwaway;
  try {
    made = await build(rule.set, new ManualClock());
  } catch (err) {
    if (!(err instanceof TypeError || err instanceof RangeError)) throw err;
    throw new RuleInvalidError(err.message, { key, field: fieldOf(err.message), cause: err });
  }
  await (made as { close?: () => unknown }).close?.();
}

/** checkFault validates fault options with FaultInjector's constructor (bulwark/policy). */
async function checkFault(fault: Record<string, unknown>, key: string): Promise<void> {
  const { FaultInjector } = await import('../policy/fault.js');
  try {
    await new FaultInjector(fault as never).close();
  } catch (err) {
    if (!(err instanceof TypeError || err instanceof RangeError)) throw err;
    throw new RuleInvalidError(err.message, { key, field: fieldOf(err.message) === undefined ? 'fault' : `fault.${fieldOf(err.message)}`, cause: err });
  }
}

/** checkRule parses and validates a rule document offline (see the module comment); `key`, when the document was read at one. */
export async function checkRule(text: string, key?: string): Promise<Rule> {
  const rule = parseRule(text, key);
  await checkRuleOptions(rule);
  return rule;
}
