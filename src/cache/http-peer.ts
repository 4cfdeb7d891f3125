/**
 * HttpPeer is the client side of the peer protocol: the undici keep-alive `Pool` of one peer (from the
 * pool's per-origin map), a deadline per request, and bounded, checked answers. Two protocols:
 *
 * - `bulwark`: a protobuf request body (`POST {basePath}` GetRequest, `DELETE {basePath}` RemoveRequest),
 *   signed when a secret is set.
 * - `groupcache` (golang/groupcache's `httpGetter`): `GET {basePath}{group}/{key}`, both escaped as Go's
 *   `url.QueryEscape` does except that a space is `%20` rather than `+` (Go's server only
 *   percent-decodes the path, so a `+` would reach its getter as a `+`); the value is GetResponse field 1.
 *   A non-200 answer is a failure (the Group then loads locally), except bulwark's "not found", which a
 *   bulwark node marks with the `x-bulwark-not-found` header. Removal goes only to peers that answer as
 *   bulwark nodes: a Go peer answers `DELETE {basePath}` with 400 (its "bad request" for a path without
 *   a key, which loads nothing), and is skipped from then on.
 *
 * A peer that could not be reached (connection refused, reset, timed out) counts as unhealthy for
 * `PEER_DOWN_MS`: a Group then loads the keys it owns locally rather than wait on it (and replicated
 * ownership asks another owner). Once that time is up, one request tries it again while `healthy()`
 * stays false for the others; its answer (or its failure) decides. Across a partition — packets
 * dropped, not refused — a request to the peer can only time out, so without this every key it owns
 * would wait the whole peer deadline (test/serve-partition.test.ts: 16 of 41 requests on the cut-off
 * node over 200 ms, now none but one trial per peer and PEER_DOWN_MS).
 *
 * The deadline is a timer on the pool's clock that aborts the request and rejects at once: undici's
 * own connect, header and body timeouts (kept as a backstop) tick at 500 ms to 1 s, and undici does not
 * reject an aborted request while its connection is still being made (a SYN that is never answered),
 * so a 1 s deadline fired after up to 1.5 s. After a stall of this process the deadline waits one
 * more timer turn (core DeadlineTimer), so that a peer that answered in time is not marked down.
 */
import type { Clock } from '../core/clock.js';
import { AbortedError, PeerError, TimeoutError } from '../core/errors.js';
import { DeadlineTimer } from '../core/deadline-timer.js';
import { readCappedBody } from '../internal/capped-body.js';
import type { OriginPools } from '../internal/origin-pools.js';
import { decodeGetResponse, decodeRemoveResponse, encodePeerRequest, type GetResponse, type PeerMode } from './codec.js';
import type { PeerGetter } from './peers.js';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, sign } from './signing.js';

/** NOT_FOUND_HEADER marks a groupcache-protocol 404 as bulwark's "not found"; its value is the miss's TTL in ms. */
export const NOT_FOUND_HEADER = 'x-bulwark-not-found';
/** NODE_HEADER marks every answer of a bulwark node in groupcache mode (Go's answers lack it). */
export const NODE_HEADER = 'x-bulwark-node';

/** HttpPeerConfig is what an HttpPeer shares with its pool. */
export interface HttpPeerConfig {
  readonly protocol: 'bulwark' | 'groupcache';
  readonly basePath: string;
  readonly secret: string | Uint8Array | undefined;
  readonly maxValueBytes: number;
  /** Wall time for request signatures and peer health. */
  readonly clock: Clock;
  /** The per-origin keep-alive pools, one per peer. */
  readonly pools: OriginPools;
  /** The deadline of a get from `group`, in ms (at least as long as the owner's load may take). */
  readonly timeoutFor: (group: string) => number;
  /** The deadline of a remove, in ms. */
  readonly removeTimeoutMs: number;
}

/** Room for the protobuf framing around a value. */
const FRAMING_BYTES = 64;
/** The most of an error body we read (it is a short text reason). */
const MAX_ERROR_BODY = 4_096;
/** How long a peer that could not be reached counts as unhealthy: long enough to skip it for a burst, short enough to retry soon. */
export const PEER_DOWN_MS = 1_000;

const PROTOBUF_HEADERS: Record<string, string> = Object.freeze({ 'content-type': 'application/x-protobuf' }) as Record<string, string>;

/** HttpPeer fetches from one peer over HTTP. */
export class HttpPeer implements PeerGetter {
  /** The peer as named on the ring (in groupcache mode exactly as given). */
  readonly url: string;
  private readonly origin: string;
  private downUntil = 0;
  /** Requests in flight while the peer counts as down (after PEER_DOWN_MS: the one that tries it again). */
  private trials = 0;
  /** Learned from an answer: the peer is a Go groupcache node (it takes no removal). */
  private goPeer = false;

  constructor(
    url: string,
    private readonly config: HttpPeerConfig,
    origin = url,
  ) {
    this.url = url;
    this.origin = origin;
  }

  /**
   * healthy tells whether the peer answered its last request — or has been down for PEER_DOWN_MS and no
   * request is trying it yet (the next one does).
   */
  healthy(): boolean {
    return this.downUntil === 0 || (this.trials === 0 && this.config.clock.now() >= this.downUntil);
  }

  /**
   * get fetches `key` of `group` (`mode` says how far the peer may go; see PeerMode); rejects
   * PeerError (status when the peer answered) or AbortedError.
   */
  async get(group: string, key: string, signal?: AbortSignal, mode: PeerMode = 'normal'): Promise<GetResponse> {
    const timeoutMs = this.config.timeoutFor(group);
    const limit = this.config.maxValueBytes + FRAMING_BYTES;
    const { status, bytes, headers } =
      this.config.protocol === 'groupcache'
        ? await this.request('GET', `${this.config.basePath}${queryEscape(group)}/${queryEscape(key)}`, undefined, signal, limit, timeoutMs)
        : await this.request('POST', this.config.basePath, encodePeerRequest(group, key, mode), signal, limit, timeoutMs);
    if (status !== 200) {
      const ttl = headers[NOT_FOUND_HEADER];
      if (status === 404 && typeof ttl === 'string' && /^\d{1,15}$/.test(ttl)) return { value: '', ttlMs: Number(ttl), notFound: true };
      throw failure(this.url, status, bytes);
    }
    try {
      return decodeGetResponse(bytes, this.config.maxValueBytes);
    } catch (err) {
      throw new PeerError(`peer ${this.url} sent a malformed answer`, { cause: err });
    }
  }

  /** remove deletes `key` of `group` at the peer; answers whether the peer held it (false for a Go peer, which takes no removal). */
  async remove(group: string, key: string, signal?: AbortSignal): Promise<boolean> {
    if (this.goPeer) return false;
    const { status, bytes, headers } = await this.request(
      'DELETE',
      this.config.basePath,
      encodePeerRequest(group, key),
      signal,
      FRAMING_BYTES,
      this.config.removeTimeoutMs,
    );
    if (this.config.protocol === 'groupcache' && status === 400 && headers[NODE_HEADER] === undefined) {
      this.goPeer = true;
      return false;
    }
    if (status !== 200) throw failure(this.url, status, bytes);
    try {
      return decodeRemoveResponse(bytes);
    } catch (err) {
      throw new PeerError(`peer ${this.url} sent a malformed answer`, { cause: err });
    }
  }

  /** close ends the keep-alive connections to this peer (requests in flight may finish). */
  close(): Promise<void> {
    return this.config.pools.delete(this.origin);
  }

  private async request(
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    body: Uint8Array | undefined,
    signal: AbortSignal | undefined,
    maxBytes: number,
    timeoutMs: number,
  ): Promise<{ status: number; bytes: Uint8Array; headers: Record<string, string | string[] | undefined> }> {
    let headers: Record<string, string> | undefined = body === undefined ? undefined : PROTOBUF_HEADERS;
    if (this.config.secret !== undefined && body !== undefined) {
      const ts = String(Math.floor(this.config.clock.now()));
      headers = { ...PROTOBUF_HEADERS, [TIMESTAMP_HEADER]: ts, [SIGNATURE_HEADER]: sign(this.config.secret, method, path, ts, body) };
    }
    const trial = this.downUntil !== 0;
    if (trial) this.trials++;
    const deadline = new AbortController();
    // A DeadlineTimer: after a stall of this process, an answer that came meanwhile is read before it fires.
    const timer = new DeadlineTimer(this.config.clock, timeoutMs, () =>
      deadline.abort(new TimeoutError(`peer ${this.url} did not answer within ${timeoutMs} ms`)),
    ).unref();
    const both = signal === undefined ? deadline.signal : AbortSignal.any([signal, deadline.signal]);
    try {
      let res;
      try {
        res = await untilAborted(
          this.config.pools.get(this.origin).request({ path, method, headers, body, signal: both, headersTimeout: timeoutMs, bodyTimeout: timeoutMs }),
          both,
        );
      } catch (err) {
        if (signal?.aborted) throw new AbortedError('peer request aborted', { cause: signal.reason });
        this.downUntil = this.config.clock.now() + PEER_DOWN_MS;
        const cause = deadline.signal.aborted ? deadline.signal.reason : err;
        throw new PeerError(`peer ${this.url} unreachable: ${(cause as Error)?.message ?? String(cause)}`, { cause });
      }
      const status = res.statusCode;
      const limit = status === 200 ? maxBytes : MAX_ERROR_BODY;
      let bytes: Uint8Array;
      try {
        bytes = await readCappedBody(res.body, limit, res.headers['content-length']);
      } catch (err) {
        if (signal?.aborted) throw new AbortedError('peer request aborted', { cause: signal.reason });
        const cause = deadline.signal.aborted ? deadline.signal.reason : err;
        throw new PeerError(`peer ${this.url}: ${(cause as Error)?.message ?? String(cause)}`, { cause, status });
      }
      this.downUntil = 0;
      return { status, bytes, headers: res.headers };
    } finally {
      timer.cancel();
      if (trial) this.trials--;
    }
  }
}

/** untilAborted settles as `p` does, or rejects with the signal's reason as soon as `signal` aborts (a late answer's body is dropped). */
function untilAborted<T extends { body: { destroy(): unknown } }>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    p.then(
      (r) => r.body.destroy(),
      () => {},
    );
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (r) => {
        signal.removeEventListener('abort', onAbort);
        if (signal.aborted) r.body.destroy();
        else resolve(r);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

function failure(url: string, status: number, bytes: Uint8Array): PeerError {
  const text = Buffer.from(bytes).toString('utf8').slice(0, 512);
  return new PeerError(`peer ${url} answered ${status}: ${text}`, { status });
}

/**
 * queryEscape is Go's `url.QueryEscape` (every byte of the UTF-8 but A–Z a–z 0–9 - _ . ~ as %XX), with
 * a space as `%20` instead of `+`: Go's groupcache server percent-decodes the path once and does not
 * turn `+` back into a space, and bulwark's server reads both forms.
 */
export function queryEscape(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}
