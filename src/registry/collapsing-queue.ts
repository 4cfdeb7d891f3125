/**
 * CollapsingQueue is the EventQueue of a watch over a layout whose keys may hold one instance several
 * times (go-zero: an address re-registered under a new lease before the old one expired, or two
 * publishers of one address). It counts the keys of each instance: the first key's create is delivered,
 * the last key's delete is delivered, and the ones in between are not — as go-zero's own subscriber keeps
 * one value per address however many keys hold it (core/discov/subscriber.go:140-172).
 */
import { EventQueue } from './event-queue.js';
import type { RegistryEvent, ServiceInstance } from './types.js';

/** CollapsingQueue delivers one create and one delete per instance id, whatever the number of keys; see the module comment. */
export class CollapsingQueue extends EventQueue {
  /** Keys holding each `<name>/<id>` now. */
  private readonly holders = new Map<string, number>();

  /** hold counts a key of the watch's first listing: it holds `instance` without a create event. */
  hold(instance: ServiceInstance): void {
    const id = `${instance.name}/${instance.id}`;
    this.holders.set(id, (this.holders.get(id) ?? 0) + 1);
  }

  override push(event: RegistryEvent): void {
    const id = `${event.instance.name}/${event.instance.id}`;
    const n = this.holders.get(id) ?? 0;
    if (event.type === 'create') {
      this.holders.set(id, n + 1);
      if (n === 0) super.push(event);
    } else if (event.type === 'delete') {
      if (n <= 1) {
        this.holders.delete(id);
        if (n === 1) super.push(event);
      } else this.holders.set(id, n - 1);
    } else if (n > 0) super.push(event);
  }
}
