/**
 * The Redis limiters' client: the one given, or one made from a `redis://` URL and then owned.
 */
import { Redis } from 'ioredis';
import type { RedisClient } from './types.js';

/** ownClient makes the limiter's own ioredis client from a URL. */
export function ownClient(url: string): Redis {
  const client = new Redis(url, {
    // No auto-pipelining: it costs a lone caller ~2 × the latency; concurrent decisions share
    // socket writes anyway (rescue.ts corks the socket while decisions are in flight).
    // Reconnect fast: while Redis is down, decisions are local anyway; when it is back, they return
    // at the PONGs of the probe, which need a connection.
    retryStrategy: (times) => Math.min(times * 10, 100),
    maxRetriesPerRequest: 1,
    lazyConnect: false,
  });
  // Connection errors surface as failed decisions (and the rescue's cause); without a listener,
  // ioredis would print every reconnect attempt.
  client.on('error', () => {});
  return client;
}

/** resolveClient checks the `redis` option and answers the client, and whether the limiter owns it. */
export function resolveClient(owner: string, redis: unknown): { client: RedisClient; owned: boolean } {
  if (typeof redis === 'string') {
    if (!/^rediss?:\/\//.test(redis)) throw new TypeError(`${owner}: redis must be an ioredis client or a redis:// URL, got ${JSON.stringify(redis)}`);
    return { client: ownClient(redis), owned: true };
  }
  if (redis === null || typeof redis !== 'object' || typeof (redis as { evalsha?: unknown }).evalsha !== 'function') {
    throw new TypeError(`${owner}: redis must be an ioredis client or a redis:// URL, got ${redis === null ? 'null' : typeof redis}`);
  }
  return { client: redis as RedisClient, owned: false };
}
