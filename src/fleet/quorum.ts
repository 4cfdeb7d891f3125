/**
 * The fleet's rule, as a pure function: the fleet opens on pooled evidence from enough independent
 * reporters. A reporter is a process whose window holds at least `minReports` calls; the pool sums the
 * reporters' windows, each capped at the median reporter's volume (so one noisy process cannot carry
 * it); the fleet opens when the pool holds at least `minimumCalls` calls failing at `failureRate` or
 * more, and at least `quorum` reporters each fail at that rate on their own (default: at least 2, and at
 * least half of the reporters). One process alone never opens the others unless `quorum` is 1.
 */

/** FleetReport is one process's window for one dependency, as published to the store. */
export interface FleetReport {
  /** The process's caller id. */
  caller: string;
  /** The fleet generation the counts belong to (bumped when the fleet's probes close it). */
  gen: number;
  calls: number;
  failures: number;
}

/** QuorumRule is what the rule is computed with. */
export interface QuorumRule {
  minimumCalls: number;
  failureRate: number;
  minReports: number;
  /** Failing reporters needed; undefined: max(2, ⌈reporters / 2⌉). */
  quorum: number | undefined;
}

/** QuorumVerdict is the rule's answer with the numbers behind it. */
export interface QuorumVerdict {
  open: boolean;
  reporters: number;
  failingReporters: number;
  quorum: number;
  pooledCalls: number;
  pooledFailures: number;
  /** The per-reporter cap: the median reporter's calls. */
  cap: number;
}

/** neededQuorum answers the failing reporters needed among `reporters`. */
export function neededQuorum(reporters: number, quorum: number | undefined): number {
  return quorum ?? Math.max(2, Math.ceil(reporters / 2));
}

/** isFailingReporter: a window of `calls` calls (at least minReports) failing at the rule's failure rate or above. */
export function isFailingReporter(calls: number, failures: number, rule: Pick<QuorumRule, 'minReports' | 'failureRate'>): boolean {
  return calls >= rule.minReports && calls > 0 && failures / calls >= rule.failureRate;
}

/** decideQuorum applies the rule to the reports of one generation (others are ignored). */
export function decideQuorum(reports: Iterable<FleetReport>, gen: number, rule: QuorumRule): QuorumVerdict {
  const volumes: number[] = [];
  const live: FleetReport[] = [];
  for (const r of reports) {
    if (r.gen !== gen || r.calls < rule.minReports) continue;
    live.push(r);
    volumes.push(r.calls);
  }
  volumes.sort((a, b) => a - b);
  // The cap: the median volume (the upper one of an even count), so a single reporter never exceeds the typical one.
  const cap = volumes.length === 0 ? 0 : volumes[volumes.length >> 1]!;
  let pooledCalls = 0;
  let pooledFailures = 0;
  let failing = 0;
  for (const r of live) {
    const rate = r.failures / r.calls;
    if (isFailingReporter(r.calls, r.failures, rule)) failing++;
    const calls = Math.min(r.calls, cap);
    pooledCalls += calls;
    pooledFailures += calls * rate;
  }
  const quorum = neededQuorum(live.length, rule.quorum);
  const open = pooledCalls >= rule.minimumCalls && pooledCalls > 0 && pooledFailures / pooledCalls >= rule.failureRate && failing >= quorum;
  return { open, reporters: live.length, failingReporters: failing, quorum, pooledCalls, pooledFailures: Math.round(pooledFailures * 1000) / 1000, cap };
}
