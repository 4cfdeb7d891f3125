/**
 * The metric families of a Balancer — instances by state, the cap and panic, and per instance (when the
 * registry asks for an instance label) health and the P2C moving average — and its `describeMetrics()`.
 * @internal
 */
import type { Labels, MetricFamilySpec, MetricsContext, MetricsDescription } from '../core/metrics-description.js';
import type { ServiceInstance } from '../registry/types.js';
import type { BalancerStats, InstanceHealth, Picker } from './types.js';

const gauge = (name: string, help: string, labelNames: string[]): MetricFamilySpec => ({ name, type: 'gauge', help, labelNames });

/**
 * balancerFamilies answers the Balancer families, the per-instance ones with `instanceLabel` (none when
 * it is undefined). A ResilientClient declares them for the balancers of the services it will open.
 */
export function balancerFamilies(instanceLabel: string | undefined): MetricFamilySpec[] {
  const families = [
    gauge('balancer_instances', 'Instances a Balancer knows, healthy or not.', ['group']),
    gauge(
      'balancer_available_instances',
      'Instances in rotation now: not ejected, down or held out by an open breaker within the cap (all but the forced in panic mode).',
      ['group'],
    ),
    gauge('balancer_ejected_instances', 'Instances ejected by outlier detection now.', ['group']),
    gauge('balancer_down_instances', 'Instances down according to active health probes.', ['group']),
    gauge('balancer_drained_instances', 'Instances drained by a weight override of 0: out of rotation, their calls in flight finishing.', ['group']),
    gauge('balancer_breaker_open_instances', 'Instances out of rotation because their breaker is open on evidence (within the cap).', ['group']),
    gauge('balancer_forced_instances', 'Instances held out by force (an operator isolated their breaker): never put back by the cap or panic.', ['group']),
    gauge('balancer_capped_instances', 'Instances that would be out (ejected, down or breaker open) but stay in rotation: maxEjectionPercent is reached.', [
      'group',
    ]),
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

/** BalancerSource is a Balancer as its description reads it. */
interface BalancerSource {
  readonly picker: Picker & { ewmaOf?(id: string): number | undefined };
  stats(): BalancerStats;
  health(): InstanceHealth[];
}

const instanceAddress = (i: ServiceInstance): string => (typeof i.address === 'string' ? i.address : String(i.id));

/**
 * describeBalancer answers a Balancer's description: its series carry no `group` label on their own
 * (a ResilientClient that describes its balancers adds `name` = the service and `group` = its name).
 */
export function describeBalancer(b: BalancerSource, ctx: MetricsContext, closed: () => boolean): MetricsDescription {
  const instanceLabel = ctx.instanceLabel;
  const ewmaOf = (id: string): number | undefined => (typeof b.picker?.ewmaOf === 'function' ? b.picker.ewmaOf(id) : undefined);
  return {
    kind: 'Balancer',
    families: balancerFamilies(instanceLabel),
    collect: (emit) => {
      const s = b.stats();
      emit('balancer_instances', {}, s.instances);
      emit('balancer_available_instances', {}, s.available);
      emit('balancer_ejected_instances', {}, s.ejected);
      emit('balancer_down_instances', {}, s.down);
      emit('balancer_drained_instances', {}, s.drained ?? 0);
      emit('balancer_breaker_open_instances', {}, s.breakerOpen ?? 0);
      emit('balancer_forced_instances', {}, s.forced ?? 0);
      emit('balancer_capped_instances', {}, s.capped ?? 0);
      emit('balancer_panic', {}, s.panic ? 1 : 0);
      if (instanceLabel === undefined) return;
      for (const h of b.health()) {
        const l: Labels = { [instanceLabel]: instanceAddress(h.instance) };
        emit('balancer_instance_up', l, h.up && !h.ejected ? 1 : 0);
        const e = ewmaOf(h.instance.id);
        if (e !== undefined) emit('balancer_instance_ewma_seconds', l, e / 1000);
      }
    },
    snapshot: () => ({
      ...b.stats(),
      instances: b.health().map((h) => ({
        id: h.instance.id,
        address: instanceAddress(h.instance),
        up: h.up,
        ejected: h.ejected,
        timesEjected: h.timesEjected,
        ewmaMs: ewmaOf(h.instance.id),
      })),
    }),
    closed,
  };
}
