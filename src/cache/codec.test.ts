import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { InvalidResponseError } from '../core/errors.js';
import { decodeGetResponse, decodeRemoveResponse, encodeGetResponse, encodeRemoveResponse } from './codec.js';

describe('peer protocol codec', () => {
  it('round-trips GetResponse for any value, TTL and not-found flag', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.nat(), fc.boolean(), (bytes, ttlMs, notFound) => {
        const value = Buffer.from(bytes).toString('latin1');
        assert.deepEqual(decodeGetResponse(encodeGetResponse({ value, ttlMs, notFound }), 1000), { value, ttlMs, notFound });
      }),
    );
  });

  it('encodes the field numbers of proto/cache.proto (value = 1, ttl_ms = 3, not_found = 4)', () => {
    assert.deepEqual([...encodeGetResponse({ value: 'A', ttlMs: 5, notFound: true })], [0x0a, 1, 0x41, 0x18, 5, 0x20, 1]);
    assert.deepEqual([...encodeRemoveResponse(true)], [0x08, 1]);
    assert.equal(decodeRemoveResponse(new Uint8Array()), false);
  });

  it('skips unknown fields, as protobuf requires', () => {
    // field 9 (varint 7), field 2 minute_qps (double), then value "B"
    const bytes = new Uint8Array([0x48, 7, 0x11, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x0a, 1, 0x42]);
    assert.equal(decodeGetResponse(bytes, 10).value, 'B');
  });

  it('rejects malformed or oversized messages with InvalidResponseError, never anything else', () => {
    assert.throws(() => decodeGetResponse(new Uint8Array([0x0a, 5, 1]), 10), InvalidResponseError);
    assert.throws(() => decodeGetResponse(new Uint8Array([0x0a, 3, 1, 2, 3]), 2), InvalidResponseError);
    assert.throws(() => decodeGetResponse(new Uint8Array([0x00]), 10), InvalidResponseError);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        try {
          decodeGetResponse(bytes, 16);
          decodeRemoveResponse(bytes);
        } catch (err) {
          assert.ok(err instanceof InvalidResponseError, String(err));
        }
      }),
      { numRuns: 2000 },
    );
  });
});
