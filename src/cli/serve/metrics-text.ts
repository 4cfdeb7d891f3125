/**
 * metricsText renders a node's status as Prometheus text exposition: the counters of each group and of
 * the origin guards. A stopgap with no dependency: once `bulwark/metrics` is merged, /metrics is its
 * handler (BulwarkMetrics tracking the groups, the pool, the breaker and the bulkhead) and this file goes.
 */
import type { NodeStatus } from './node.js';

/** metricsText answers the exposition of `status`. */
export function metricsText(status: NodeStatus): string {
  const out: string[] = [];
  const counter = (name: string, help: string, rows: [string, number][]) => {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`);
    for (const [labels, v] of rows) out.push(`${name}${labels} ${v}`);
  };
  const gauge = (name: string, help: string, rows: [string, number][]) => {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
    for (const [labels, v] of rows) out.push(`${name}${labels} ${v}`);
  };
  const groups = Object.entries(status.groups);
  const per = (field: string): [string, number][] => groups.map(([g, s]) => [`{group=${JSON.stringify(g)}}`, Number(s[field] ?? 0)]);
  counter('bulwark_cache_gets_total', 'Gets of the group.', per('gets'));
  counter('bulwark_cache_hits_total', 'Gets answered from the main or hot cache.', per('cacheHits'));
  counter('bulwark_cache_peer_loads_total', 'Values a peer answered.', per('peerLoads'));
  counter('bulwark_cache_peer_errors_total', 'Peer requests that failed.', per('peerErrors'));
  counter('bulwark_cache_local_loads_total', 'Getter (origin) calls on this node.', per('localLoads'));
  counter('bulwark_cache_local_load_errors_total', 'Getter calls that failed.', per('localLoadErrs'));
  counter('bulwark_cache_server_requests_total', 'Requests from peers served.', per('serverRequests'));
  counter('bulwark_cache_stale_answers_total', 'Answers given from a stale value because a load failed.', per('staleAnswers'));
  const o = status.origin;
  counter('bulwark_origin_requests_total', 'Requests sent to the origin.', [['', o.requests]]);
  counter('bulwark_origin_failures_total', 'Origin requests that failed (5xx, timeouts, connection errors).', [['', o.failures]]);
  counter('bulwark_origin_refused_total', 'Loads refused before reaching the origin.', [
    ['{by="breaker"}', o.breakerRejected], ['{by="limiter"}', o.rateLimited], ['{by="bulkhead"}', o.bulkheadRejected],
  ]);
  gauge('bulwark_origin_breaker_drop_ratio', 'The probability the origin breaker drops the next load.', [['', o.breaker.dropRatio]]);
  gauge('bulwark_ring_members', 'Nodes on the hash ring, this one included.', [['', status.membership.members.length]]);
  gauge('bulwark_node_ready', '1 when /readyz answers 200.', [['', status.node.ready ? 1 : 0]]);
  gauge('bulwark_http_inflight_requests', 'Requests being served.', [['', status.server.inflight]]);
  return `${out.join('\n')}\n`;
}
