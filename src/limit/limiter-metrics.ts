/**
 * The metric families of the limiters — the local ones (TokenLimiter, PeriodLimiter, KeyedLimiter) and
 * the Redis ones — read from their stats at scrape time; the limiters' `describeMetrics()` are made here.
 * @internal
 */
import type { MetricFamilySpec, MetricsDescription } from '../core/metrics-description.js';
import type { RedisLimiterStats } from './types.js';

const DECISIONS: MetricFamilySpec = {
  name: 'limiter_decisions_total',
  type: 'counter',
  help: 'Decisions of a limiter (local or Redis), by result: allowed or limited.',
  labelNames: ['result'],
};
const KEYS: MetricFamilySpec = { name: 'limiter_keys', type: 'gauge', help: 'Keys a keyed limiter (or a Redis limiter rescue) keeps now.', labelNames: [] };

const LIMITER_FAMILIES: readonly MetricFamilySpec[] = [
  DECISIONS,
  KEYS,
  { name: 'limiter_tokens', type: 'gauge', help: 'Tokens in a TokenLimiter bucket now.', labelNames: [] },
];
const REDIS_LIMITER_FAMILIES: readonly MetricFamilySpec[] = [
  DECISIONS,
  {
    name: 'limiter_mode',
    type: 'gauge',
    help: 'Where a Redis limiter decides now: 1 for the current mode (redis or rescue), 0 for the other.',
    labelNames: ['mode'],
  },
  {
    name: 'limiter_redis_decisions_total',
    type: 'counter',
    help: 'Decisions of a Redis limiter, by where they were made: redis or rescue (in process).',
    labelNames: ['mode'],
  },
  { name: 'limiter_rescue_switches_total', type: 'counter', help: 'Times a Redis limiter switched its decisions to the in-process rescue.', labelNames: [] },
  { name: 'limiter_redis_failures_total', type: 'counter', help: 'Redis calls of a limiter that failed (errors, timeouts, bad replies).', labelNames: [] },
  {
    name: 'limiter_rescue_instances',
    type: 'gauge',
    help: 'The divisor the rescue limiter applies to the rate or quota (instances of the service).',
    labelNames: [],
  },
  KEYS,
];

/** LocalLimiterStats are what a local limiter's stats() have in common: decisions, and keys or tokens. */
interface LocalLimiterStats {
  readonly allowed: number;
  readonly limited: number;
  readonly keys?: number;
  readonly tokens?: number;
}

/** describeLocalLimiter answers the description of a TokenLimiter, PeriodLimiter or KeyedLimiter. */
export function describeLocalLimiter(l: { stats(): LocalLimiterStats }, kind: string): MetricsDescription {
  return {
    kind,
    families: LIMITER_FAMILIES,
    collect: (emit) => {
      const s = l.stats();
      emit('limiter_decisions_total', { result: 'allowed' }, s.allowed ?? 0);
      emit('limiter_decisions_total', { result: 'limited' }, s.limited ?? 0);
      if (typeof s.keys === 'number') emit('limiter_keys', {}, s.keys);
      if (typeof s.tokens === 'number') emit('limiter_tokens', {}, s.tokens);
    },
  };
}

/** describeRedisLimiter answers the description of a RedisTokenLimiter or RedisPeriodLimiter. */
export function describeRedisLimiter(l: { stats(): RedisLimiterStats }, kind: string, closed: () => boolean): MetricsDescription {
  return {
    kind,
    families: REDIS_LIMITER_FAMILIES,
    collect: (emit) => {
      const s = l.stats();
      emit('limiter_decisions_total', { result: 'allowed' }, s.allowed ?? 0);
      emit('limiter_decisions_total', { result: 'limited' }, s.limited ?? 0);
      emit('limiter_mode', { mode: 'redis' }, s.mode === 'redis' ? 1 : 0);
      emit('limiter_mode', { mode: 'rescue' }, s.mode === 'rescue' ? 1 : 0);
      emit('limiter_redis_decisions_total', { mode: 'redis' }, s.redisDecisions);
      emit('limiter_redis_decisions_total', { mode: 'rescue' }, s.rescueDecisions);
      emit('limiter_rescue_switches_total', {}, s.outages);
      emit('limiter_redis_failures_total', {}, s.failures);
      emit('limiter_rescue_instances', {}, s.instances);
      emit('limiter_keys', {}, s.rescueKeys);
    },
    snapshot: () => {
      const s = l.stats();
      return { ...s, cause: s.cause === undefined ? undefined : s.cause instanceof Error ? s.cause.message : String(s.cause) };
    },
    closed,
  };
}
