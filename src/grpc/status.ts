/**
 * Status codes and refusals: go-zero's failure codes, and the trailers a refusal carries — the
 * bulwark error code (`bulwark-code`), and for rate limits `google.rpc.RetryInfo` inside the standard
 * `grpc-status-details-bin` trailer plus a plain `retry-after-ms`.
 */
import { BinaryWriter } from '@bufbuild/protobuf/wire';
import { Metadata, status } from '@grpc/grpc-js';
import type { StatusObject } from '@grpc/grpc-js';

/**
 * The codes that count as a failure for a breaker, as go-zero's `codes.Acceptable` (zrpc
 * internal/codes/accept.go): DEADLINE_EXCEEDED, INTERNAL, UNAVAILABLE, DATA_LOSS, UNIMPLEMENTED,
 * RESOURCE_EXHAUSTED. Every other code (OK, NOT_FOUND, INVALID_ARGUMENT, …) says the server is fine.
 */
export const defaultFailureCodes: readonly number[] = Object.freeze([
  status.DEADLINE_EXCEEDED,
  status.INTERNAL,
  status.UNAVAILABLE,
  status.DATA_LOSS,
  status.UNIMPLEMENTED,
  status.RESOURCE_EXHAUSTED,
]);

/** The trailer naming the bulwark error code of a refusal. */
export const CODE_HEADER = 'bulwark-code';
/** The trailer giving a rate-limit refusal's retry delay in milliseconds. */
export const RETRY_AFTER_HEADER = 'retry-after-ms';

/** failureSet checks a failure-code option and answers a lookup table. */
export function failureSet(owner: string, codes: readonly number[] | undefined): (code: number) => boolean {
  const list = codes ?? defaultFailureCodes;
  if (!Array.isArray(list) || !list.every((c) => Number.isInteger(c) && c >= 0 && c <= 16)) {
    throw new TypeError(`${owner}: failureCodes must be an array of gRPC status codes (0–16), got ${JSON.stringify(codes)}`);
  }
  const table = new Array<boolean>(17).fill(false);
  for (const c of list) table[c] = true;
  return (code) => table[code] === true;
}

/** refusal builds the status of a call a guard refused: `details` starts with the bulwark code. */
export function refusal(code: number, bulwarkCode: string, message: string, retryAfterMs?: number): StatusObject {
  const metadata = new Metadata();
  metadata.set(CODE_HEADER, bulwarkCode);
  const details = `${bulwarkCode}: ${message}`;
  if (retryAfterMs !== undefined && Number.isFinite(retryAfterMs)) {
    const ms = Math.max(0, Math.ceil(retryAfterMs));
    metadata.set(RETRY_AFTER_HEADER, String(ms));
    metadata.set('grpc-status-details-bin', encodeRetryStatus(code, details, ms));
  }
  return { code, details, metadata };
}

const RETRY_INFO_TYPE = 'type.googleapis.com/google.rpc.RetryInfo';

/** encodeRetryStatus encodes `google.rpc.Status{code, message, details: [Any(RetryInfo{retry_delay})]}`. */
export function encodeRetryStatus(code: number, message: string, retryAfterMs: number): Buffer {
  const duration = new BinaryWriter()
    .tag(1, 0)
    .int64(Math.floor(retryAfterMs / 1000))
    .tag(2, 0)
    .int32((retryAfterMs % 1000) * 1_000_000)
    .finish();
  const retryInfo = new BinaryWriter().tag(1, 2).bytes(duration).finish();
  const any = new BinaryWriter().tag(1, 2).string(RETRY_INFO_TYPE).tag(2, 2).bytes(retryInfo).finish();
  const st = new BinaryWriter().tag(1, 0).int32(code).tag(2, 2).string(message).tag(3, 2).bytes(any).finish();
  return Buffer.from(st);
}
