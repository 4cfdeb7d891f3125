/**
 * client: what `ResilientClient.call` adds over a bare call to an in-process function, on the success
 * path (discovery from memory, P2C pick over 3 instances, bulkhead, SreBreaker for the service,
 * CircuitBreaker for the instance, per-attempt timeout, retry with budget, balancer report), against
 * cockatiel 3's wrap of the same guards (without discovery or balancing), and against its floor: the same
 * work composed by hand from bulwark's public parts (a P2C Balancer over the 3 instances, an SreBreaker
 * for the service, a CircuitBreaker per instance, a Bulkhead, the retry budget's count, the balancer's
 * report with the call's latency and end reading; no timeout, no retry loop), and that floor with the
 * defaults' timeout (the attempt a node of core Deadlines, as the client's are). Targets (checked after
 * the table): the overhead of each ResilientClient subject (its ns/op − the bare call's) ≤ 2 µs; the
 * client with defaults ≤ 500 ns a call (issue 31; out of reach in a run where its floor with the deadline
 * is over 500 ns) and faster than cockatiel's wrap(retry, bulkhead, breaker, timeout); and no option that
 * takes work away makes a call slower than the defaults (within 5 %, the noise of one run). A second
 * section runs the client's paths and floors interleaved in one process, for their ratios.
 *
 * Run it compiled (`npm run bench -- client`): under tsx, esbuild's `keepNames` wraps every named
 * closure in `__name()` (an `Object.defineProperty` per closure made), which costs more than the
 * client itself.
 */
import * as cockatiel from 'cockatiel';
import { atMost, bench, fasterBy, timeTurns, type Subject, type Target } from './harness.js';

import { MemoryRegistry } from '../src/registry/index.js';
import { ResilientClient } from '../src/client/index.js';
import { Balancer } from '../src/balancer/index.js';
import { CircuitBreaker, SreBreaker } from '../src/breaker/index.js';
import { Deadlines, systemClock, type DeadlineNode } from '../src/core/index.js';
import { Bulkhead, RetryBudget } from '../src/policy/index.js';

type Instance = { id: string; name: string; address: string };
/** The guarded work: an in-process function that answers at once and takes the attempt's signal. */
function task(_instance: Instance, _signal: AbortSignal): Promise<number> {
  return Promise.resolve(1);
}
const ignore = (): void => undefined;
const anInstance: Instance = { id: 'a', name: 'svc', address: '127.0.0.1:1' };
const neverAborted = new AbortController().signal;

async function client(options: Record<string, unknown>) {
  const registry = new MemoryRegistry();
  for (const id of ['a', 'b', 'c']) await registry.register({ id, name: 'svc', address: `127.0.0.1:${9000 + id.charCodeAt(0)}` });
  const c = new ResilientClient({ registry, ...options });
  await c.call('svc', task); // opens the service: first listing, watch
  return {
    op: () => c.call('svc', task),
    async: true as const,
    teardown: async () => {
      await c.close();
      await registry.close();
    },
  };
}

/**
 * byHand: the client's success-path work composed by hand from bulwark's public parts (see the header).
 * With `deadlines`, also the defaults' timeout at the least it costs: the attempt is a node of the
 * shared deadline (core Deadlines, as the client's attempts are: linked when it starts, unlinked when it
 * answers), and the task gets the granule's signal.
 */
function byHand(deadlines?: Deadlines) {
  const instances = ['a', 'b', 'c'].map((id) => ({ id, name: 'svc', address: `127.0.0.1:${9000 + id.charCodeAt(0)}` }));
  const balancer = new Balancer({ strategy: 'p2c', instances });
  const service = new SreBreaker();
  const perInstance = new Map(instances.map((i) => [i.id, new CircuitBreaker()]));
  const bulkhead = new Bulkhead({ maxConcurrent: 1_000 });
  const budget = new RetryBudget();
  const clock = systemClock;
  const attempt = async (): Promise<number> => {
    const instance = balancer.pick();
    const s = service.tryAdmit();
    const t = perInstance.get(instance.id)!.tryAdmit();
    if (s === undefined || t === undefined) throw new Error('refused');
    const start = clock.now();
    const node: DeadlineNode | undefined =
      deadlines === undefined ? undefined : { granule: undefined, deadlinePrev: undefined, deadlineNext: undefined, onDeadline: ignore };
    try {
      const v = await task(instance, node === undefined ? neverAborted : deadlines!.join(node, start));
      node?.granule?.remove(node);
      s.success();
      t.success();
      const end = clock.now();
      balancer.report(instance, { ok: true, latencyMs: end - start, at: end }); // the balancer runs on `clock` too: no read of its own
      return v;
    } catch (err) {
      node?.granule?.remove(node);
      s.failure(err);
      t.failure(err);
      const end = clock.now();
      balancer.report(instance, { ok: false, latencyMs: end - start, at: end });
      throw err;
    }
  };
  return {
    op: () => {
      budget.recordCall();
      return bulkhead.execute(attempt);
    },
    async: true as const,
    teardown: () => balancer.close(),
  };
}

/** overheadAtMost: `subject`'s ns/op minus the bare call's is at most `maxNs`. */
function overheadAtMost(subject: string, maxNs: number): Target {
  return {
    label: `${subject}: overhead ≤ ${maxNs / 1000} µs`,
    check: (m) => {
      const value = m.ns(subject) - m.ns('bare call');
      return { value, ok: value <= maxNs, unit: ' ns' };
    },
  };
}

const DEFAULTS = 'ResilientClient.call (defaults: 10 s timeout, 3 attempts)';
const FLOOR = 'floor: the same work composed by hand (no timeout, no retry)';
const FLOOR_DEADLINE = 'floor: the same work composed by hand, with the shared deadline (no retry loop: a success does not enter it)';

await bench('client: ResilientClient.call over a bare in-process call (success path, 3 instances)', {
  baseline: 'bare call',
  targets: [
    overheadAtMost(DEFAULTS, 2_000),
    overheadAtMost('ResilientClient.call (no timeout)', 2_000),
    overheadAtMost('ResilientClient.call (no timeout, no retry)', 2_000),
    {
      label: `${DEFAULTS} ≤ 500 ns`,
      check: (m) => {
        const value = m.ns(DEFAULTS);
        return { value, ok: value <= 500, unit: ' ns' };
      },
    },
    {
      // What 500 ns means in this run: the client does the floor's work and more (a timeout, a retry
      // policy), so on a loaded machine, where the floor itself nears 500 ns, the line above cannot hold.
      label: `${FLOOR} in this run (printed, no target: ≤ 500 ns for the client needs it well under)`,
      check: (m) => ({ value: m.ns(FLOOR), ok: true, unit: ' ns' }),
    },
    {
      // The defaults' own floor: their timeout at the least it costs. Above 500 ns, the line above is out of
      // reach in this run (the machine's speed moves both by up to 2× from minute to minute).
      label: `${FLOOR_DEADLINE} ≤ 500 ns (else 500 ns is out of reach in this run)`,
      check: (m) => {
        const value = m.ns(FLOOR_DEADLINE);
        return { value, ok: value <= 500, unit: ' ns' };
      },
    },
    atMost(`${DEFAULTS} over that floor (printed, no target)`, DEFAULTS, FLOOR_DEADLINE, Infinity),
    atMost('no timeout: no slower than the defaults (≤ 1.05×)', 'ResilientClient.call (no timeout)', DEFAULTS, 1.05),
    atMost('no timeout, no retry: no slower than the defaults (≤ 1.05×)', 'ResilientClient.call (no timeout, no retry)', DEFAULTS, 1.05),
    atMost(`${DEFAULTS} over its floor (printed, no target: the floor has no timeout nor retry loop)`, DEFAULTS, FLOOR, Infinity),
    fasterBy(
      'ResilientClient.call (defaults) ≥ 1× cockatiel wrap(retry, bulkhead, breaker, timeout)',
      DEFAULTS,
      'cockatiel wrap(retry, bulkhead, breaker, timeout)',
      1,
    ),
  ],
  subjects: {
    'bare call': () => ({ op: () => task(anInstance, neverAborted), async: true }),
    [DEFAULTS]: () => client({}),
    'ResilientClient.call (no timeout)': () => client({ timeoutMs: 0 }),
    'ResilientClient.call (no timeout, no retry)': () => client({ timeoutMs: 0, maxAttempts: 1 }),
    [FLOOR]: () => byHand(),
    [FLOOR_DEADLINE]: () => byHand(new Deadlines({ timeoutMs: 10_000, what: 'attempt' })),
    'cockatiel wrap(retry, bulkhead, breaker, timeout)': () => {
      const p = cockatiel.wrap(
        cockatiel.retry(cockatiel.handleAll, { maxAttempts: 2, backoff: new cockatiel.ExponentialBackoff() }),
        cockatiel.bulkhead(1_000, 0),
        cockatiel.circuitBreaker(cockatiel.handleAll, { halfOpenAfter: 30_000, breaker: new cockatiel.ConsecutiveBreaker(5) }),
        cockatiel.timeout(10_000, cockatiel.TimeoutStrategy.Cooperative),
      );
      return { op: () => p.execute(({ signal }) => task(anInstance, signal)), async: true };
    },
    'cockatiel wrap(retry, bulkhead, breaker)': () => {
      const p = cockatiel.wrap(
        cockatiel.retry(cockatiel.handleAll, { maxAttempts: 2, backoff: new cockatiel.ExponentialBackoff() }),
        cockatiel.bulkhead(1_000, 0),
        cockatiel.circuitBreaker(cockatiel.handleAll, { halfOpenAfter: 30_000, breaker: new cockatiel.ConsecutiveBreaker(5) }),
      );
      return { op: () => p.execute(({ signal }) => task(anInstance, signal)), async: true };
    },
  },
});

/**
 * Issue 31's ratios measured interleaved: every path runs in one process, in turns of CHUNK awaited
 * calls, so that machine load, and the process's own draw (identical processes here differ by up to
 * ~20 % for their whole lives), fall on all of them alike. The extra numbers are each path's median ns
 * per call over the turns, and the defaults' median per-turn ratio to each floor. Read ratios here, not
 * times: with every path in one process, the parts they share (balancer, breakers, deadlines) see every
 * path's objects, so a path's time here need not be what one client alone in its process takes (the
 * floor read 558 ns here and 481 ns alone in one pair of runs, 477 and 475 ns in another), and that is
 * what the 500 ns bar of the first section is about.
 */
const CHUNK = 5_000;
const INTERLEAVED = "issue 31's client paths, interleaved in one process (extras: median ns per call over turns)";

async function interleavedSubject(): Promise<Subject> {
  const defaults = await client({});
  const noTimeout = await client({ timeoutMs: 0 });
  const noRetry = await client({ timeoutMs: 0, maxAttempts: 1 });
  const floor = byHand();
  const floorDeadline = byHand(new Deadlines({ timeoutMs: 10_000, what: 'attempt' }));
  const floorOp = floor.op;
  const floorDeadlineOp = floorDeadline.op;
  const defaultsOp = defaults.op;
  const noTimeoutOp = noTimeout.op;
  const noRetryOp = noRetry.op;
  // Each turn's loop is its own function, so that no call site is shared between paths.
  const turns: Record<string, () => Promise<void>> = {
    bare: async () => {
      for (let i = 0; i < CHUNK; i++) await task(anInstance, neverAborted);
    },
    floor: async () => {
      for (let i = 0; i < CHUNK; i++) await floorOp();
    },
    floor_deadline: async () => {
      for (let i = 0; i < CHUNK; i++) await floorDeadlineOp();
    },
    defaults: async () => {
      for (let i = 0; i < CHUNK; i++) await defaultsOp();
    },
    no_timeout: async () => {
      for (let i = 0; i < CHUNK; i++) await noTimeoutOp();
    },
    no_timeout_no_retry: async () => {
      for (let i = 0; i < CHUNK; i++) await noRetryOp();
    },
  };
  const ns: Record<string, number[]> = Object.fromEntries(Object.keys(turns).map((k) => [k, []]));
  const overFloor: number[] = [];
  const overFloorDeadline: number[] = [];
  return {
    async: true,
    batch: 1,
    op: async () => {
      const ms = await timeTurns(turns);
      for (const k of Object.keys(turns)) ns[k]!.push((ms[k]! * 1e6) / CHUNK);
      overFloor.push(ms.defaults! / ms.floor!);
      overFloorDeadline.push(ms.defaults! / ms.floor_deadline!);
    },
    extra: () => {
      const med = (x: number[]) => [...x].sort((a, b) => a - b)[x.length >> 1]!;
      const out: Record<string, number> = { rounds: overFloor.length };
      for (const [k, v] of Object.entries(ns)) out[k] = med(v);
      out.defaults_vs_floor = med(overFloor);
      out.defaults_vs_floor_deadline = med(overFloorDeadline);
      return out;
    },
    teardown: async () => {
      await defaults.teardown();
      await noTimeout.teardown();
      await noRetry.teardown();
      floor.teardown();
      floorDeadline.teardown();
    },
  };
}

/** interleavedAtMost: the interleaved number `key` is at most `max` (`unit` for printing). */
function interleavedAtMost(label: string, key: string, max: number, unit: string): Target {
  return {
    label,
    check: (m) => {
      const value = m.extra(INTERLEAVED, key);
      return { value, ok: value <= max, unit };
    },
  };
}

/** interleavedRatioAtMost: the ratio of two interleaved medians is at most `max`. */
function interleavedRatioAtMost(label: string, key: string, over: string, max: number): Target {
  return {
    label,
    check: (m) => {
      const value = m.extra(INTERLEAVED, key) / m.extra(INTERLEAVED, over);
      return { value, ok: value <= max, unit: '×' };
    },
  };
}

await bench("client: issue 31's bar, interleaved in one process (robust to machine load and to the process's draw)", {
  subjects: { [INTERLEAVED]: interleavedSubject },
  targets: [
    interleavedAtMost(
      'ResilientClient.call (defaults) over its floor with the shared deadline (median of per-turn ratios; printed, no target)',
      'defaults_vs_floor_deadline',
      Infinity,
      '×',
    ),
    interleavedAtMost(
      'ResilientClient.call (defaults) over the floor without a deadline (median of per-turn ratios; printed, no target)',
      'defaults_vs_floor',
      Infinity,
      '×',
    ),
    interleavedRatioAtMost('issue 31: no timeout: no slower than the defaults (≤ 1.05×), interleaved', 'no_timeout', 'defaults', 1.05),
    interleavedRatioAtMost('issue 31: no timeout, no retry: no slower than the defaults (≤ 1.05×), interleaved', 'no_timeout_no_retry', 'defaults', 1.05),
  ],
});
