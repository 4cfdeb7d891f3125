/**
 * readCappedBody reads an HTTP response body of at most a given number of bytes, the one way the
 * cache's peer client, the client's `fetch` and `bulwark serve`'s origin read an answer they did not
 * size themselves: a `content-length` above the cap is refused before a byte is read, and a body that
 * runs past the cap is destroyed as soon as it does (a peer or origin cannot make us buffer more).
 *
 * Internal: not exported from the package. Each caller turns `BodyTooLargeError` into its own coded
 * error (`PeerError`, `InvalidResponseError`, `LoadError`) with its own words for the cap.
 */

/** CappedBody is what the readers hand over: undici's `res.body`, or any async iterable of bytes that can be destroyed. */
export type CappedBody = AsyncIterable<Uint8Array> & { destroy?: (err?: Error) => unknown };

/** BodyTooLargeError says a body was refused for its size: `declared` is the content-length when that told. */
export class BodyTooLargeError extends Error {
  constructor(
    readonly limit: number,
    readonly declared: number | undefined,
  ) {
    super(declared === undefined ? `answer exceeds ${limit} bytes` : `answer of ${declared} bytes exceeds ${limit}`);
    this.name = 'BodyTooLargeError';
  }
}

/**
 * readCappedBody answers the bytes of `body`, at most `limit` of them; rejects `BodyTooLargeError` (the
 * body destroyed) past it, or what reading the body rejects.
 */
export async function readCappedBody(body: CappedBody, limit: number, contentLength: string | string[] | undefined): Promise<Uint8Array> {
  const declared = typeof contentLength === 'string' ? Number(contentLength) : NaN;
  if (declared > limit) {
    body.destroy?.();
    throw new BodyTooLargeError(limit, declared);
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of body) {
    total += chunk.byteLength;
    if (total > limit) {
      body.destroy?.();
      throw new BodyTooLargeError(limit, undefined);
    }
    chunks.push(chunk);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
}
