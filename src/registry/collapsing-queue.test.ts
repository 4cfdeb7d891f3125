/** CollapsingQueue: one create and one delete per instance, however many keys hold it. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CollapsingQueue } from './collapsing-queue.js';
import type { RegistryEvent, ServiceInstance } from './types.js';

const a: ServiceInstance = Object.freeze({ id: '10.0.0.1:80', name: 's', address: '10.0.0.1:80' });
const b: ServiceInstance = Object.freeze({ id: '10.0.0.2:80', name: 's', address: '10.0.0.2:80' });
const ev = (type: RegistryEvent['type'], instance: ServiceInstance): RegistryEvent => ({ type, instance });

async function drain(q: CollapsingQueue): Promise<string[]> {
  q.end();
  const out: string[] = [];
  for await (const e of q) out.push(`${e.type} ${e.instance.id}`);
  return out;
}

describe('CollapsingQueue', () => {
  it("delivers the first key's create and the last key's delete of an instance, nothing between", async () => {
    const q = new CollapsingQueue(100, undefined, undefined);
    for (const e of [ev('create', a), ev('create', a), ev('create', b), ev('delete', a), ev('update', a), ev('delete', a), ev('delete', a), ev('delete', b)])
      q.push(e);
    assert.deepEqual(await drain(q), ['create 10.0.0.1:80', 'create 10.0.0.2:80', 'update 10.0.0.1:80', 'delete 10.0.0.1:80', 'delete 10.0.0.2:80']);
  });

  it('counts the keys of the first listing: their instances are deleted only when the last key goes', async () => {
    const q = new CollapsingQueue(100, undefined, undefined);
    q.hold(a);
    q.hold(a);
    q.push(ev('delete', a));
    q.push(ev('create', a)); // a third key while one is still held: no create
    q.push(ev('delete', a));
    q.push(ev('delete', a));
    assert.deepEqual(await drain(q), ['delete 10.0.0.1:80']);
  });
});
