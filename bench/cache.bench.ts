/**
 * bench/cache.bench.ts: LruCache against lru-cache@11 on a Zipf workload; Group.get local hits; a peer
 * fetch over HTTP against a minimal node:http server; heap per cached value.
 */
import { LRUCache } from 'lru-cache';
import { LRUCache as MnemonistLRU } from 'mnemonist';
import { bench } from './harness.js';
import { CAPACITY, CAPACITY_BYTES, VALUE, keys, zipfStream } from './cache-workload.js';
import { LruCache } from '../src/cache/lru-cache.js';

const STREAM = 1 << 20;

/** MapLru is the simple structure STYLE.md §19 says to start from: a Map's insertion order as recency. */
class MapLru {
  private readonly m = new Map<string, string>();
  private bytes = 0;
  constructor(private readonly maxBytes: number) {}
  get(k: string): string | undefined {
    const v = this.m.get(k);
    if (v !== undefined) {
      this.m.delete(k);
      this.m.set(k, v);
    }
    return v;
  }
  add(k: string, v: string): void {
    this.m.set(k, v);
    this.bytes += k.length + v.length;
    while (this.bytes > this.maxBytes) {
      const [ok, ov] = this.m.entries().next().value as [string, string];
      this.m.delete(ok);
      this.bytes -= ok.length + ov.length;
    }
  }
}

function zipfOp(get: (k: string) => unknown, set: (k: string) => void) {
  const stream = zipfStream(STREAM);
  let i = 0;
  return {
    op: () => {
      const k = keys[stream[i++ & (STREAM - 1)]!]!;
      if (get(k) === undefined) set(k);
    },
  };
}

await bench('cache: LRU on Zipf(1), 100 k keys, 10 k capacity (get, set on miss)', {
  baseline: 'lru-cache maxSize+sizeCalculation',
  subjects: {
    'lru-cache maxSize+sizeCalculation': () => {
      const c = new LRUCache<string, string>({ maxSize: CAPACITY_BYTES, sizeCalculation: (v, k) => k.length + v.length });
      return zipfOp((k) => c.get(k), (k) => c.set(k, VALUE));
    },
    'LruCache (ours, typed-array slots)': () => {
      const c = new LruCache<string>({ maxBytes: CAPACITY_BYTES });
      return zipfOp((k) => c.get(k), (k) => c.add(k, VALUE));
    },
    'Map-order LRU (simple)': () => {
      const c = new MapLru(CAPACITY_BYTES);
      return zipfOp((k) => c.get(k), (k) => c.add(k, VALUE));
    },
    'lru-cache by count (reference)': () => {
      const c = new LRUCache<string, string>({ max: CAPACITY });
      return zipfOp((k) => c.get(k), (k) => c.set(k, VALUE));
    },
    'mnemonist LRUCache by count (reference)': () => {
      const c = new MnemonistLRU<string, string>(CAPACITY);
      return zipfOp((k) => c.get(k), (k) => c.set(k, VALUE));
    },
  },
});
