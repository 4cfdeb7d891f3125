/**
 * bulwark: service governance for Node.js microservices. The root re-exports the modules that need no
 * server client (core, breaker, policy); the others have their own subpaths so that importing a breaker
 * never loads etcd3, ioredis or undici: `bulwark/registry`, `bulwark/balancer`, `bulwark/client`,
 * `bulwark/limit`, `bulwark/http`, `bulwark/cache`, `bulwark/metrics` (prom-client).
 */
export * from './core/index.js';
export * from './breaker/index.js';
export * from './policy/index.js';
