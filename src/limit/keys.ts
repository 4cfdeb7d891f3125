/** Key checks shared by the keyed limiters. */

/** MAX_KEY_BYTES is the longest key a limiter accepts: 1 KiB of UTF-8 (a key is memory we keep). */
export const MAX_KEY_BYTES = 1024;

/** checkKey throws TypeError unless `key` is a string of at most 1 KiB (UTF-8). */
export function checkKey(owner: string, key: unknown): string {
  if (typeof key !== 'string') throw new TypeError(`${owner}: key must be a string, got ${key === null ? 'null' : typeof key}`);
  // A UTF-16 unit is at most 3 UTF-8 bytes: only long keys need measuring.
  if (key.length > MAX_KEY_BYTES / 3 && (key.length > MAX_KEY_BYTES || Buffer.byteLength(key) > MAX_KEY_BYTES)) {
    throw new TypeError(`${owner}: key must be at most ${MAX_KEY_BYTES} bytes, got ${Buffer.byteLength(key)} bytes`);
  }
  return key;
}
