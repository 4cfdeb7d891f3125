/** The caller id a process publishes under: host, pid and a random part, unique per process and store. */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';

/** newCallerId answers a fresh caller id, e.g. `web-1:4242:9f2c4e1a`. */
export function newCallerId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
}
