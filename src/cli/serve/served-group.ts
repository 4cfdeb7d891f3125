/**
 * ServedGroup is one group of a `bulwark serve` node: the cache `Group` with its stale-on-error store
 * turned on, and the client API's words for what `Group.getWithInfo` answers — where a value came from
 * (`main`, `hot`, `peer`, `origin`, `stale`; the library's `getter` is the origin here) and its age.
 */
import { Group, type GetterResult, type GroupAnswer, type HttpPool } from '../../cache/index.js';
import type { Clock } from '../../core/index.js';

/** Source says where an answer came from (the `x-bulwark-source` header). */
export type Source = 'main' | 'hot' | 'peer' | 'origin' | 'stale';

/** Answer is a value and what the client API says about it. */
export interface Answer extends Omit<GroupAnswer, 'source'> {
  source: Source;
}

/** ServedGroupOptions configures a ServedGroup. */
export interface ServedGroupOptions {
  name: string;
  cacheBytes: number;
  hotCacheBytes: number;
  ttlMs: number;
  negativeTtlMs: number;
  ttlJitter?: number;
  loadTimeoutMs: number;
  staleBytes: number;
  staleMaxAgeMs: number;
  pool: HttpPool;
  load: (key: string, signal: AbortSignal) => Promise<GetterResult>;
  clock: Clock;
}

/** answerOf says the group's answer in the client API's words (the getter is the origin here). */
function answerOf(a: GroupAnswer): Answer {
  return a.source === 'getter' ? { value: a.value, source: 'origin', ageMs: a.ageMs } : (a as Answer);
}

/** ServedGroup wraps a Group for the client API. */
export class ServedGroup {
  readonly group: Group;

  constructor(o: ServedGroupOptions) {
    const total = o.cacheBytes + o.hotCacheBytes;
    this.group = new Group({
      name: o.name,
      cacheBytes: total,
      hotCacheRatio: o.hotCacheBytes / total,
      ttlMs: o.ttlMs,
      negativeTtlMs: o.negativeTtlMs,
      ...(o.ttlJitter === undefined ? {} : { ttlJitter: o.ttlJitter }),
      timeoutMs: o.loadTimeoutMs,
      staleBytes: o.staleBytes,
      staleMaxAgeMs: o.staleMaxAgeMs,
      clock: o.clock,
      peers: o.pool,
      getter: (key, { signal }) => o.load(key, signal),
    });
  }

  /** get answers `key` with its source and age; rejects what `Group.getWithInfo` rejects. */
  get(key: string, signal: AbortSignal | undefined): Promise<Answer> {
    try {
      return this.group.getWithInfo(key, signal === undefined ? undefined : { signal }).then(answerOf);
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  /** getCached answers a value this node's main or hot cache holds (`Group.getCached`: no promise), else undefined. */
  getCached(key: string): Answer | undefined {
    // A held value's source is main or hot, already the client API's words.
    return this.group.getCached(key) as Answer | undefined;
  }

  /** remove deletes `key` on every node (and its last good value here). */
  remove(key: string): Promise<void> {
    return this.group.remove(key);
  }

  /** stats answers the group's counters and its caches' sizes (main, hot and stale). */
  stats(): Record<string, unknown> {
    return { ...this.group.stats(), caches: this.group.cacheStats() };
  }
}
