/** A watch drained into an array in the background, for tests that compare what a watch saw with the truth. */
import type { Registry, RegistryEvent } from '../../src/registry/types.js';

/** collect drains `r`'s watch (of `service`, or of every service) into an array in the background, once it is established. */
export async function collect(r: Registry, service?: string) {
  const events: RegistryEvent[] = [];
  let ready!: () => void;
  const isReady = new Promise<void>((res) => (ready = res));
  const ac = new AbortController();
  let failure: unknown;
  const done = (async () => {
    try {
      for await (const e of r.watch({ service, signal: ac.signal, onReady: ready })) events.push(e);
    } catch (err) {
      failure = err;
    }
  })();
  await isReady;
  return {
    events,
    get failure() {
      return failure;
    },
    stop: async () => {
      ac.abort();
      await done;
    },
  };
}
