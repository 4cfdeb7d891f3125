import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { InvalidResponseError } from '../core/errors.js';
import { decodeGetResponse, decodePeerRequest, decodeRemoveResponse, encodeGetResponse, encodePeerRequest, encodeRemoveResponse } from './codec.js';

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

  it('round-trips GetRequest / RemoveRequest for any well-formed group and key', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), fc.string({ unit: 'grapheme', maxLength: 200 }), fc.constantFrom('normal' as const, 'local' as const, 'peek' as const), (group, key, mode) => {
        assert.deepEqual(decodePeerRequest(encodePeerRequest(group, key, mode)), { group, key, mode });
      }),
    );
  });

  it('encodes GetRequest with the field numbers of proto/cache.proto (group = 1, key = 2)', () => {
    assert.deepEqual([...encodePeerRequest('g', 'k')], [0x0a, 1, 0x67, 0x12, 1, 0x6b]);
    assert.deepEqual(decodePeerRequest(new Uint8Array()), { group: '', key: '', mode: 'normal' });
    // mode = 3 (varint), omitted when normal; an unknown mode is refused.
    assert.deepEqual([...encodePeerRequest('g', 'k', 'peek')], [0x0a, 1, 0x67, 0x12, 1, 0x6b, 0x18, 2]);
    assert.throws(() => decodePeerRequest(new Uint8Array([0x18, 7])), InvalidResponseError);
  });

  it('encodes not_held as field 5 and reads it back', () => {
    const bytes = encodeGetResponse({ value: '', ttlMs: 0, notFound: false, notHeld: true });
    assert.deepEqual([...bytes], [0x28, 1]);
    assert.equal(decodeGetResponse(bytes, 10).notHeld, true);
  });

  it('refuses a request whose strings are not UTF-8 or whose fields have the wrong wire type', () => {
    assert.throws(() => decodePeerRequest(new Uint8Array([0x12, 2, 0xc3, 0x28])), InvalidResponseError);
    assert.throws(() => decodePeerRequest(new Uint8Array([0x10, 1])), InvalidResponseError);
    assert.throws(() => decodePeerRequest(new Uint8Array([0x12, 9, 0x41])), InvalidResponseError);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        try {
          decodePeerRequest(bytes);
        } catch (err) {
          assert.ok(err instanceof InvalidResponseError, String(err));
        }
      }),
      { numRuns: 2000 },
    );
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
