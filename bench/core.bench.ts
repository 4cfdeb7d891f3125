import { bench } from './harness.js';
import { HashRing } from '../src/core/hash-ring.js';

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
