/**
 * MAX_KEY_BYTES is the longest key bulwark keeps, in UTF-8 bytes: a cache key (cache/key.ts) and a
 * limiter's key (limit/keys.ts) alike, since a key is memory we hold for whoever chose it. One value,
 * so that a key one module takes is never one the other refuses. `bulwark/cache` and `bulwark/limit`
 * each re-export it.
 */
export const MAX_KEY_BYTES = 1024;
