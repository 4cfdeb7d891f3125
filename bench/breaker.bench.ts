/**
 * breaker: success path, allow()+success() pairs, and rejection while open, for SreBreaker and
 * CircuitBreaker against a bare `await fn()`, an already-rejected promise, cockatiel 3 and opossum 9;
 * plus the heap of a BreakerGroup holding 10 000 breakers. Every subject runs in its own process.
 *
 *   BENCH_RUNS=5 node --import tsx bench/breaker.bench.ts
 *
 * Rejection subjects all consume the promise the same way (`try { await p } catch {}`), so the
 * ratios compare what the libraries do, not how the bench catches.
 */
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import * as cockatiel from 'cockatiel';
import Opossum from 'opossum';
import { bench, type Subject } from './harness.js';
import { BreakerGroup, CircuitBreaker, SreBreaker } from '../src/breaker/index.js';
import { BreakerOpenError } from '../src/core/errors.js';

/** The guarded work: an async function that answers at once. */
async function task(): Promise<number> {
  return 1;
}
const boom = new Error('down');
async function failing(): Promise<number> {
  throw boom;
}

/** swallow awaits `make()` and ignores its rejection, the way every rejection subject consumes it. */
function swallowing(make: () => Promise<unknown>): () => Promise<void> {
  return async () => {
    try {
      await make();
    } catch {
      // expected
    }
  };
}

function asyncSubject(op: () => unknown): Subject {
  return { op, async: true };
}

/**
 * tripSre drops from the 8th admission on: allow() has returned normally only 7 times in this process,
 * fewer than V8 wants before it gives a function feedback. That is what kept allow() interpreted (and
 * its throw ~3x dearer) before the breakers primed it at load; see primeAdmit in src/breaker/shared.ts.
 */
function tripSre(): SreBreaker {
  const b = new SreBreaker({ forcePassMs: 3_600_000, random: () => 0 });
  for (let i = 0; i < 1_000; i++) {
    try {
      b.admit().failure(boom);
    } catch {
      // dropping already
    }
  }
  return b;
}

function tripCircuit(): CircuitBreaker {
  const b = new CircuitBreaker({ openMs: 3_600_000 });
  for (let i = 0; i < 20 && b.state === 'closed'; i++) b.admit().failure(boom);
  if (b.state !== 'open') throw new Error('bench setup: breaker did not open');
  return b;
}

async function tripCockatiel(): Promise<cockatiel.CircuitBreakerPolicy> {
  const p = cockatiel.circuitBreaker(cockatiel.handleAll, { halfOpenAfter: 3_600_000, breaker: new cockatiel.ConsecutiveBreaker(5) });
  for (let i = 0; i < 10; i++) await p.execute(failing).catch(() => {});
  return p;
}

async function tripOpossum(): Promise<Opossum> {
  const b = new Opossum(failing, { resetTimeout: 3_600_000, volumeThreshold: 0, errorThresholdPercentage: 50 });
  for (let i = 0; i < 10 && !b.opened; i++) await b.fire().catch(() => {});
  if (!b.opened) throw new Error('bench setup: opossum did not open');
  return b;
}

/** gc, for heap figures: exposed at run time so that the bench needs no node flag. */
function gc(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

function heapSubject(make: (name: string) => unknown): Subject {
  const names = Array.from({ length: 10_000 }, (_, i) => `service-${i}/instance-${i % 97}:8080`);
  gc();
  const before = process.memoryUsage().heapUsed;
  const group = new BreakerGroup({ factory: make as (name: string) => SreBreaker });
  for (const n of names) group.get(n);
  gc();
  const bytes = process.memoryUsage().heapUsed - before;
  let i = 0;
  return { op: () => group.get(names[i++ % names.length]!), extra: () => ({ heapMB: bytes / 1e6, breakers: group.size }) };
}

const rejectedFloor = Promise.reject(new BreakerOpenError('prebuilt'));
rejectedFloor.catch(() => {});
const prebuiltError = new BreakerOpenError('prebuilt');

await bench('breaker', {
  baseline: 'bare await fn()',
  subjects: {
    // Success path.
    'bare await fn()': () => asyncSubject(() => task()),
    // What any execute() that observes the outcome adds at least: one more promise reaction.
    'floor: fn().then(ok, ko) (one reaction, as any execute adds)': () => {
      const ok = (v: number) => v;
      const ko = (e: unknown): never => {
        throw e;
      };
      return asyncSubject(() => task().then(ok, ko));
    },
    'SreBreaker.execute': () => {
      const b = new SreBreaker();
      return asyncSubject(() => b.execute(task));
    },
    'CircuitBreaker.execute': () => {
      const b = new CircuitBreaker();
      return asyncSubject(() => b.execute(task));
    },
    'CircuitBreaker.execute (count window)': () => {
      const b = new CircuitBreaker({ window: { calls: 100 } });
      return asyncSubject(() => b.execute(task));
    },
    'CircuitBreaker.execute (slowCallMs: 1000)': () => {
      const b = new CircuitBreaker({ slowCallMs: 1_000 });
      return asyncSubject(() => b.execute(task));
    },
    'BreakerGroup.execute': () => {
      const g = new BreakerGroup();
      return asyncSubject(() => g.execute('payments', task));
    },
    'cockatiel execute (ConsecutiveBreaker)': () => {
      const p = cockatiel.circuitBreaker(cockatiel.handleAll, { halfOpenAfter: 10_000, breaker: new cockatiel.ConsecutiveBreaker(5) });
      return asyncSubject(() => p.execute(task));
    },
    'cockatiel execute (SamplingBreaker)': () => {
      const p = cockatiel.circuitBreaker(cockatiel.handleAll, {
        halfOpenAfter: 10_000,
        breaker: new cockatiel.SamplingBreaker({ threshold: 0.5, duration: 60_000, minimumRps: 1 }),
      });
      return asyncSubject(() => p.execute(task));
    },
    'opossum fire (default)': () => {
      const b = new Opossum(task);
      return asyncSubject(() => b.fire());
    },
    'opossum fire (timeout: false)': () => {
      const b = new Opossum(task, { timeout: false });
      return asyncSubject(() => b.fire());
    },

    // The primitive: allow() + success(), no promise.
    'SreBreaker allow+success': () => {
      const b = new SreBreaker();
      return { op: () => b.admit().success() };
    },
    'CircuitBreaker allow+success': () => {
      const b = new CircuitBreaker();
      return { op: () => b.admit().success() };
    },

    // While open.
    'floor: await prebuilt rejected promise': () => asyncSubject(swallowing(() => rejectedFloor)),
    'floor: await Promise.reject(prebuilt error)': () => asyncSubject(swallowing(() => Promise.reject(prebuiltError))),
    'open: SreBreaker.execute rejects': () => {
      const b = tripSre();
      return asyncSubject(swallowing(() => b.execute(task)));
    },
    'open: CircuitBreaker.execute rejects': () => {
      const b = tripCircuit();
      return asyncSubject(swallowing(() => b.execute(task)));
    },
    'open: cockatiel execute rejects': async () => {
      const p = await tripCockatiel();
      return asyncSubject(swallowing(() => p.execute(task)));
    },
    'open: opossum fire rejects': async () => {
      const b = await tripOpossum();
      return asyncSubject(swallowing(() => b.fire()));
    },
    'floor: throw prebuilt error': () => ({
      op: () => {
        try {
          throw prebuiltError;
        } catch {
          // expected
        }
      },
    }),
    'open: SreBreaker allow throws': () => {
      const b = tripSre();
      return {
        op: () => {
          try {
            b.admit();
          } catch {
            // expected
          }
        },
      };
    },
    'open: CircuitBreaker allow throws': () => {
      const b = tripCircuit();
      return {
        op: () => {
          try {
            b.admit();
          } catch {
            // expected
          }
        },
      };
    },

    'open: SreBreaker tryAdmit (no throw)': () => {
      const b = tripSre();
      return { op: () => b.tryAdmit() };
    },
    'open: CircuitBreaker tryAdmit (no throw)': () => {
      const b = tripCircuit();
      return { op: () => b.tryAdmit() };
    },

    // Memory: a group of 10 000 breakers (heapMB is the heap they take, after a full GC).
    'BreakerGroup 10 000 SreBreakers (get)': () => heapSubject((name) => new SreBreaker({ name })),
    'BreakerGroup 10 000 CircuitBreakers (get)': () => heapSubject((name) => new CircuitBreaker({ name })),
  },
});
