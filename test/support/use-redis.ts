/**
 * useRedis gives a describe block one real redis-server and an admin client: started in `before`,
 * stopped in `after`. Read the fields inside tests (they are set once the hook has run).
 */
import { after, before } from 'node:test';
import { Redis } from 'ioredis';
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
