/**
 * useRedis gives a describe block one real redis-server and an admin client: started in `before`,
 * stopped in `after`. Read the fields inside tests (they are set once the hook has run).
 */
import { after, before } from 'node:test';
import { Redis } from 'ioredis';
import type { RedisClient } from '../../src/limit/index.js';
import { startRedis, type RedisServer } from './redis.js';

/** RedisFixture is what useRedis sets up. */
export interface RedisFixture {
  srv: RedisServer;
  /** A client for setting up and inspecting keys (one retry per request). */
  admin: Redis;
}

export function useRedis(): RedisFixture {
  const fixture = {} as RedisFixture;
  before(async () => {
    fixture.srv = await startRedis();
    fixture.admin = new Redis(fixture.srv.url, { maxRetriesPerRequest: 1 });
  });
  after(async () => {
    fixture.admin?.disconnect();
    await fixture.srv?.stop();
  });
  return fixture;
}

/**
 * lyingClient is a real, connected client to `url` whose EVALSHA answers `reply` without asking Redis:
 * a Redis (or proxy) that answers the limit scripts with a shape they never send.
 */
export async function lyingClient(url: string, reply: unknown): Promise<{ client: RedisClient; disconnect(): void }> {
  const real = new Redis(url, { maxRetriesPerRequest: 1 });
  const client = new Proxy(real, {
    get(target, prop, receiver) {
      if (prop === 'evalsha') return () => Promise.resolve(reply);
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  }) as RedisClient;
  await real.ping();
  return { client, disconnect: () => real.disconnect() };
}

/** scriptCalls is how many EVALSHA + EVAL calls the server has run so far. */
export async function scriptCalls(admin: Redis): Promise<number> {
  const info = await admin.info('commandstats');
  let n = 0;
  for (const m of info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) n += Number(m[1]);
  return n;
}
