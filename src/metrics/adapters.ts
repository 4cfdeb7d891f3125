/**
 * The metric families of each bulwark component, read from its `stats()` at scrape time and, for the
 * few numbers that exist only as events, counted from its own events. Components are recognised by
 * their constructor's name and shape, not by `instanceof`: importing bulwark/metrics must not load the
 * modules (etcd3, ioredis, undici) of the components an application does not use. @internal
 */
import type { Labels, MetricFamilySpec, MetricsDescription, Trackable, Emit, TextOut, TextSection } from './types.js';

import { counter, gauge, flag, type Any } from './spec.js';
import { client, retry, retryBudget, bulkhead, timeout, fallback, httpGuard, cacheGroup, httpPool } from './adapters-calls.js';


/**
 * The breaker states exported as one 0/1 series each (resilience4j's state gauge). A CircuitBreaker has
 * all four; an SreBreaker has no half-open or forced-open state, so it exports closed and open only.
 */
export const BREAKER_STATES = ['closed', 'open', 'half_open', 'forced_open'] as const;
const SRE_STATES = ['closed', 'open'] as const;
/** A fleet-aware CircuitBreaker (bulwark/fleet) also exports fleet_open: open because its fleet holds it so. */
const FLEET_STATES = [...BREAKER_STATES, 'fleet_open'] as const;

export const BREAKER_FAMILIES: readonly MetricFamilySpec[] = [
  gauge('breaker_state', 'Breaker state: 1 for the current state, 0 for the others (an SreBreaker dropping calls reads open).', ['group', 'state']),
  counter('breaker_calls_total', 'Calls seen by a breaker, by kind: successful, failed, ignored (not counted: the caller aborted or released) or not_permitted (refused).', ['group', 'kind']),
  gauge('breaker_failure_rate', 'Share of failed calls in the breaker window (0..1; 0 without calls).', ['group']),
  gauge('breaker_slow_call_rate', 'Share of slow calls in a CircuitBreaker window (0..1; 0 without calls).', ['group']),
  gauge('breaker_drop_ratio', 'Probability that an SreBreaker drops the next call (0..1).', ['group']),
];
const TRANSITIONS = counter('breaker_state_transitions_total', 'CircuitBreaker state transitions, by from and to state.', ['from', 'to']);
const GROUP_FAMILIES: readonly MetricFamilySpec[] = [
  gauge('breaker_group_breakers', 'Breakers a BreakerGroup holds now.'),
  counter('breaker_group_created_total', 'Breakers a BreakerGroup made.'),
  counter('breaker_group_evicted_total', 'Breakers a BreakerGroup evicted (idle, or over maxBreakers).'),
];

const stateLabel = (s: string): string => s.replace('-', '_');

/** stateOf answers the exported state of a breaker's stats (an SreBreaker reads open while it drops). */
function stateOf(s: Any): string {
  if (typeof s.state === 'string') return s.isolated === true ? 'forced_open' : s.reason === 'fleet' ? 'fleet_open' : stateLabel(s.state);
  return s.dropRatio > 0 ? 'open' : 'closed';
}

/** failureRate answers the share of failed calls in a breaker's window (0 without calls). */
function failureRate(s: Any): number {
  const total = typeof s.calls === 'number' ? s.calls : s.successes + s.failures;
  return total > 0 ? s.failures / total : 0;
}

/**
 * emitBreaker emits one breaker's series through label objects (prom-client's path): `base` is `{}` for
 * a breaker tracked on its own (`name` is added by track; no `group` label), `{ name: key, group }` for
 * a group's member.
 */
function emitBreaker(s: Any, emit: Emit, base: Labels): void {
  const circuit = typeof s.state === 'string';
  const state = stateOf(s);
  for (const st of circuit ? (s.fleet === undefined ? BREAKER_STATES : FLEET_STATES) : SRE_STATES) emit('breaker_state', { ...base, state: st }, st === state ? 1 : 0);
  emit('breaker_calls_total', { ...base, kind: 'successful' }, s.successfulCalls ?? 0);
  emit('breaker_calls_total', { ...base, kind: 'failed' }, s.failedCalls ?? 0);
  emit('breaker_calls_total', { ...base, kind: 'ignored' }, s.ignoredCalls ?? 0);
  emit('breaker_calls_total', { ...base, kind: 'not_permitted' }, s.notPermittedCalls ?? 0);
  emit('breaker_failure_rate', base, failureRate(s));
  if (circuit) emit('breaker_slow_call_rate', base, s.calls > 0 ? s.slowCalls / s.calls : 0);
  else emit('breaker_drop_ratio', base, s.dropRatio);
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
  heads: { state: Uint8Array; calls: Uint8Array; failure: Uint8Array; slow: Uint8Array; drop: Uint8Array };
  tails: Record<(typeof FLEET_STATES)[number] | 'successful' | 'failed' | 'ignored' | 'not_permitted' | 'plain', Uint8Array>;
}

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
  };
  return {
    ...x,
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

/** bytesOf answers the bytes of a byte string. */
const bytesOf = (s: string): Uint8Array => Buffer.from(s, 'latin1');

/**
 * writeBreaker is emitBreaker on the text path: the breaker's lines written from their parts, `key`
 * being its name as a label value; no label objects, no line strings.
 */
function writeBreaker(s: Any, x: BreakerText, key: string): void {
  const circuit = typeof s.state === 'string';
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
}

function breakerSnapshot(b: Any): Any {
  const s = b.stats();
  const out: Any = { ...s };
  if (typeof s.state !== 'string') out.state = s.dropRatio > 0 ? 'open' : 'closed';
  const total = typeof s.calls === 'number' ? s.calls : s.successes + s.failures;
  out.failureRate = total > 0 ? s.failures / total : 0;
  if (typeof s.calls === 'number') out.slowCallRate = s.calls > 0 ? s.slowCalls / s.calls : 0;
  return out;
}

const isBreaker = (c: Any) => typeof c.admit === 'function' && typeof c.tryAdmit === 'function' && typeof c.stats === 'function' && typeof c.execute === 'function';

function breaker(c: Any, trackName: () => string): MetricsDescription {
  const circuit = typeof c.onStateChange === 'function';
  return {
    kind: circuit ? 'CircuitBreaker' : 'SreBreaker',
    families: circuit ? [...BREAKER_FAMILIES, TRANSITIONS] : BREAKER_FAMILIES,
    collect: (emit) => {
      const s = c.stats();
      if (emit.text === undefined) emitBreaker(s, emit, {});
      else writeBreaker(s, standaloneText(emit.text), emit.text.label(trackName()));
    },
    subscribe: circuit
      ? (sink) => c.onStateChange((e: Any) => sink.inc('breaker_state_transitions_total', { from: stateLabel(e.from), to: stateLabel(e.to) }))
      : undefined,
    snapshot: () => breakerSnapshot(c),
    closed: circuit ? flag(c, 'retired') : flag(c, 'closed'),
  };
}

function breakerGroup(c: Any, trackName: () => string): MetricsDescription {
  return {
    kind: 'BreakerGroup',
    families: [...BREAKER_FAMILIES, ...GROUP_FAMILIES],
    collect: (emit) => {
      const s = c.stats();
      emit('breaker_group_breakers', {}, s.size);
      emit('breaker_group_created_total', {}, s.created);
      emit('breaker_group_evicted_total', {}, s.evicted);
      const group = trackName();
      // Members as they are now: made since the last scrape, or evicted, they come and go with the group.
      const text = emit.text;
      if (text === undefined) {
        for (const [key, b] of c.breakers() as Iterable<[string, Any]>) emitBreaker(b.stats(), emit, { name: key, group });
        return;
      }
      const x = breakerText(text, group);
      for (const [key, b] of c.breakers() as Iterable<[string, Any]>) writeBreaker(b.stats(), x, text.label(key));
    },
    snapshot: () => {
      const members: Any = {};
      for (const [key, b] of c.breakers() as Iterable<[string, Any]>) members[key] = breakerSnapshot(b);
      return { ...c.stats(), breakers: members };
    },
    closed: flag(c, 'closed'),
  };
}

const DECISIONS = counter('limiter_decisions_total', 'Decisions of a limiter (local or Redis), by result: allowed or limited.', ['result']);

export const LIMITER_FAMILIES: readonly MetricFamilySpec[] = [
  DECISIONS,
  gauge('limiter_keys', 'Keys a keyed limiter (or a Redis limiter rescue) keeps now.'),
  gauge('limiter_tokens', 'Tokens in a TokenLimiter bucket now.'),
];
const REDIS_LIMITER_FAMILIES: readonly MetricFamilySpec[] = [
  DECISIONS,
  gauge('limiter_mode', 'Where a Redis limiter decides now: 1 for the current mode (redis or rescue), 0 for the other.', ['mode']),
  counter('limiter_redis_decisions_total', 'Decisions of a Redis limiter, by where they were made: redis or rescue (in process).', ['mode']),
  counter('limiter_rescue_switches_total', 'Times a Redis limiter switched its decisions to the in-process rescue.'),
  counter('limiter_redis_failures_total', 'Redis calls of a limiter that failed (errors, timeouts, bad replies).'),
  gauge('limiter_rescue_instances', 'The divisor the rescue limiter applies to the rate or quota (instances of the service).'),
  gauge('limiter_keys', 'Keys a keyed limiter (or a Redis limiter rescue) keeps now.'),
];

function localLimiter(c: Any, kind: string): MetricsDescription {
  return {
    kind,
    families: LIMITER_FAMILIES,
    collect: (emit) => {
      const s = c.stats();
      emit('limiter_decisions_total', { result: 'allowed' }, s.allowed ?? 0);
      emit('limiter_decisions_total', { result: 'limited' }, s.limited ?? 0);
      if (typeof s.keys === 'number') emit('limiter_keys', {}, s.keys);
      if (typeof s.tokens === 'number') emit('limiter_tokens', {}, s.tokens);
    },
  };
}

function redisLimiter(c: Any, kind: string): MetricsDescription {
  return {
    kind,
    families: REDIS_LIMITER_FAMILIES,
    collect: (emit) => {
      const s = c.stats();
      emit('limiter_decisions_total', { result: 'allowed' }, s.allowed ?? 0);
      emit('limiter_decisions_total', { result: 'limited' }, s.limited ?? 0);
      emit('limiter_mode', { mode: 'redis' }, s.mode === 'redis' ? 1 : 0);
      emit('limiter_mode', { mode: 'rescue' }, s.mode === 'rescue' ? 1 : 0);
      emit('limiter_redis_decisions_total', { mode: 'redis' }, s.redisDecisions);
      emit('limiter_redis_decisions_total', { mode: 'rescue' }, s.rescueDecisions);
      emit('limiter_rescue_switches_total', {}, s.outages);
      emit('limiter_redis_failures_total', {}, s.failures);
      emit('limiter_rescue_instances', {}, s.instances);
      emit('limiter_keys', {}, s.rescueKeys);
    },
    snapshot: () => {
      const s = c.stats();
      return { ...s, cause: s.cause === undefined ? undefined : s.cause instanceof Error ? s.cause.message : String(s.cause) };
    },
    closed: flag(c, 'closed'),
  };
}

function shedder(c: Any): MetricsDescription {
  return {
    kind: 'AdaptiveShedder',
    families: [
      counter('shedder_decisions_total', 'Decisions of an AdaptiveShedder, by result: passed or dropped.', ['result']),
      gauge('shedder_in_flight', 'Calls an AdaptiveShedder has in flight now.'),
      gauge('shedder_max_in_flight', 'In-flight calls above which an overloaded process drops (max pass × min response time).'),
      gauge('shedder_min_response_seconds', 'Shortest response time an AdaptiveShedder has seen over its window.'),
      gauge('shedder_overloaded', '1 while the AdaptiveShedder finds the process overloaded.'),
      gauge('shedder_event_loop_utilization', 'Share of the last load sample the event loop was busy (0..1), as the AdaptiveShedder reads it.'),
      gauge('shedder_event_loop_delay_p99_seconds', 'p99 of event-loop delay over the last load sample, as the AdaptiveShedder reads it.'),
    ],
    collect: (emit) => {
      const s = c.stats();
      emit('shedder_decisions_total', { result: 'passed' }, s.passed);
      emit('shedder_decisions_total', { result: 'dropped' }, s.dropped);
      emit('shedder_in_flight', {}, s.inFlight);
      emit('shedder_max_in_flight', {}, s.maxInFlight);
      emit('shedder_min_response_seconds', {}, s.minRtMs / 1000);
      emit('shedder_overloaded', {}, s.overloaded ? 1 : 0);
      emit('shedder_event_loop_utilization', {}, s.load.utilization);
      emit('shedder_event_loop_delay_p99_seconds', {}, s.load.delayP99Ms / 1000);
    },
  };
}

function registryCache(c: Any): MetricsDescription {
  return {
    kind: 'RegistryCache',
    families: [
      counter('registry_cache_hits_total', 'Lookups a RegistryCache answered from a fresh entry.'),
      counter('registry_cache_misses_total', 'Lookups that found no fresh entry.'),
      counter('registry_cache_stale_answers_total', 'Lookups answered with a stale entry (throttled, or the registry failed or answered empty).'),
      counter('registry_cache_throttled_total', 'Lookups answered without asking the registry because the service was throttled.'),
      counter('registry_cache_registry_calls_total', 'Calls the RegistryCache made to the registry.'),
      counter('registry_cache_watch_reconnects_total', 'Registry watches started again after they failed or ended.'),
      counter('registry_cache_watch_events_total', 'Registry watch events applied.'),
      gauge('registry_cache_services', 'Services cached now.'),
      gauge('registry_cache_watches', 'Registry watches open now.'),
      gauge('registry_cache_service_instances', 'Instances cached for a service.', ['service']),
      gauge('registry_cache_service_stale_seconds', 'How long ago a cached service went stale (0 while fresh).', ['service']),
    ],
    collect: (emit) => {
      const s = c.stats();
      emit('registry_cache_hits_total', {}, s.hits);
      emit('registry_cache_misses_total', {}, s.misses);
      emit('registry_cache_stale_answers_total', {}, s.stale);
      emit('registry_cache_throttled_total', {}, s.throttled);
      emit('registry_cache_registry_calls_total', {}, s.registryCalls);
      emit('registry_cache_watch_reconnects_total', {}, s.watchReconnects);
      emit('registry_cache_watch_events_total', {}, s.watchEvents);
      emit('registry_cache_services', {}, s.services);
      emit('registry_cache_watches', {}, s.watches);
      for (const e of c.services()) {
        emit('registry_cache_service_instances', { service: e.service }, e.instances);
        emit('registry_cache_service_stale_seconds', { service: e.service }, e.staleForMs / 1000);
      }
    },
    snapshot: () => ({ ...c.stats(), entries: c.services() }),
    closed: flag(c, 'closed'),
  };
}

function etcdRegistry(c: Any): MetricsDescription {
  const totals: [string, string, string][] = [
    ['etcd_registry_leases_granted_total', 'leasesGranted', 'Leases granted (first ones and replacements).'],
    ['etcd_registry_leases_lost_total', 'leasesLost', 'Leases given up (gone in etcd, or TTL passed without a confirmed keep-alive).'],
    ['etcd_registry_keepalives_total', 'keepAlives', 'Keep-alives etcd answered.'],
    ['etcd_registry_keepalive_failures_total', 'keepAliveFailures', 'Keep-alives no member answered.'],
    ['etcd_registry_rewrites_total', 'rewrites', 'Times every instance under a lease was written again.'],
    ['etcd_registry_watch_resyncs_total', 'watchResyncs', 'Watches that listed again after a compacted revision.'],
    ['etcd_registry_watch_moves_total', 'watchMoves', 'Times a watch stream broke and resumed on a member.'],
    ['etcd_registry_retried_total', 'retried', 'Attempts that failed on a member and were retried.'],
    ['etcd_registry_unavailable_total', 'unavailable', 'Calls no member answered within their deadline.'],
  ];
  return {
    kind: 'EtcdRegistry',
    families: [
      ...totals.map(([n, , h]) => counter(n, h)),
      gauge('etcd_registry_leases', 'Leases held now.'),
      gauge('etcd_registry_pending_changes', 'register/deregister changes not yet confirmed in etcd.'),
      gauge('etcd_registry_member_up', '1 while calls go to an etcd member, 0 while it is skipped after a failure.', ['endpoint']),
      counter('etcd_registry_member_attempts_total', 'Attempts sent to an etcd member.', ['endpoint']),
      counter('etcd_registry_member_failures_total', 'Attempts that failed on an etcd member.', ['endpoint']),
    ],
    collect: (emit) => {
      const s = c.stats();
      for (const [n, field] of totals) emit(n, {}, s[field]);
      emit('etcd_registry_leases', {}, s.leases);
      emit('etcd_registry_pending_changes', {}, s.pending);
      for (const m of s.members ?? []) {
        emit('etcd_registry_member_up', { endpoint: m.endpoint }, m.live ? 1 : 0);
        emit('etcd_registry_member_attempts_total', { endpoint: m.endpoint }, m.attempts);
        emit('etcd_registry_member_failures_total', { endpoint: m.endpoint }, m.failures);
      }
    },
    closed: flag(c, 'closed'),
  };
}

function instanceAddress(i: Any): string {
  return typeof i.address === 'string' ? i.address : String(i.id);
}

/** balancerFamilies answers the Balancer families (the per-instance ones with an instance label). */
function balancerFamilies(instanceLabel: string | undefined): MetricFamilySpec[] {
  const families = [
    gauge('balancer_instances', 'Instances a Balancer knows, healthy or not.', ['group']),
    gauge('balancer_available_instances', 'Instances in rotation now: not ejected, down or held out by an open breaker within the cap (all but the forced in panic mode).', ['group']),
    gauge('balancer_ejected_instances', 'Instances ejected by outlier detection now.', ['group']),
    gauge('balancer_down_instances', 'Instances down according to active health probes.', ['group']),
    gauge('balancer_breaker_open_instances', 'Instances out of rotation because their breaker is open on evidence (within the cap).', ['group']),
    gauge('balancer_forced_instances', 'Instances held out by force (an operator isolated their breaker): never put back by the cap or panic.', ['group']),
    gauge('balancer_capped_instances', 'Instances that would be out (ejected, down or breaker open) but stay in rotation: maxEjectionPercent is reached.', ['group']),
    gauge('balancer_panic', '1 while too few instances are left after the cap and picks go to all of them (but the forced).', ['group']),
  ];
  if (instanceLabel !== undefined) {
    families.push(
      gauge('balancer_instance_up', 'Per instance: 1 while healthy (not ejected, up by probes).', ['group', instanceLabel]),
      gauge('balancer_instance_ewma_seconds', 'Per instance: the P2C balancer’s moving average of response time.', ['group', instanceLabel]),
    );
  }
  return families;
}

/** collectBalancer emits one balancer's series; `base` is `{}` on its own, `{ name: service, group: client }` as a client's part. */
function collectBalancer(c: Any, emit: Emit, base: Labels, instanceLabel: string | undefined): void {
  const s = c.stats();
  emit('balancer_instances', base, s.instances);
  emit('balancer_available_instances', base, s.available);
  emit('balancer_ejected_instances', base, s.ejected);
  emit('balancer_down_instances', base, s.down);
  emit('balancer_breaker_open_instances', base, s.breakerOpen ?? 0);
  emit('balancer_forced_instances', base, s.forced ?? 0);
  emit('balancer_capped_instances', base, s.capped ?? 0);
  emit('balancer_panic', base, s.panic ? 1 : 0);
  if (instanceLabel === undefined) return;
  for (const h of c.health()) {
    const l: Labels = { ...base, [instanceLabel]: instanceAddress(h.instance) };
    emit('balancer_instance_up', l, h.up && !h.ejected ? 1 : 0);
    const e = typeof c.picker?.ewmaOf === 'function' ? c.picker.ewmaOf(h.instance.id) : undefined;
    if (e !== undefined) emit('balancer_instance_ewma_seconds', l, e / 1000);
  }
}

function balancer(c: Any, instanceLabel: string | undefined): MetricsDescription {
  const ewmaOf = (id: string): number | undefined => (typeof c.picker?.ewmaOf === 'function' ? c.picker.ewmaOf(id) : undefined);
  return {
    kind: 'Balancer',
    families: balancerFamilies(instanceLabel),
    collect: (emit) => collectBalancer(c, emit, {}, instanceLabel),
    snapshot: () => ({
      ...c.stats(),
      instances: c.health().map((h: Any) => ({
        id: h.instance.id,
        address: instanceAddress(h.instance),
        up: h.up,
        ejected: h.ejected,
        timesEjected: h.timesEjected,
        ewmaMs: ewmaOf(h.instance.id),
      })),
    }),
    closed: flag(c, 'closed'),
  };
}

const isBalancer = (b: Any) => b !== null && typeof b === 'object' && typeof b.stats === 'function' && typeof b.health === 'function' && typeof b.pick === 'function';
const isRegistryCache = (r: Any) => r !== null && typeof r === 'object' && typeof r.stats === 'function' && typeof r.services === 'function' && typeof r.getService === 'function';

/**
 * resilientClient describes a ResilientClient with its parts, so that one `track(client)` exports what
 * explains its calls: its own families; its breakers (the BreakerGroup's families, members named
 * `<service>` and `<service>/<instance id>` with `group` = the client's name: bounded by the instances
 * the services list and the group's maxBreakers); each open service's balancer (`name` = the service,
 * `group` = the client's name: health, ejections, the cap and panic); and the registry cache it reads
 * (named for the client). The parts are found by shape (`breakers`, `openServices()`, `registry`).
 */
function resilientClient(c: Any, instanceLabel: string | undefined, trackName: () => string): MetricsDescription {
  const own = client(c);
  const group = c.breakers !== null && typeof c.breakers === 'object' && typeof c.breakers.breakers === 'function' ? breakerGroup(c.breakers, trackName) : undefined;
  const cache = isRegistryCache(c.registry) ? registryCache(c.registry) : undefined;
  const families = [...own.families, ...(group?.families ?? []), ...balancerFamilies(instanceLabel), ...(cache?.families ?? [])];
  return {
    kind: 'ResilientClient',
    families: [...new Map(families.map((f) => [f.name, f])).values()],
    collect: (emit) => {
      own.collect?.(emit);
      group?.collect?.(emit);
      const clientName = trackName();
      for (const s of c.openServices() as Iterable<Any>) {
        if (!isBalancer(s.balancer)) continue;
        const base: Labels = { name: s.name, group: clientName };
        collectBalancer(s.balancer, emit, base, instanceLabel);
      }
      if (cache !== undefined && !c.registry.closed) cache.collect?.(emit);
    },
    subscribe: own.subscribe,
    snapshot: () => ({
      ...(own.snapshot?.() as Any),
      services: (c.openServices() as Any[]).map((s) => ({ service: s.name, balancer: isBalancer(s.balancer) ? s.balancer.stats() : undefined })),
    }),
    closed: own.closed,
  };
}

/**
 * describeComponent answers the description of a known component, or of one with `describeMetrics()`,
 * or undefined. `trackName` is read at scrape time (a group's name becomes its members' `group` label).
 */
export function describeComponent(component: object, instanceLabel: string | undefined, trackName: () => string): MetricsDescription | undefined {
  if (component === null || typeof component !== 'object') return undefined;
  const c = component as Any;
  if (typeof (c as Partial<Trackable>).describeMetrics === 'function') return (c as Trackable).describeMetrics();
  const kind: string = c.constructor?.name ?? '';
  switch (kind) {
    case 'SreBreaker':
    case 'CircuitBreaker':
      return breaker(c, trackName);
    case 'BreakerGroup':
      return breakerGroup(c, trackName);
    case 'TokenLimiter':
    case 'PeriodLimiter':
    case 'KeyedLimiter':
      return localLimiter(c, kind);
    case 'RedisTokenLimiter':
    case 'RedisPeriodLimiter':
      return redisLimiter(c, kind);
    case 'AdaptiveShedder':
      return shedder(c);
    case 'RegistryCache':
      return registryCache(c);
    case 'EtcdRegistry':
      return etcdRegistry(c);
    case 'Balancer':
      return balancer(c, instanceLabel);
    case 'ResilientClient':
      return resilientClient(c, instanceLabel, trackName);
    case 'Retry':
      return retry(c);
    case 'RetryBudget':
      return retryBudget(c);
    case 'Bulkhead':
      return bulkhead(c);
    case 'Timeout':
      return timeout(c);
    case 'Fallback':
      return fallback(c);
    case 'HttpGuard':
      return httpGuard(c);
    case 'Group':
      return typeof c.cacheStats === 'function' ? cacheGroup(c) : undefined;
    case 'HttpPool':
      return typeof c.members === 'function' ? httpPool(c) : undefined;
  }
  // Subclasses and other breakers: by shape.
  if (isBreaker(c)) return breaker(c, trackName);
  if (typeof c.onModeChange === 'function' && typeof c.stats === 'function') return redisLimiter(c, kind || 'RedisLimiter');
  return undefined;
}
