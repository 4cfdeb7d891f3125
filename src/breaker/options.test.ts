/**
 * Every option is validated at construction: a table of bad values, each expected to throw a
 * TypeError or RangeError whose message names the option and shows the value.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { BreakerGroup } from './breaker-group.js';
import { CircuitBreaker } from './circuit-breaker.js';
import { CoarseClock } from '../core/coarse-clock.js';
import { SreBreaker } from './sre-breaker.js';

type Row = [label: string, build: () => unknown, error: typeof TypeError | typeof RangeError, mentions: RegExp];

const rows: Row[] = [
  // SreBreaker
  ['sre windowMs negative', () => new SreBreaker({ windowMs: -1 }), RangeError, /windowMs.*-1/],
  ['sre windowMs NaN', () => new SreBreaker({ windowMs: NaN }), RangeError, /windowMs.*NaN/],
  ['sre windowMs string', () => new SreBreaker({ windowMs: '10s' as never }), TypeError, /windowMs.*"10s"/],
  ['sre buckets non-integer', () => new SreBreaker({ buckets: 2.5 }), RangeError, /buckets.*2\.5/],
  ['sre buckets zero', () => new SreBreaker({ buckets: 0 }), RangeError, /buckets.*0/],
  ['sre k below 1', () => new SreBreaker({ k: 0.9 }), RangeError, /k .*0\.9/],
  ['sre k NaN', () => new SreBreaker({ k: NaN }), RangeError, /k .*NaN/],
  ['sre protection negative', () => new SreBreaker({ protection: -5 }), RangeError, /protection.*-5/],
  ['sre forcePassMs zero', () => new SreBreaker({ forcePassMs: 0 }), RangeError, /forcePassMs.*0/],
  ['sre forcePassMs Infinity', () => new SreBreaker({ forcePassMs: Infinity }), RangeError, /forcePassMs.*Infinity/],
  ['sre countRejections not boolean', () => new SreBreaker({ countRejections: 1 as never }), TypeError, /countRejections.*1/],
  ['sre clock without now', () => new SreBreaker({ clock: {} as never }), TypeError, /clock/],
  ['sre random not a function', () => new SreBreaker({ random: 0.5 as never }), TypeError, /random.*0\.5/],
  ['sre name not a string', () => new SreBreaker({ name: 42 as never }), TypeError, /name.*42/],
  ['sre options not an object', () => new SreBreaker(5 as never), TypeError, /options.*5/],
  // CircuitBreaker
  ['cb failureRate 0', () => new CircuitBreaker({ failureRate: 0 }), RangeError, /failureRate.*\(0, 1\].*0/],
  ['cb failureRate above 1', () => new CircuitBreaker({ failureRate: 1.5 }), RangeError, /failureRate.*1\.5/],
  ['cb failureRate NaN', () => new CircuitBreaker({ failureRate: NaN }), RangeError, /failureRate.*NaN/],
  ['cb failureRate string', () => new CircuitBreaker({ failureRate: '50%' as never }), TypeError, /failureRate.*"50%"/],
  ['cb slowCallRate negative', () => new CircuitBreaker({ slowCallRate: -0.1 }), RangeError, /slowCallRate.*-0\.1/],
  ['cb slowCallMs zero', () => new CircuitBreaker({ slowCallMs: 0 }), RangeError, /slowCallMs.*0/],
  ['cb slowCallMs NaN', () => new CircuitBreaker({ slowCallMs: NaN }), RangeError, /slowCallMs.*NaN/],
  ['cb minimumCalls zero', () => new CircuitBreaker({ minimumCalls: 0 }), RangeError, /minimumCalls.*0/],
  ['cb minimumCalls non-integer', () => new CircuitBreaker({ minimumCalls: 3.5 }), RangeError, /minimumCalls.*3\.5/],
  [
    'cb minimumCalls above count window',
    () => new CircuitBreaker({ minimumCalls: 20, windowCalls: 10 }),
    RangeError,
    /minimumCalls must be ≤ windowCalls \(10\).*20/,
  ],
  ['cb openMs negative', () => new CircuitBreaker({ openMs: -1 }), RangeError, /openMs.*-1/],
  ['cb openMs NaN', () => new CircuitBreaker({ openMs: NaN }), RangeError, /openMs.*NaN/],
  ['cb halfOpenCalls zero', () => new CircuitBreaker({ halfOpenCalls: 0 }), RangeError, /halfOpenCalls.*0/],
  ['cb halfOpenCalls non-integer', () => new CircuitBreaker({ halfOpenCalls: 1.5 }), RangeError, /halfOpenCalls.*1\.5/],
  ['cb probeTimeoutMs negative', () => new CircuitBreaker({ probeTimeoutMs: -10 }), RangeError, /probeTimeoutMs.*-10/],
  [
    'cb window of both shapes',
    () => new CircuitBreaker({ windowCalls: 10, windowMs: 1_000 }),
    TypeError,
    /windowCalls .* excludes windowMs and buckets .*got windowCalls 10 with windowMs 1000/,
  ],
  ['cb windowCalls 0', () => new CircuitBreaker({ windowCalls: 0 }), RangeError, /windowCalls.*0/],
  ['cb buckets non-integer', () => new CircuitBreaker({ windowMs: 1_000, buckets: 2.5 }), RangeError, /buckets.*2\.5/],
  ['cb windowMs negative', () => new CircuitBreaker({ windowMs: -1, buckets: 10 }), RangeError, /windowMs.*-1/],
  ['cb openBackoff maxMs below openMs', () => new CircuitBreaker({ openMs: 1_000, openBackoff: { maxMs: 500 } }), RangeError, /openBackoff\.maxMs.*500/],
  [
    'cb openBackoff multiplier below 1',
    () => new CircuitBreaker({ openBackoff: { multiplier: 0.5, maxMs: 60_000 } }),
    RangeError,
    /openBackoff\.multiplier.*0\.5/,
  ],
  [
    'cb openBackoff unknown key',
    () => new CircuitBreaker({ openBackoff: { maxMs: 60_000, jitter: 'full' } as never }),
    TypeError,
    /openBackoff\.jitter is not an option; the options are multiplier, maxMs/,
  ],
  // Old spellings: refused with the name they were renamed to (conventions: one window shape, one backoff shape).
  [
    'cb openBackoff.factor renamed',
    () => new CircuitBreaker({ openBackoff: { factor: 2, maxMs: 60_000 } } as never),
    TypeError,
    /^CircuitBreaker: openBackoff\.factor was renamed to openBackoff\.multiplier$/,
  ],
  [
    'cb window.calls renamed',
    () => new CircuitBreaker({ window: { calls: 10 } } as never),
    TypeError,
    /^CircuitBreaker: window\.calls was renamed to windowCalls$/,
  ],
  [
    'cb window.windowMs renamed',
    () => new CircuitBreaker({ window: { windowMs: 1_000, buckets: 10 } } as never),
    TypeError,
    /^CircuitBreaker: window\.windowMs was renamed to windowMs$/,
  ],
  [
    'cb window renamed',
    () => new CircuitBreaker({ window: 60_000 } as never),
    TypeError,
    /CircuitBreaker: window was renamed to windowMs and buckets \(or windowCalls/,
  ],
  ['cb clock not a clock', () => new CircuitBreaker({ clock: 'now' as never }), TypeError, /clock.*"now"/],
  // BreakerGroup
  ['group factory not a function', () => new BreakerGroup({ factory: {} as never }), TypeError, /factory/],
  ['group exclude wrong type', () => new BreakerGroup({ exclude: 'a' as never }), TypeError, /exclude.*"a"/],
  ['group idleMs zero', () => new BreakerGroup({ idleMs: 0 }), RangeError, /idleMs.*0/],
  ['group maxBreakers non-integer', () => new BreakerGroup({ maxBreakers: 10.5 }), RangeError, /maxBreakers.*10\.5/],
  ['group maxBreakers zero', () => new BreakerGroup({ maxBreakers: 0 }), RangeError, /maxBreakers.*0/],
  // CoarseClock
  ['clock resolutionMs negative', () => new CoarseClock({ resolutionMs: -1 }), RangeError, /resolutionMs.*-1/],
  ['clock refreshEvery zero', () => new CoarseClock({ refreshEvery: 0 }), RangeError, /refreshEvery.*0/],
  ['clock idleStopMs NaN', () => new CoarseClock({ idleStopMs: NaN }), RangeError, /idleStopMs.*NaN/],
];

describe('breaker option validation', () => {
  for (const [label, build, error, mentions] of rows) {
    it(`rejects ${label} with ${error.name}`, () => {
      assert.throws(build, (e: unknown) => {
        assert.ok(e instanceof error, `${label}: got ${String(e)}`);
        assert.match((e as Error).message, mentions);
        return true;
      });
    });
  }

  it('accepts the documented defaults and edge values', () => {
    new SreBreaker();
    new SreBreaker({ k: 1, protection: 0, buckets: 1 });
    new CircuitBreaker();
    new CircuitBreaker({ failureRate: 1, slowCallRate: 1, slowCallMs: Infinity, probeTimeoutMs: Infinity, halfOpenCalls: 1, minimumCalls: 1 });
    new CircuitBreaker({ windowCalls: 1, minimumCalls: 1, openBackoff: { maxMs: 30_000 } });
    new CircuitBreaker({ windowMs: 1_000, buckets: 1, openBackoff: { multiplier: 1, maxMs: 30_000 } });
    new BreakerGroup({ exclude: (name) => name.startsWith('internal/') });
  });
});
