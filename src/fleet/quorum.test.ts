import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { decideQuorum, neededQuorum, type FleetReport, type QuorumRule } from './quorum.js';

const rule = (o: Partial<QuorumRule> = {}): QuorumRule => ({ minimumCalls: 20, failureRate: 0.5, minReports: 2, quorum: undefined, ...o });
const rep = (caller: string, calls: number, failures: number, gen = 0): FleetReport => ({ caller, gen, calls, failures });

describe('decideQuorum', () => {
  it('opens on ten reporters of 2 failed calls each: pooled 20 ≥ minimumCalls 20, 10 failing ≥ quorum 5', () => {
    const v = decideQuorum(
      Array.from({ length: 10 }, (_, i) => rep(`c${i}`, 2, 2)),
      0,
      rule(),
    );
    assert.deepEqual(v, { open: true, reporters: 10, failingReporters: 10, quorum: 5, pooledCalls: 20, pooledFailures: 20, cap: 2 });
  });

  it('does not open below minimumCalls pooled, nor below the failure rate', () => {
    assert.equal(
      decideQuorum(
        Array.from({ length: 9 }, (_, i) => rep(`c${i}`, 2, 2)),
        0,
        rule(),
      ).open,
      false,
      '18 calls < 20',
    );
    const mixed = [...Array.from({ length: 5 }, (_, i) => rep(`f${i}`, 4, 4)), ...Array.from({ length: 5 }, (_, i) => rep(`ok${i}`, 4, 0))];
    const v = decideQuorum(mixed, 0, rule());
    assert.equal(v.failingReporters, 5);
    assert.equal(v.pooledFailures / v.pooledCalls, 0.5);
    assert.equal(v.open, true, '50% ≥ 50% with 5 of 10 failing (quorum 5)');
    assert.equal(decideQuorum(mixed, 0, rule({ failureRate: 0.6 })).open, false);
  });

  it('the default quorum is at least 2 and at least half of the reporters', () => {
    assert.deepEqual(
      [1, 2, 3, 4, 5, 9, 10, 11].map((n) => neededQuorum(n, undefined)),
      [2, 2, 2, 2, 3, 5, 5, 6],
    );
    assert.equal(neededQuorum(10, 1), 1);
    const four = [rep('a', 10, 10), rep('b', 10, 10), rep('c', 10, 10), rep('d', 10, 0), rep('e', 10, 0), rep('f', 10, 0), rep('g', 10, 0)];
    assert.equal(decideQuorum(four, 0, rule()).open, false, '3 of 7 failing < quorum 4, though pooled 43% < 50% anyway');
    assert.equal(decideQuorum(four, 0, rule({ failureRate: 0.4 })).open, false, 'pooled 43% ≥ 40% but 3 < 4');
    assert.equal(decideQuorum(four, 0, rule({ failureRate: 0.4, quorum: 3 })).open, true);
  });

  it('caps each reporter at the median volume: one noisy process cannot carry the pool', () => {
    const reports = [rep('noisy', 1000, 1000), rep('b', 2, 2), rep('c', 10, 0), rep('d', 10, 0)];
    const v = decideQuorum(reports, 0, rule({ quorum: 2 }));
    assert.equal(v.cap, 10);
    assert.equal(v.pooledCalls, 32, '10 (capped) + 2 + 10 + 10');
    assert.equal(v.pooledFailures, 12);
    assert.equal(v.failingReporters, 2);
    assert.equal(v.open, false, 'raw 1002 of 1022 failed, capped 37.5% < 50%');
  });

  it('counts only reporters with minReports calls, and only reports of the generation asked', () => {
    const reports = [rep('a', 1, 1), rep('b', 1, 1), rep('c', 30, 30, 1), rep('d', 30, 30, 1)];
    assert.equal(decideQuorum(reports, 0, rule({ minReports: 2 })).reporters, 0);
    assert.equal(decideQuorum(reports, 0, rule({ minReports: 1, minimumCalls: 2 })).open, true);
    assert.equal(decideQuorum(reports, 1, rule()).open, true);
    assert.equal(decideQuorum(reports, 2, rule()).reporters, 0);
  });

  it('property: one failing reporter alone never opens the fleet unless quorum is 1', () => {
    const report = fc.record({ calls: fc.integer({ min: 0, max: 10_000 }), share: fc.double({ min: 0, max: 1, noNaN: true }) });
    fc.assert(
      fc.property(
        fc.record({ calls: fc.integer({ min: 0, max: 100_000 }) }),
        fc.array(report, { maxLength: 30 }),
        fc.double({ min: 0.01, max: 1, noNaN: true }),
        fc.integer({ min: 1, max: 100 }),
        fc.integer({ min: 1, max: 10 }),
        fc.option(fc.integer({ min: 2, max: 40 }), { nil: undefined }),
        (bad, others, failureRate, minimumCalls, minReports, quorum) => {
          const r = rule({ failureRate, minimumCalls, minReports, quorum });
          // The others fail below the threshold (those with calls); the bad one fails every call.
          const healthy = others.map((o, i) => rep(`h${i}`, o.calls, Math.min(o.calls, Math.max(0, Math.ceil(o.calls * failureRate) - 1))));
          const reports = [rep('bad', bad.calls, bad.calls), ...healthy];
          assert.equal(decideQuorum(reports, 0, r).open, false);
          // With quorum 1 the bad reporter alone opens it once it holds minimumCalls at its own volume or less.
          if (healthy.every((h) => h.calls < minReports) && bad.calls >= Math.max(minimumCalls, minReports)) {
            assert.equal(decideQuorum(reports, 0, { ...r, quorum: 1 }).open, true);
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});
