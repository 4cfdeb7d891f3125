/**
 * The peer protocol's protobuf messages (proto/cache.proto), encoded and decoded by hand with
 * `@bufbuild/protobuf`'s wire API. The generator (protoc-gen-es) needs Node 22; four small messages
 * do not need it. Decoding is strict about types, UTF-8 and size: anything else is
 * `InvalidResponseError`. Unknown fields are skipped, as protobuf requires. The field numbers written
 * here are checked against the schema itself: codec.test.ts reads proto/cache.proto with protobufjs
 * and decodes what this writes (and the reverse), so the two cannot drift apart.
 */
import { BinaryReader, BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { InvalidResponseError } from '../core/errors.js';

/**
 * PeerMode says how far a peer may go to answer a GetRequest (proto `GetRequest.mode`): `normal` (its
 * caches, a co-owner, or its getter), `local` (its caches or its getter, never another node), `peek`
 * (its caches only: a miss is answered `notHeld`).
 */
export type PeerMode = 'normal' | 'local' | 'peek';

const MODES: readonly PeerMode[] = ['normal', 'local', 'peek'];

/** PeerRequest mirrors proto `bulwark.cache.v1.GetRequest` and `RemoveRequest` (the same fields; `mode` is GetRequest's). */
export interface PeerRequest {
  group: string;
  key: string;
  mode: PeerMode;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** encodePeerRequest writes a GetRequest or RemoveRequest: `group` = 1, `key` = 2, `mode` = 3 (omitted when normal). */
export function encodePeerRequest(group: string, key: string, mode: PeerMode = 'normal'): Uint8Array {
  const w = new BinaryWriter();
  if (group.length > 0) w.tag(1, WireType.LengthDelimited).string(group);
  if (key.length > 0) w.tag(2, WireType.LengthDelimited).string(key);
  if (mode !== 'normal') w.tag(3, WireType.Varint).uint32(MODES.indexOf(mode));
  return w.finish();
}

/** decodePeerRequest reads a GetRequest or RemoveRequest; a string that is not valid UTF-8 is refused. */
export function decodePeerRequest(bytes: Uint8Array): PeerRequest {
  return decodeAsciiPeerRequest(bytes) ?? decodePeerRequestFields(bytes);
}

/**
 * decodeAsciiPeerRequest reads the request every peer sends — ASCII group and key (field 1, 2; lengths
 * under 16 KiB) and a mode (field 3) — without a BinaryReader, its tag arrays and two TextDecoder calls
 * (a third of the peer handler's decoding time); anything else answers undefined, for the full decoder.
 */
function decodeAsciiPeerRequest(bytes: Uint8Array): PeerRequest | undefined {
  let group = '';
  let key = '';
  let mode: PeerMode = 'normal';
  const len = bytes.length;
  let at = 0;
  while (at < len) {
    const tag = bytes[at++]!;
    if (tag === ((3 << 3) | WireType.Varint)) {
      const m = at < len ? MODES[bytes[at++]!] : undefined;
      if (m === undefined) return undefined;
      mode = m;
      continue;
    }
    if (tag !== ((1 << 3) | WireType.LengthDelimited) && tag !== ((2 << 3) | WireType.LengthDelimited)) return undefined;
    if (at >= len) return undefined;
    let n = bytes[at++]!;
    if (n >= 0x80) {
      if (at >= len || bytes[at]! >= 0x80) return undefined;
      n = (n & 0x7f) | (bytes[at++]! << 7);
    }
    const end = at + n;
    if (end > len) return undefined;
    let text = '';
    for (let i = at; i < end; i++) {
      const c = bytes[i]!;
      if (c >= 0x80) return undefined;
      text += String.fromCharCode(c);
    }
    at = end;
    if (tag === ((1 << 3) | WireType.LengthDelimited)) group = text;
    else key = text;
  }
  return { group, key, mode };
}

function decodePeerRequestFields(bytes: Uint8Array): PeerRequest {
  const msg: PeerRequest = { group: '', key: '', mode: 'normal' };
  read(bytes, (r, field, type) => {
    if (field === 1 && type === WireType.LengthDelimited) msg.group = utf8.decode(r.bytes());
    else if (field === 2 && type === WireType.LengthDelimited) msg.key = utf8.decode(r.bytes());
    else if (field === 3 && type === WireType.Varint) {
      const m = MODES[r.uint32()];
      if (m === undefined) throw new InvalidResponseError('unknown GetRequest mode');
      msg.mode = m;
    } else if (field === 1 || field === 2 || field === 3) throw new InvalidResponseError(`field ${field} has wire type ${type}, want length-delimited`);
    else return false;
    return true;
  });
  return msg;
}

/** GetResponse mirrors proto `bulwark.cache.v1.GetResponse`; `value` is a binary (latin1) string. */
export interface GetResponse {
  value: string;
  ttlMs: number;
  notFound: boolean;
  /** The answer to a `peek` the peer's caches could not answer (no value, no not-found). */
  notHeld?: boolean;
}

/**
 * encodeGetResponse writes a GetResponse, framed by hand into one output buffer: BinaryWriter would
 * grow its buffer and copy a large value three times, and its int64 path for `ttl_ms` alone cost more
 * than the rest of the encoding (both showed in the peer handler's profile). The bytes are the ones
 * BinaryWriter writes (value = 1, ttl_ms = 3, not_found = 4, not_held = 5, in that order).
 */
export function encodeGetResponse(msg: GetResponse): Uint8Array {
  const n = msg.value.length;
  const ttl = msg.ttlMs > 0 ? Math.ceil(msg.ttlMs) : 0;
  if (!(ttl < 2 ** 63)) throw new RangeError(`encodeGetResponse: ttlMs must be below 2^63, got ${msg.ttlMs}`);
  const notFound = msg.notFound;
  const notHeld = msg.notHeld === true;
  const size = (n === 0 ? 0 : 1 + varintSize(n) + n) + (ttl === 0 ? 0 : 1 + varintSize(ttl)) + (notFound ? 2 : 0) + (notHeld ? 2 : 0);
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  if (n > 0) {
    out[at++] = (1 << 3) | WireType.LengthDelimited;
    at = writeVarint(out, at, n);
    out.write(msg.value, at, n, 'latin1');
    at += n;
  }
  if (ttl !== 0) {
    out[at++] = (3 << 3) | WireType.Varint;
    at = writeVarint(out, at, ttl);
  }
  if (notFound) {
    out[at++] = (4 << 3) | WireType.Varint;
    out[at++] = 1;
  }
  if (notHeld) {
    out[at++] = (5 << 3) | WireType.Varint;
    out[at++] = 1;
  }
  return out;
}

/** varintSize is the length of `v`'s varint (v a non-negative integer, up to 2^64). */
function varintSize(v: number): number {
  let size = 1;
  while (v >= 0x80) {
    v = Math.floor(v / 0x80);
    size++;
  }
  return size;
}

/** writeVarint writes `v` (a non-negative integer) as a varint at `at` and answers the position after it. */
function writeVarint(out: Uint8Array, at: number, v: number): number {
  while (v >= 0x80) {
    out[at++] = (v % 0x80) | 0x80;
    v = Math.floor(v / 0x80);
  }
  out[at++] = v;
  return at;
}

/** decodeGetResponse reads a GetResponse; `maxValueBytes` bounds the value. */
export function decodeGetResponse(bytes: Uint8Array, maxValueBytes: number): GetResponse {
  const msg: GetResponse = { value: '', ttlMs: 0, notFound: false };
  read(bytes, (r, field, type) => {
    if (field === 1 && type === WireType.LengthDelimited) {
      const v = r.bytes();
      if (v.length > maxValueBytes) throw new InvalidResponseError(`peer value of ${v.length} bytes exceeds ${maxValueBytes}`);
      msg.value = Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('latin1');
    } else if (field === 2 && type === WireType.Bit64) r.double();
    else if (field === 3 && type === WireType.Varint) {
      const t = Number(r.int64());
      if (!Number.isSafeInteger(t) || t < 0) throw new InvalidResponseError(`peer ttl_ms ${t} is out of range`);
      msg.ttlMs = t;
    } else if (field === 4 && type === WireType.Varint) msg.notFound = r.bool();
    else if (field === 5 && type === WireType.Varint) msg.notHeld = r.bool();
    else return false;
    return true;
  });
  return msg;
}

/** encodeRemoveResponse writes a RemoveResponse. */
export function encodeRemoveResponse(removed: boolean): Uint8Array {
  const w = new BinaryWriter();
  if (removed) w.tag(1, WireType.Varint).bool(true);
  return w.finish();
}

/** decodeRemoveResponse reads a RemoveResponse and answers its `removed`. */
export function decodeRemoveResponse(bytes: Uint8Array): boolean {
  let removed = false;
  read(bytes, (r, field, type) => {
    if (field === 1 && type === WireType.Varint) removed = r.bool();
    else return false;
    return true;
  });
  return removed;
}

/** read walks the fields of one message; `field` answers false for fields it does not know (skipped). */
function read(bytes: Uint8Array, field: (r: BinaryReader, no: number, type: WireType) => boolean): void {
  try {
    const r = new BinaryReader(bytes);
    while (r.pos < r.len) {
      const [no, type] = r.tag();
      if (no <= 0) throw new InvalidResponseError(`bad protobuf field number ${no}`);
      if (!field(r, no, type)) r.skip(type, no);
    }
    if (r.pos !== r.len) throw new InvalidResponseError('protobuf message overruns its buffer');
  } catch (err) {
    if (err instanceof InvalidResponseError) throw err;
    throw new InvalidResponseError('malformed protobuf message', { cause: err });
  }
}
