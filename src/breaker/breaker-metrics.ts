/**
 * The metric families of the breakers and of BreakerGroup, and how a breaker's stats become samples: as
 * label objects (a registry's generic path), or written as text lines from pre-encoded parts (a
 * scrape's text path, for a group of 10 000 breakers). The breakers' `describeMetrics()` are made here.
 * @internal
 */
import type { Emit, Labels, MetricFamilySpec, MetricsContext, MetricsDescription, TextOut, TextSection } from '../core/metrics-description.js';
import type { Breaker, CircuitBreakerStats, SreBreakerStats, StateChange } from './types.js';

/** BreakerStats are either breaker's stats; a CircuitBreaker's have a `state`. */
type BreakerStats = SreBreakerStats | CircuitBreakerStats;

/**
 * The breaker states exported as one 0/1 series each (resilience4j's state gauge). A CircuitBreaker has
 * all four; an SreBreaker has no half-open or forced-open state, so it exports closed and open only.
 */
const BREAKER_STATES = ['closed', 'open', 'half_open', 'forced_open'] as const;
const SRE_STATES = ['closed', 'open'] as const;
/** A fleet-aware CircuitBreaker (bulwark/fleet) also exports fleet_open: open because its fleet holds it so. */
const FLEET_STATES = [...BREAKER_STATES, 'fleet_open'] as const;

const BREAKER_FAMILIES: readonly MetricFamilySpec[] = [
  {
    name: 'breaker_state',
    type: 'gauge',
    help: 'Breaker state: 1 for the current state, 0 for the others (an SreBreaker dropping calls reads open).',
    labelNames: ['group', 'state'],
  },
  {
    name: 'breaker_calls_total',
    type: 'counter',
    help: 'Calls seen by a breaker, by kind: successful, failed, ignored (not counted: the caller aborted or released) or not_permitted (refused).',
    labelNames: ['group', 'kind'],
  },
  { name: 'breaker_failure_rate', type: 'gauge', help: 'Share of failed calls in the breaker window (0..1; 0 without calls).', labelNames: ['group'] },
  { name: 'breaker_slow_call_rate', type: 'gauge', help: 'Share of slow calls in a CircuitBreaker window (0..1; 0 without calls).', labelNames: ['group'] },
  { name: 'breaker_drop_ratio', type: 'gauge', help: 'Probability that an SreBreaker drops the next call (0..1).', labelNames: ['group'] },
  {
    name: 'breaker_isolated',
    type: 'gauge',
    help: "1 while an operator isolates the breaker (isolate(reason)), with the operator's reason; no series otherwise.",
    labelNames: ['group', 'reason'],
  },
];
const CIRCUIT_FAMILIES: readonly MetricFamilySpec[] = [
  ...BREAKER_FAMILIES,
  { name: 'breaker_state_transitions_total', type: 'counter', help: 'CircuitBreaker state transitions, by from and to state.', labelNames: ['from', 'to'] },
];
/** The families of a BreakerGroup: its members' and its own. */
export const BREAKER_GROUP_FAMILIES: readonly MetricFamilySpec[] = [
  ...BREAKER_FAMILIES,
  { name: 'breaker_group_breakers', type: 'gauge', help: 'Breakers a BreakerGroup holds now.', labelNames: [] },
  { name: 'breaker_group_created_total', type: 'counter', help: 'Breakers a BreakerGroup made.', labelNames: [] },
  { name: 'breaker_group_evicted_total', type: 'counter', help: 'Breakers a BreakerGroup evicted (idle, or over maxBreakers).', labelNames: [] },
];

const stateLabel = (s: string): string => s.replace('-', '_');
const isCircuit = (s: BreakerStats): s is CircuitBreakerStats => typeof (s as Partial<CircuitBreakerStats>).state === 'string';

/** stateOf answers the exported state of a breaker's stats (an SreBreaker reads open while it drops). */
function stateOf(s: BreakerStats): string {
  if (isCircuit(s)) return s.isolated ? 'forced_open' : s.reason === 'fleet' ? 'fleet_open' : stateLabel(s.state);
  return s.dropRatio > 0 ? 'open' : 'closed'; // isolated: a drop ratio of 1
}

/** failureRate answers the share of failed calls in a breaker's window (0 without calls). */
function failureRate(s: BreakerStats): number {
  const total = isCircuit(s) ? s.calls : s.successes + s.failures;
  return total > 0 ? s.failures / total : 0;
}

/**
 * emitBreaker emits one breaker's series through label objects: `base` is `{}` for a breaker tracked
 * on its own (`name` is added by the registry; no `group` label), `{ name: key, group }` for a group's
 * member.
 */
function emitBreaker(s: BreakerStats, emit: Emit, base: Labels): void {
  const circuit = isCircuit(s);
  const state = stateOf(s);
  for (const st of circuit ? (s.fleet === undefined ? BREAKER_STATES : FLEET_STATES) : SRE_STATES)
    emit('breaker_state', { ...base, state: st }, st === state ? 1 : 0);
  emit('breaker_calls_total', { ...base, kind: 'successful' }, s.successfulCalls ?? 0);
  emit('breaker_calls_total', { ...base, kind: 'failed' }, s.failedCalls ?? 0);
  emit('breaker_calls_total', { ...base, kind: 'ignored' }, s.ignoredCalls ?? 0);
  emit('breaker_calls_total', { ...base, kind: 'not_permitted' }, s.notPermittedCalls ?? 0);
  emit('breaker_failure_rate', base, failureRate(s));
  if (circuit) emit('breaker_slow_call_rate', base, s.calls > 0 ? s.slowCalls / s.calls : 0);
  else emit('breaker_drop_ratio', base, s.dropRatio);
  if (s.isolatedReason !== undefined) emit('breaker_isolated', { ...base, reason: s.isolatedReason }, 1);
}

/**
 * BreakerText is where a scrape's text path writes the breaker families, with each line's fixed parts
 * made once per scrape: the head up to the breaker's name, and the tails after it (the group label, the
 * state or kind, up to the value).
 */
interface BreakerText {
  state: TextSection | undefined;
  calls: TextSection | undefined;
  failure: TextSection | undefined;
  slow: TextSection | undefined;
  drop: TextSection | undefined;
  isolated: TextSection | undefined;
  /** The group label as written after the name (`,group="…"`), or ''. */
  group: string;
  heads: { state: Uint8Array; calls: Uint8Array; failure: Uint8Array; slow: Uint8Array; drop: Uint8Array };
  tails: Record<(typeof FLEET_STATES)[number] | 'successful' | 'failed' | 'ignored' | 'not_permitted' | 'plain', Uint8Array>;
}

/** bytesOf answers the bytes of a byte string. */
const bytesOf = (s: string): Uint8Array => Buffer.from(s, 'latin1');

/** breakerText answers the sections and line parts of the breaker families; `group` is undefined for a breaker on its own. */
function breakerText(text: TextOut, group: string | undefined): BreakerText {
  const g = group === undefined ? '' : `,group="${text.label(group)}"`;
  const head = (x: TextSection | undefined) => bytesOf(x === undefined ? '' : `${x.name}{name="`);
  const x = {
    state: text.section('breaker_state'),
    calls: text.section('breaker_calls_total'),
    failure: text.section('breaker_failure_rate'),
    slow: text.section('breaker_slow_call_rate'),
    drop: text.section('breaker_drop_ratio'),
    isolated: text.section('breaker_isolated'),
  };
  return {
    ...x,
    group: g,
    heads: { state: head(x.state), calls: head(x.calls), failure: head(x.failure), slow: head(x.slow), drop: head(x.drop) },
    tails: {
      closed: bytesOf(`"${g},state="closed"} `),
      open: bytesOf(`"${g},state="open"} `),
      half_open: bytesOf(`"${g},state="half_open"} `),
      forced_open: bytesOf(`"${g},state="forced_open"} `),
      fleet_open: bytesOf(`"${g},state="fleet_open"} `),
      successful: bytesOf(`"${g},kind="successful"} `),
      failed: bytesOf(`"${g},kind="failed"} `),
      ignored: bytesOf(`"${g},kind="ignored"} `),
      not_permitted: bytesOf(`"${g},kind="not_permitted"} `),
      plain: bytesOf(`"${g}} `),
    },
  };
}

/** The line parts of breakers tracked on their own (all ASCII: no group label), shared per registered family. */
const standalone = new WeakMap<object, BreakerText>();

function standaloneText(text: TextOut): BreakerText {
  const key = text.section('breaker_state');
  if (key === undefined) return breakerText(text, undefined);
  let x = standalone.get(key);
  if (x === undefined || x.calls !== text.section('breaker_calls_total')) standalone.set(key, (x = breakerText(text, undefined)));
  return x;
}

const bit = (b: boolean): number => (b ? 1 : 0);

/**
 * writeBreaker is emitBreaker on the text path: the breaker's lines written from their parts, `key`
 * being its name as a label value; no label objects, no line strings.
 */
function writeBreaker(s: BreakerStats, x: BreakerText, key: string, text: TextOut): void {
  const circuit = isCircuit(s);
  const state = stateOf(s);
  const t = x.tails;
  const st = x.state;
  if (st !== undefined) {
    const h = x.heads.state;
    st.line(h, key, t.closed, bit(state === 'closed'));
    st.line(h, key, t.open, bit(state === 'open'));
    if (circuit) {
      st.line(h, key, t.half_open, bit(state === 'half_open'));
      st.line(h, key, t.forced_open, bit(state === 'forced_open'));
      if (s.fleet !== undefined) st.line(h, key, t.fleet_open, bit(state === 'fleet_open'));
    }
  }
  const c = x.calls;
  if (c !== undefined) {
    const h = x.heads.calls;
    c.line(h, key, t.successful, s.successfulCalls ?? 0);
    c.line(h, key, t.failed, s.failedCalls ?? 0);
    c.line(h, key, t.ignored, s.ignoredCalls ?? 0);
    c.line(h, key, t.not_permitted, s.notPermittedCalls ?? 0);
  }
  x.failure?.line(x.heads.failure, key, t.plain, failureRate(s));
  if (circuit) x.slow?.line(x.heads.slow, key, t.plain, s.calls > 0 ? s.slowCalls / s.calls : 0);
  else x.drop?.line(x.heads.drop, key, t.plain, s.dropRatio);
  // Rare (an operator's isolation): one line made as a string, its reason escaped.
  if (s.isolatedReason !== undefined && x.isolated !== undefined) {
    x.isolated.write(`${x.isolated.name}{name="${key}"${x.group},reason="${text.label(s.isolatedReason)}"} 1\n`);
  }
}

/** breakerSnapshot answers a breaker's status: its stats, its exported state and its rates. */
function breakerSnapshot(s: BreakerStats): Record<string, unknown> {
  const out: Record<string, unknown> = { ...s };
  if (!isCircuit(s)) out.state = s.dropRatio > 0 ? 'open' : 'closed';
  out.failureRate = failureRate(s);
  if (isCircuit(s)) out.slowCallRate = s.calls > 0 ? s.slowCalls / s.calls : 0;
  return out;
}

/** StatsSource is a breaker as its description reads it. */
interface StatsSource {
  stats(): BreakerStats;
}

/** memberStats answers a group member's stats, or undefined for a breaker of one's own without stats(). */
const memberStats = (b: Breaker): BreakerStats | undefined => (b as Partial<StatsSource>).stats?.();

/**
 * describeBreaker answers the description of a breaker tracked on its own; `onStateChange` is given for
 * a CircuitBreaker (its transitions are counted as they happen).
 */
export function describeBreaker(
  b: StatsSource,
  ctx: MetricsContext,
  closed: () => boolean,
  onStateChange?: (listener: (change: StateChange) => void) => () => void,
): MetricsDescription {
  return {
    kind: onStateChange === undefined ? 'SreBreaker' : 'CircuitBreaker',
    families: onStateChange === undefined ? BREAKER_FAMILIES : CIRCUIT_FAMILIES,
    collect: (emit) => {
      const s = b.stats();
      if (emit.text === undefined) emitBreaker(s, emit, {});
      else writeBreaker(s, standaloneText(emit.text), emit.text.label(ctx.name()), emit.text);
    },
    subscribe:
      onStateChange === undefined
        ? undefined
        : (sink) => onStateChange((e) => sink.inc('breaker_state_transitions_total', { from: stateLabel(e.from), to: stateLabel(e.to) })),
    snapshot: () => breakerSnapshot(b.stats()),
    closed,
  };
}

/** BreakerGroupSource is a BreakerGroup as its description reads it. */
interface BreakerGroupSource {
  stats(): { size: number; created: number; evicted: number };
  breakers(): Iterable<[string, Breaker]>;
}

/**
 * describeBreakerGroup answers the description of a BreakerGroup: its own families and its members'
 * (named for their key, with `group` = the group's track name, `ctx.name()`).
 */
export function describeBreakerGroup(g: BreakerGroupSource, ctx: MetricsContext, closed: () => boolean): MetricsDescription {
  // The line parts, kept from scrape to scrape while the group's name and the families stay: a scrape
  // copies the lines that did not change from the last one only when they were made of the same parts.
  let parts: BreakerText | undefined;
  let partsFor = '';
  const partsOf = (text: TextOut, group: string): BreakerText => {
    const label = text.label(group); // also notes a name outside ASCII for this scrape
    if (parts === undefined || label !== partsFor || parts.state !== text.section('breaker_state') || parts.calls !== text.section('breaker_calls_total')) {
      parts = breakerText(text, group);
      partsFor = label;
    }
    return parts;
  };
  return {
    kind: 'BreakerGroup',
    families: BREAKER_GROUP_FAMILIES,
    collect: (emit) => {
      const s = g.stats();
      emit('breaker_group_breakers', {}, s.size);
      emit('breaker_group_created_total', {}, s.created);
      emit('breaker_group_evicted_total', {}, s.evicted);
      const group = ctx.name();
      // Members as they are now: made since the last scrape, or evicted, they come and go with the group.
      const text = emit.text;
      if (text === undefined) {
        for (const [key, b] of g.breakers()) {
          const m = memberStats(b);
          if (m !== undefined) emitBreaker(m, emit, { name: key, group });
        }
        return;
      }
      const x = partsOf(text, group);
      for (const [key, b] of g.breakers()) {
        const m = memberStats(b);
        if (m !== undefined) writeBreaker(m, x, text.label(key), text);
      }
    },
    snapshot: () => {
      const members: Record<string, unknown> = {};
      for (const [key, b] of g.breakers()) {
        const m = memberStats(b);
        if (m !== undefined) members[key] = breakerSnapshot(m);
      }
      return { ...g.stats(), breakers: members };
    },
    closed,
  };
}
