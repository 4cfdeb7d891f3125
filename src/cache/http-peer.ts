/**
 * HttpPeer is the client side of the peer protocol: the undici keep-alive `Pool` of one peer (from the
 * pool's per-origin map), a deadline per request, a protobuf request body (`POST {basePath}` GetRequest, `DELETE
 * {basePath}` RemoveRequest), signed requests when a secret is set, and bounded, checked answers.
 */
import type { Clock } from '../core/clock.js';
import { AbortedError, PeerError } from '../core/errors.js';
import type { OriginPools } from '../internal/origin-pools.js';
import { decodeGetResponse, decodeRemoveResponse, encodePeerRequest, type GetResponse } from './codec.js';
import type { PeerGetter } from './peers.js';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, sign } from './signing.js';

/** HttpPeerConfig is what an HttpPeer shares with its pool. */
export interface HttpPeerConfig {
  readonly basePath: string;
  readonly secret: string | Uint8Array | undefined;
  readonly maxValueBytes: number;
  /** Wall time for request signatures. */
  readonly clock: Clock;
  /** The per-origin keep-alive pools, one per peer. */
  readonly pools: OriginPools;
}

/** Room for the protobuf framing around a value. */
const FRAMING_BYTES = 64;
/** The most of an error body we read (it is a short text reason). */
const MAX_ERROR_BODY = 4_096;

const PROTOBUF_HEADERS: Record<string, string> = Object.freeze({ 'content-type': 'application/x-protobuf' }) as Record<string, string>;

type Body = AsyncIterable<Buffer | Uint8Array> & { destroy?: (err?: Error) => void; dump?: () => Promise<void> };

/** HttpPeer fetches from one peer over HTTP. */
export class HttpPeer implements PeerGetter {
  readonly url: string;

  constructor(url: string, private readonly config: HttpPeerConfig) {
    this.url = url;
  }

  /** get fetches `key` of `group`; rejects PeerError (status when the peer answered) or AbortedError. */
  async get(group: string, key: string, signal?: AbortSignal): Promise<GetResponse> {
    const body = await this.request('POST', group, key, signal, this.config.maxValueBytes + FRAMING_BYTES);
    try {
      return decodeGetResponse(body, this.config.maxValueBytes);
    } catch (err) {
      throw new PeerError(`peer ${this.url} sent a malformed answer`, { cause: err });
    }
  }

  /** remove deletes `key` of `group` at the peer; answers whether the peer held it. */
  async remove(group: string, key: string, signal?: AbortSignal): Promise<boolean> {
    const body = await this.request('DELETE', group, key, signal, FRAMING_BYTES);
    try {
      return decodeRemoveResponse(body);
    } catch (err) {
      throw new PeerError(`peer ${this.url} sent a malformed answer`, { cause: err });
    }
  }

  /** close ends the keep-alive connections to this peer (requests in flight may finish). */
  close(): Promise<void> {
    return this.config.pools.delete(this.url);
  }

  private async request(method: 'POST' | 'DELETE', group: string, key: string, signal: AbortSignal | undefined, maxBytes: number): Promise<Uint8Array> {
    const path = this.config.basePath;
    const body = encodePeerRequest(group, key);
    let headers: Record<string, string> = PROTOBUF_HEADERS;
    if (this.config.secret !== undefined) {
      const ts = String(Math.floor(this.config.clock.now()));
      headers = { ...PROTOBUF_HEADERS, [TIMESTAMP_HEADER]: ts, [SIGNATURE_HEADER]: sign(this.config.secret, method, path, ts, body) };
    }
    let res;
    try {
      res = await this.config.pools.get(this.url).request({ path, method, headers, body, signal });
    } catch (err) {
      if (signal?.aborted) throw new AbortedError('peer request aborted', { cause: signal.reason });
      throw new PeerError(`peer ${this.url} unreachable: ${(err as Error)?.message ?? String(err)}`, { cause: err });
    }
    const status = res.statusCode;
    const limit = status === 200 ? maxBytes : MAX_ERROR_BODY;
    let bytes: Uint8Array;
    try {
      bytes = await readBounded(res.body as Body, limit, res.headers['content-length']);
    } catch (err) {
      if (signal?.aborted) throw new AbortedError('peer request aborted', { cause: signal.reason });
      throw new PeerError(`peer ${this.url}: ${(err as Error)?.message ?? String(err)}`, { cause: err, status });
    }
    if (status !== 200) {
      const text = Buffer.from(bytes).toString('utf8').slice(0, 512);
      throw new PeerError(`peer ${this.url} answered ${status}: ${text}`, { status });
    }
    return bytes;
  }
}

/** readBounded reads a body of at most `limit` bytes; a longer one is cut off with an error. */
async function readBounded(body: Body, limit: number, contentLength: string | string[] | undefined): Promise<Uint8Array> {
  if (typeof contentLength === 'string' && Number(contentLength) > limit) {
    body.destroy?.();
    throw new Error(`answer of ${contentLength} bytes exceeds ${limit}`);
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of body) {
    total += chunk.byteLength;
    if (total > limit) {
      body.destroy?.();
      throw new Error(`answer exceeds ${limit} bytes`);
    }
    chunks.push(chunk);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
}
