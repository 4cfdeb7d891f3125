/**
 * Cache keys: non-empty, at most 1 KiB of UTF-8, well-formed Unicode (a lone surrogate cannot be
 * percent-encoded into a peer request, so it is refused everywhere alike).
 */
import { MAX_KEY_BYTES } from '../core/key-size.js';

/** MAX_KEY_BYTES is the largest key, in UTF-8 bytes. */
export { MAX_KEY_BYTES };

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** keyProblem says what is wrong with `key`, or answers undefined when it is a valid cache key. */
export function keyProblem(key: unknown): string | undefined {
  if (typeof key !== 'string') return `a key must be a string, got ${typeof key}`;
  if (key.length === 0) return 'a key must not be empty';
  if (key.length > MAX_KEY_BYTES) return `a key must be at most ${MAX_KEY_BYTES} bytes, got ${key.length}+`;
  // Each UTF-16 unit is at least one UTF-8 byte and at most three.
  if (key.length * 3 > MAX_KEY_BYTES) {
    const n = Buffer.byteLength(key, 'utf8');
    if (n > MAX_KEY_BYTES) return `a key must be at most ${MAX_KEY_BYTES} bytes of UTF-8, got ${n}`;
  }
  if (LONE_SURROGATE.test(key)) return 'a key must be well-formed Unicode (it has a lone surrogate)';
  return undefined;
}
