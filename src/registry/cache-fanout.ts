/**
 * ServiceFanout serves watches of single services from a RegistryCache's own view: every change the
 * cache applies to a service (a watch event, or a new listing, sent as the create / update / delete
 * events between the old list and the new) goes to that service's watchers only, so there is one
 * registry watch per service however many followers it has, and a change costs O(watchers of that
 * service). Each watcher has a bounded queue: one that falls behind gets `WatchResyncError` and lists again.
 */
import { EventQueue } from './event-queue.js';
import type { RegistryEvent, ServiceInstance } from './types.js';
import { sameInstance, watchEvent } from './validate.js';

export class ServiceFanout {
  private readonly byService = new Map<string, Set<EventQueue>>();
  private count = 0;

  constructor(private readonly queueSize: number) {}

  /** watchers is the number of open watches served. */
  get watchers(): number {
    return this.count;
  }

  /** has tells whether `service` has a watcher (its entry and registry watch are kept while it has). */
  has(service: string): boolean {
    return this.byService.has(service);
  }

  /** subscribe opens a watch of `service`, ended by `signal`, by the consumer, or by `end`/`fail`. */
  subscribe(service: string, signal: AbortSignal | undefined): EventQueue {
    let set = this.byService.get(service);
    if (set === undefined) this.byService.set(service, (set = new Set()));
    const queue: EventQueue = new EventQueue(this.queueSize, signal, () => {
      if (!set.delete(queue)) return;
      this.count--;
      if (set.size === 0 && this.byService.get(service) === set) this.byService.delete(service);
    });
    if (!queue.closed) {
      set.add(queue);
      this.count++;
    }
    return queue;
  }

  /** publish hands one change of `service` to its watchers. */
  publish(service: string, event: RegistryEvent): void {
    const set = this.byService.get(service);
    if (set === undefined) return;
    for (const q of set) q.push(event);
  }

  /** publishDiff hands the changes from `before` to `after` (lists of `service`) to its watchers as events. */
  publishDiff(service: string, before: readonly ServiceInstance[], after: readonly ServiceInstance[]): void {
    if (!this.byService.has(service) || before === after) return;
    const old = new Map<string, ServiceInstance>();
    for (const i of before) old.set(i.id, i);
    for (const i of after) {
      const o = old.get(i.id);
      if (o === undefined) this.publish(service, watchEvent('create', i));
      else {
        old.delete(i.id);
        if (o !== i && !sameInstance(o, i)) this.publish(service, watchEvent('update', i));
      }
    }
    for (const i of old.values()) this.publish(service, watchEvent('delete', i));
  }

  /** fail ends the watches of `service` with `err` (after what they have queued): they list again. */
  fail(service: string, err: unknown): void {
    const set = this.byService.get(service);
    if (set !== undefined) for (const q of [...set]) q.fail(err);
  }

  /** endAll ends every watch. */
  endAll(): void {
    for (const set of [...this.byService.values()]) for (const q of [...set]) q.end();
  }
}
