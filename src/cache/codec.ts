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
 * encodeGetResponse writes a GetResponse. The small fields go through BinaryWriter; the value (field 1)
 * is framed by hand straight into the one output buffer, since BinaryWriter would grow its buffer and
 * copy a large value three times (that showed in the peer handler's profile).
 */
export function encodeGetResponse(msg: GetResponse): Uint8Array {
  const w = new BinaryWriter();
  if (msg.ttlMs > 0) w.tag(3, WireType.Varint).int64(Math.ceil(msg.ttlMs));
  if (msg.notFound) w.tag(4, WireType.Varint).bool(true);
  if (msg.notHeld === true) w.tag(5, WireType.Varint).bool(true);
  const small = w.finish();
  const n = msg.value.length;
  if (n === 0) return small;
  let header = 2; // the tag byte (field 1, length-delimited) and the length's last varint byte
  for (let v = n; v >= 0x80; v >>>= 7) header++;
  const out = Buffer.allocUnsafe(header + n + small.length);
  out[0] = (1 << 3) | WireType.LengthDelimited;
  let at = 1;
  let v = n;
  while (v >= 0x80) {
    out[at++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  out[at++] = v;
  out.write(msg.value, at, n, 'latin1');
  out.set(small, at + n);
  return out;
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
