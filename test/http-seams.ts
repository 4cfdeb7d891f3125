/**
 * The real Redis limiters and AdaptiveShedder as HttpGuard's seams, while their verbs change on other
 * branches: the Redis limiters move from a promise-answering `decide(key, n)` to `takeDecision(key, n)`,
 * and AdaptiveShedder's token becomes an AdmissionToken (with `release()`). Each helper passes the object
 * through unchanged once it fits, or adapts the older shape; when every caller fits, delete this file
 * and pass the limiters and the shedder as they are.
 */
import type { LimitDecision } from '../src/core/admission.js';
import type { HttpAsyncLimiter, HttpLimiter, HttpShedder } from '../src/http/index.js';

/**
 * shedderSeam hands AdaptiveShedder to the guard. Its token is becoming an AdmissionToken (with
 * `release()`) on another branch; until then a release frees the slot through `failure()`, as the
 * shedder's release will. Once AdaptiveShedder.admit() answers an AdmissionToken, pass the shedder as it is.
 */
export function shedderSeam(s: { admit(): { success(): void; failure(): void } }): HttpShedder {
  return {
    admit: () => {
      const t = s.admit();
      return { success: () => t.success(), failure: () => t.failure(), release: () => t.failure() };
    },
  };
}

/** A Redis limiter, whichever verb it answers today: `takeDecision(key, n)`, or the older promise-answering `decide(key, n)`. */
export interface RedisLimiterNow {
  takeDecision?(key: string, n?: number): Promise<LimitDecision>;
  decide?(key: string, n?: number): Promise<LimitDecision>;
}

function answersTakeDecision<L extends RedisLimiterNow>(l: L): l is L & HttpAsyncLimiter {
  return typeof l.takeDecision === 'function';
}

/**
 * redisSeam hands a Redis limiter to the guard: the limiter itself once it answers
 * `takeDecision(key, n)` (the guard takes it directly), else an adapter over the older `decide`.
 */
export function redisSeam(l: RedisLimiterNow): HttpLimiter {
  if (answersTakeDecision(l)) return l;
  const decide = l.decide;
  if (decide === undefined) throw new TypeError('a Redis limiter answers takeDecision() or decide()');
  return { takeDecision: (key, n) => decide.call(l, key, n) };
}
