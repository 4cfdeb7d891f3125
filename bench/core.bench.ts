import { bench } from './harness.js';
import { HashRing } from '../src/core/hash-ring.js';
import { RollingWindow } from '../src/core/rolling-window.js';
import { OutcomeTimeWindow } from '../src/core/outcome-window.js';
import { ThrottleWindow } from '../src/core/throttle-window.js';

const keys = Array.from({ length: 4096 }, (_, i) => `user:${i * 7919}`);

await bench('core: hash ring lookup, 10 members × 160 replicas', {
  baseline: 'Map.get',
  subjects: {
    'Map.get': () => {
      const m = new Map(keys.map((k, i) => [k, i]));
      let i = 0;
      return { op: () => m.get(keys[i++ & 4095]!) };
    },
    'HashRing.get': () => {
      const ring = new HashRing({ replicas: 160 });
      ring.add(...Array.from({ length: 10 }, (_, i) => `10.0.0.${i}:8080`));
      let i = 0;
      return { op: () => ring.get(keys[i++ & 4095]!) };
    },
  },
});

/** The window family: one add (time passed in, as the breakers and the shedder do) on each member. */
await bench('core: rolling window add (10 000 ms in 40 buckets, time moving 1 ms per 64 adds)', {
  baseline: 'plain counter',
  subjects: {
    'plain counter': () => {
      const c = { n: 0 };
      return { op: () => c.n++ };
    },
    'RollingWindow.add (2 channels)': () => {
      const w = new RollingWindow({ windowMs: 10_000, buckets: 40, channels: 2 });
      let i = 0;
      return { op: () => w.add(i & 1, 1, (i++ >> 6) + 0.5) };
    },
    'OutcomeTimeWindow.success': () => {
      const w = new OutcomeTimeWindow(10_000, 40, 0);
      let i = 0;
      return { op: () => w.success((i++ >> 6) + 0.5) };
    },
    'ThrottleWindow.addSuccess': () => {
      const w = new ThrottleWindow(10_000, 40, 0);
      let i = 0;
      return { op: () => w.addSuccess((i++ >> 6) + 0.5) };
    },
  },
});
