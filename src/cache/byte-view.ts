/**
 * ByteView is an immutable view of a cached value (GeeCache `ByteView`). The cache keeps each value's
 * bytes in a one-byte ("latin1") string — the densest thing the V8 heap holds, and immutable — and a
 * ByteView reads from it: `bytes()` hands out a fresh copy, so nothing a caller does to it can reach
 * the cache.
 */

/** ByteView is a read-only value from the cache. */
export class ByteView {
  /** The bytes as a binary string (one char per byte). */
  private readonly data: string;

  /** ByteView wraps `data`, a binary string (one char per byte, each < 256). Use `ByteView.from` for bytes or text. */
  constructor(data: string) {
    this.data = data;
  }

  /** from makes a ByteView of `value`'s bytes (copied) or of `value`'s UTF-8 encoding. */
  static from(value: Uint8Array | string): ByteView {
    return new ByteView(toBinary(value));
  }

  /** length is the number of bytes. */
  get length(): number {
    return this.data.length;
  }

  /** at returns the byte at `index` (negative counts from the end), or undefined when out of range. */
  at(index: number): number | undefined {
    const i = index < 0 ? this.data.length + index : index;
    return i >= 0 && i < this.data.length ? this.data.charCodeAt(i) : undefined;
  }

  /** bytes returns a fresh copy of the bytes; changing it changes nothing in the cache. */
  bytes(): Buffer {
    return Buffer.from(this.data, 'latin1');
  }

  /** toString decodes the bytes (UTF-8 by default). */
  toString(encoding: BufferEncoding = 'utf8'): string {
    return encoding === 'latin1' || encoding === 'binary' ? this.data : Buffer.from(this.data, 'latin1').toString(encoding);
  }

  /** equals tells whether `other` holds the same bytes. */
  equals(other: ByteView | Uint8Array | string): boolean {
    return this.data === (other instanceof ByteView ? other.data : toBinary(other));
  }

  /** binary is the bytes as a binary string (one char per byte), the cache's own form; it is immutable. */
  binary(): string {
    return this.data;
  }
}

/** toBinary converts bytes (copied) or text (UTF-8 encoded) to a binary string. */
export function toBinary(value: Uint8Array | string): string {
  if (typeof value === 'string') {
    // Pure ASCII text is already its own UTF-8 and binary form.
    return /^[\x00-\x7f]*$/.test(value) ? value : Buffer.from(value, 'utf8').toString('latin1');
  }
  return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('latin1');
}
