import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../core/clock.js';
import { NotFoundError } from '../core/errors.js';
import type { ServiceInstance } from '../registry/types.js';
import { FleetFeed, STATUS_PATH_KEY } from './fleet-feed.js';
import { addressParts, statusPathOk } from './instance-stream.js';
import type { FleetFrame } from './types.js';

describe('what the aggregator follows', () => {
  it('takes a plain absolute path only: no scheme, host, query, fragment or ..', () => {
    for (const p of ['/dashboard/events', '/a/b-c_d.e~f/events', '/']) assert.ok(statusPathOk(p), p);
    for (const p of ['http://evil/x', '//evil/x', 'dashboard/events', '/a/../b', '/x?y=1', '/x#y', '/x y', '']) assert.ok(!statusPathOk(p), p);
  });

  it('takes host:port addresses only', () => {
    assert.deepEqual(addressParts('127.0.0.1:8080'), { host: '127.0.0.1', port: 8080 });
    assert.deepEqual(addressParts('[::1]:9'), { host: '::1', port: 9 });
    assert.deepEqual(addressParts('node-1.svc:80'), { host: 'node-1.svc', port: 80 });
    for (const a of ['user@host:80', 'host:80/path', 'http://host:80', 'host', 'host:0', 'host:70000']) assert.equal(addressParts(a), undefined, a);
  });
});

describe('FleetFeed', () => {
  /** A registry whose instances the test sets. */
  function registry(list: ServiceInstance[]) {
    return {
      list,
      // 'ghost' is listed with no instance left: it left between the listing and the lookup
      listServices: async () => [...new Set(list.map((i) => i.name)), 'ghost'],
      getService: async (name: string) => {
        const l = list.filter((i) => i.name === name);
        if (l.length === 0) throw new NotFoundError(`no ${name}`);
        return l;
      },
    };
  }
  const inst = (id: string, meta?: Record<string, string>, address = '127.0.0.1:1'): ServiceInstance => ({
    id,
    name: 'orders',
    address,
    ...(meta === undefined ? {} : { metadata: meta }),
  });
  const frame = (f: FleetFeed) => JSON.parse(f.latest()!) as FleetFrame;

  it('follows the instances that announce a path, warns of those it will not follow, and shows one that leaves as gone, then drops it', async () => {
    const clock = new ManualClock(0);
    const warnings: string[] = [];
    const reg = registry([
      inst('a', { [STATUS_PATH_KEY]: '/dashboard/events' }),
      inst('b', { [STATUS_PATH_KEY]: '/dashboard/events' }),
      inst('quiet'),
      inst('evil', { [STATUS_PATH_KEY]: 'http://169.254.169.254/latest' }),
    ]);
    const feed = new FleetFeed(reg, { clock, tickMs: 1_000, refreshMs: 1_000, goneKeepMs: 5_000, onWarning: (m) => warnings.push(m) });
    await feed.refresh();
    clock.advance(1_000);
    assert.deepEqual(
      frame(feed).instances.map((i) => [i.id, i.state === 'gone' ? 'gone' : 'followed']),
      [
        ['a', 'followed'],
        ['b', 'followed'],
      ],
    );
    assert.deepEqual(warnings, ['FleetFeed: orders/evil is not followed: bulwark.status "http://169.254.169.254/latest" is not a plain absolute path']);
    reg.list.splice(1, 1); // b leaves the registry
    await feed.refresh();
    clock.advance(1_000);
    const b = frame(feed).instances.find((i) => i.id === 'b')!;
    assert.equal(b.state, 'gone');
    assert.equal(b.reason, 'left the registry');
    clock.advance(6_000);
    await feed.refresh();
    clock.advance(1_000);
    assert.deepEqual(
      frame(feed).instances.map((i) => i.id),
      ['a'],
    );
    await feed.close();
  });

  it('keeps what it follows while the registry does not answer, and says so', async () => {
    const clock = new ManualClock(0);
    const reg = registry([inst('a', { [STATUS_PATH_KEY]: '/dashboard/events' })]);
    const feed = new FleetFeed(reg, { clock });
    await feed.refresh();
    reg.listServices = async () => {
      throw new Error('etcd unavailable');
    };
    await feed.refresh();
    clock.advance(1_000);
    const f = frame(feed) as FleetFrame & { registryError?: string };
    assert.equal(f.registryError, 'etcd unavailable');
    assert.deepEqual(
      f.instances.map((i) => i.id),
      ['a'],
    );
    assert.notEqual(f.instances[0]!.state, 'gone');
    await feed.close();
  });
});
