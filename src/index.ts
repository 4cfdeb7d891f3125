/**
 * bulwark: service governance for Node.js microservices. The root re-exports the core (clock, errors,
 * events, singleflight, …); each module has its own subpath (`bulwark/breaker`, `bulwark/policy`, …).
 */
export * from './core/index.js';
