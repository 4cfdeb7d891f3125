import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import protobuf from 'protobufjs';
import { InvalidResponseError } from '../core/errors.js';
import {
  decodeGetResponse,
  decodePeerRequest,
  decodeRemoveResponse,
  encodeGetResponse,
  encodePeerRequest,
  encodeRemoveResponse,
  type PeerMode,
} from './codec.js';

/** protoFile finds proto/cache.proto above this file (the tests also run from a compiled copy under .tmp/). */
function protoFile(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const file = join(dir, 'proto', 'cache.proto');
    if (existsSync(file)) return file;
    if (dirname(dir) === dir) throw new Error('proto/cache.proto not found above the test');
  }
}

/** The messages as protobufjs reads them from proto/cache.proto: the codec is checked against the schema, not against numbers copied from it. */
const proto = protobuf.loadSync(protoFile());
const GetRequest = proto.lookupType('bulwark.cache.v1.GetRequest');
const GetResponse = proto.lookupType('bulwark.cache.v1.GetResponse');
const RemoveRequest = proto.lookupType('bulwark.cache.v1.RemoveRequest');
const RemoveResponse = proto.lookupType('bulwark.cache.v1.RemoveResponse');
const asPlain = { longs: Number, enums: String, bytes: Buffer, defaults: true } as const;
const MODES: Record<PeerMode, string> = { normal: 'NORMAL', local: 'LOCAL', peek: 'PEEK' };

describe('peer protocol codec against proto/cache.proto (protobufjs)', () => {
  it('GetRequest fields in any order, repeated, ASCII or not, short or long: read as the schema reads them', () => {
    const field = fc.oneof(
      fc.record({
        no: fc.constantFrom(1, 2),
        text: fc.oneof(fc.string({ unit: 'binary-ascii', maxLength: 1100 }), fc.string({ unit: 'grapheme', maxLength: 40 })),
      }),
      fc.record({ no: fc.constant(3), mode: fc.integer({ min: 0, max: 2 }) }),
    );
    fc.assert(
      fc.property(fc.array(field, { maxLength: 6 }), (fields) => {
        const parts: number[] = [];
        const varint = (v: number) => {
          for (; v >= 0x80; v >>>= 7) parts.push((v & 0x7f) | 0x80);
          parts.push(v);
        };
        for (const f of fields) {
          if ('mode' in f) parts.push(0x18, f.mode);
          else {
            const bytes = Buffer.from(f.text, 'utf8');
            parts.push((f.no << 3) | 2);
            varint(bytes.length);
            parts.push(...bytes);
          }
        }
        const bytes = Uint8Array.from(parts);
        const theirs = GetRequest.toObject(GetRequest.decode(bytes), asPlain) as { group: string; key: string; mode: string };
        const mode = (Object.keys(MODES) as PeerMode[]).find((m) => MODES[m] === theirs.mode)!;
        assert.deepEqual(decodePeerRequest(bytes), { group: theirs.group, key: theirs.key, mode });
      }),
    );
  });

  it('GetRequest and RemoveRequest: what the codec writes, the schema reads, and back', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme', maxLength: 40 }),
        fc.string({ unit: 'grapheme', maxLength: 200 }),
        fc.constantFrom<PeerMode>('normal', 'local', 'peek'),
        (group, key, mode) => {
          const ours = encodePeerRequest(group, key, mode);
          assert.deepEqual(GetRequest.toObject(GetRequest.decode(ours), asPlain), { group, key, mode: MODES[mode] });
          const theirs = GetRequest.encode(GetRequest.fromObject({ group, key, mode: MODES[mode] })).finish();
          assert.deepEqual(decodePeerRequest(theirs), { group, key, mode });
          const remove = RemoveRequest.encode(RemoveRequest.fromObject({ group, key })).finish();
          assert.deepEqual(decodePeerRequest(remove), { group, key, mode: 'normal' });
          if (mode === 'normal') assert.deepEqual(RemoveRequest.toObject(RemoveRequest.decode(ours), asPlain), { group, key });
        },
      ),
    );
  });

  it('GetResponse: value, ttl_ms, not_found and not_held both ways; minute_qps (ours never sends it) is skipped', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 300 }),
        fc.nat(),
        fc.boolean(),
        fc.boolean(),
        fc.double({ noNaN: true }),
        (bytes, ttlMs, notFound, notHeld, qps) => {
          const value = Buffer.from(bytes).toString('latin1');
          const read = GetResponse.toObject(GetResponse.decode(encodeGetResponse({ value, ttlMs, notFound, notHeld })), asPlain);
          assert.deepEqual(read, { value: Buffer.from(bytes), minuteQps: 0, ttlMs, notFound, notHeld });
          const theirs = GetResponse.encode(GetResponse.fromObject({ value: bytes, minuteQps: qps, ttlMs, notFound, notHeld })).finish();
          const decoded = decodeGetResponse(theirs, 1000);
          assert.deepEqual([decoded.value, decoded.ttlMs, decoded.notFound, decoded.notHeld === true], [value, ttlMs, notFound, notHeld]);
        },
      ),
    );
  });

  it('RemoveResponse both ways', () => {
    for (const removed of [true, false]) {
      assert.equal(RemoveResponse.toObject(RemoveResponse.decode(encodeRemoveResponse(removed)), asPlain).removed, removed);
      assert.equal(decodeRemoveResponse(RemoveResponse.encode(RemoveResponse.fromObject({ removed })).finish()), removed);
    }
  });
});

describe('peer protocol codec', () => {
  it('round-trips GetResponse for any value, TTL and not-found flag', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.nat(), fc.boolean(), (bytes, ttlMs, notFound) => {
        const value = Buffer.from(bytes).toString('latin1');
        assert.deepEqual(decodeGetResponse(encodeGetResponse({ value, ttlMs, notFound }), 1000), { value, ttlMs, notFound });
      }),
    );
  });

  it('round-trips GetRequest / RemoveRequest for any well-formed group and key', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme', maxLength: 40 }),
        fc.string({ unit: 'grapheme', maxLength: 200 }),
        fc.constantFrom('normal' as const, 'local' as const, 'peek' as const),
        (group, key, mode) => {
          assert.deepEqual(decodePeerRequest(encodePeerRequest(group, key, mode)), { group, key, mode });
        },
      ),
    );
  });

  it('reads an empty message as the defaults, and refuses a mode the schema does not have', () => {
    assert.deepEqual(decodePeerRequest(new Uint8Array()), { group: '', key: '', mode: 'normal' });
    assert.equal(decodeRemoveResponse(new Uint8Array()), false);
    const unknownMode = GetRequest.encode({ group: 'g', key: 'k', mode: 7 }).finish();
    assert.throws(() => decodePeerRequest(unknownMode), InvalidResponseError);
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
