/** Key checks shared by the keyed limiters. */
import { MAX_KEY_BYTES } from '../core/key-size.js';

/** MAX_KEY_BYTES is the longest key a limiter accepts: 1 KiB of UTF-8 (a key is memory we keep). */
export { MAX_KEY_BYTES };

/** checkKey throws TypeError unless `key` is a string of at most 1 KiB (UTF-8). */
export function checkKey(owner: string, key: unknown): string {
  if (typeof key !== 'string') throw new TypeError(`${owner}: key must be a string, got ${key === null ? 'null' : typeof key}`);
  // A UTF-16 unit is at most 3 UTF-8 bytes: only long keys need measuring.
  if (key.length > MAX_KEY_BYTES / 3 && (key.length > MAX_KEY_BYTES || Buffer.byteLength(key) > MAX_KEY_BYTES)) {
    throw new TypeError(`${owner}: key must be at most ${MAX_KEY_BYTES} bytes, got ${Buffer.byteLength(key)} bytes`);
  }
  return key;
}

/**
 * checkPrefix throws TypeError unless `prefix` is a string of at most 256 bytes without `{` or `}`:
 * the braces are the limiters' own (they hash-tag each client key, see redisKey).
 */
export function checkPrefix(owner: string, prefix: unknown): string {
  if (typeof prefix !== 'string') throw new TypeError(`${owner}: prefix must be a string, got ${prefix === null ? 'null' : typeof prefix}`);
  if (Buffer.byteLength(prefix) > 256 || /[{}]/.test(prefix)) {
    throw new TypeError(`${owner}: prefix must be at most 256 bytes without { or }, got ${JSON.stringify(prefix.slice(0, 300))}`);
  }
  return prefix;
}

/**
 * redisKey is the Redis key of a client key: `prefix{key}`. The braces are a Cluster hash tag, so a
 * client key's Redis key lives on the master that owns the slot of the client key alone (keys spread
 * over the masters; a prefix never decides the slot). At most 256 + 2 + 1 024 bytes.
 */
export function redisKey(owner: string, prefix: string, key: string): string {
  return `${prefix}{${checkKey(owner, key)}}`;
}
