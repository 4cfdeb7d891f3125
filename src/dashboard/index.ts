/**
 * bulwark/dashboard: a live dashboard of bulwark's components, shipped in the package (one page, no
 * CDN, no build step): `dashboardHandler(metrics, { path })` for node:http and Express,
 * `fastifyDashboard` for Fastify. Once per tick, whatever the number of viewers, it takes the status
 * snapshot of a BulwarkMetrics, computes calls/s, errors/s and p50/p99 (from the duration histograms'
 * buckets over the last minute) and keeps a few minutes of history; the page follows it over
 * server-sent events, and `<path>/status.json` answers the same frame for pull. A FleetFeed follows
 * every instance of a registry that announces its dashboard path (`bulwark dashboard`). See docs/dashboard.md.
 */
export { dashboardHandler, fastifyDashboard, dashboardDefaults } from './handler.js';
export type { DashboardHandler, DashboardOptions, FastifyDashboardHost, FastifyDashboardReply } from './handler.js';
export { ProcessFeed, processFeedDefaults } from './process-feed.js';
export type { FeedSource } from './process-feed.js';
export { FleetFeed, fleetFeedDefaults, STATUS_PATH_KEY } from './fleet-feed.js';
export type { FleetFeedOptions } from './fleet-feed.js';
export type { DashboardAction, DashboardActions } from './actions.js';
export type { DashboardControls } from './controls.js';
export type { Rule, RuleKind, RuleStore } from '../rules/types.js';
export type { Registry, ServiceInstance } from '../registry/types.js';
export type { Feed, FleetFrame, FleetInstance, InstanceState, Point, PointValues, ProcessFeedOptions, ProcessFrame } from './types.js';
export type { ComponentSnapshot, HistogramTotals, MetricsSnapshot } from '../metrics/types.js';
