import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { etcdBinary, startEtcd } from './support/etcd.js';
import { redisBinary, startRedis } from './support/redis.js';
import { canConnect, skipReason } from './support/servers.js';

describe('test harness', () => {
  it('starts, kills and restarts a real etcd', { skip: skipReason(etcdBinary, 'etcd') }, async () => {
    const etcd = await startEtcd();
    try {
      const port = Number(new URL(etcd.endpoint).port);
      assert.equal(await canConnect(port), true);
      await etcd.kill();
      assert.equal(await canConnect(port), false);
      await etcd.restart();
      assert.equal(await canConnect(port), true);
    } finally {
      await etcd.stop();
    }
  });

  it('starts and stops a real redis-server', { skip: skipReason(redisBinary, 'redis-server') }, async () => {
    const redis = await startRedis();
    try {
      assert.equal(await canConnect(redis.port), true);
    } finally {
      await redis.stop();
    }
    assert.equal(await canConnect(redis.port), false);
  });
});
