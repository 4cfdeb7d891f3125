/**
 * TextBuffer: the bytes of one family's part of a text exposition, written while a scrape collects.
 *
 * A scrape of a large BreakerGroup writes ~100 000 sample lines. Held as JS strings until joined, they
 * outlive the young generation and the garbage collector spends more time than the formatting (half of
 * a 150 ms scrape); decoding a UTF-8 Buffer of that size costs ~15 ms more. So lines are written into a
 * Buffer as *byte strings* — ASCII, or a value's UTF-8 bytes spelt as latin1 characters (see ByteText) —
 * one byte per character. The buffers are UTF-8 text: the handlers send them as they are, and
 * `metrics()` reads them back as latin1 when nothing was outside ASCII (no decoding), as UTF-8 otherwise.
 * @internal
 */

/** NOT_ASCII matches a string that is not plain ASCII. */
export const NOT_ASCII = /[^\x00-\x7f]/;
const NEEDS_ESCAPE = /[\\\n"]/;

/** The smallest buffer a family starts a scrape with; a family then starts at its last scrape's size. */
const MIN_BYTES = 256;

/**
 * ByteText makes the byte strings of one scrape, and notes whether any of them holds non-ASCII bytes
 * (then the scrape's buffers are read back as UTF-8).
 */
export class ByteText {
  /** utf8 is true once a byte string with non-ASCII bytes was made. */
  utf8 = false;

  /** bytes answers the byte string of any string: ASCII as it is, anything else as its UTF-8 bytes. */
  bytes(s: string): string {
    if (!NOT_ASCII.test(s)) return s;
    this.utf8 = true;
    return Buffer.from(s, 'utf8').toString('latin1');
  }

  /** label answers `v` as a label value of the text format (backslash, newline and double quote escaped), as a byte string. */
  label(v: string | number): string {
    if (typeof v !== 'string') return String(v);
    return this.bytes(NEEDS_ESCAPE.test(v) ? escapeLabel(v) : v);
  }
}

export class TextBuffer {
  private buf: Buffer;
  private len = 0;

  constructor(sizeHint: number) {
    this.buf = Buffer.allocUnsafe(Math.max(MIN_BYTES, sizeHint));
  }

  /** length is the number of bytes written. */
  get length(): number {
    return this.len;
  }

  /** clear empties the buffer, keeping its memory. */
  clear(): void {
    this.len = 0;
  }

  /** write appends a byte string (see the module comment): one byte per character. */
  write(s: string): void {
    if (this.buf.length - this.len < s.length) this.grow(s.length);
    this.len += this.buf.write(s, this.len, 'latin1');
  }

  /** bytes answers what was written, without a final newline (a view of the buffer, not a copy). */
  bytes(): Buffer {
    const end = this.len > 0 && this.buf[this.len - 1] === 0x0a ? this.len - 1 : this.len;
    return this.buf.subarray(0, end);
  }

  private grow(need: number): void {
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.len + need));
    this.buf.copy(next, 0, 0, this.len);
    this.buf = next;
  }
}

/** escapeHelp escapes HELP text (backslash, newline). */
export function escapeHelp(s: string): string {
  return s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

/** escapeLabel escapes a label value (backslash, newline, double quote). */
export function escapeLabel(s: string): string {
  return escapeHelp(s).replace(/"/g, '\\"');
}

/** labelValue escapes a label value for the text format (a JS string, not a byte string). */
export function labelValue(v: string | number): string {
  if (typeof v !== 'string') return String(v);
  return NEEDS_ESCAPE.test(v) ? escapeLabel(v) : v;
}

/** valueText formats a sample value as prom-client does. */
export function valueText(v: number): string {
  return Number.isNaN(v) ? 'Nan' : v === Infinity ? '+Inf' : v === -Infinity ? '-Inf' : String(v);
}
