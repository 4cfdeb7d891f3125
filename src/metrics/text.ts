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

/** Strings up to this length are copied by a JS loop; longer ones by Buffer.write. */
const SHORT = 48;

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
    if (v.length <= SHORT) {
      // One pass over a short value (a breaker's or service's name) instead of two expressions.
      let plain = true;
      for (let i = 0; i < v.length; i++) {
        const c = v.charCodeAt(i);
        if (c > 0x7f || c === 0x5c || c === 0x0a || c === 0x22) {
          plain = false;
          break;
        }
      }
      if (plain) return v;
    }
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
    const n = s.length;
    if (this.buf.length - this.len < n) this.grow(n);
    if (n > SHORT) {
      this.len += this.buf.write(s, this.len, 'latin1');
      return;
    }
    // A short string is copied here rather than through a native call, which costs more than the copy.
    const b = this.buf;
    let o = this.len;
    for (let i = 0; i < n; i++) b[o++] = s.charCodeAt(i);
    this.len = o;
  }

  /** copy appends bytes (short ones: a JS loop, cheaper than a native call). */
  copy(bytes: Uint8Array): void {
    const n = bytes.length;
    if (this.buf.length - this.len < n) this.grow(n);
    const b = this.buf;
    let o = this.len;
    for (let i = 0; i < n; i++) b[o++] = bytes[i]!;
    this.len = o;
  }

  /** value appends a sample value as prom-client formats it; integers digit by digit, with no string made. */
  value(v: number): void {
    if (!(v >= 0 && v <= Number.MAX_SAFE_INTEGER && Math.floor(v) === v)) {
      this.write(valueText(v));
      return;
    }
    if (this.buf.length - this.len < 16) this.grow(16);
    const b = this.buf;
    if (v < 10) {
      b[this.len++] = 48 + v;
      return;
    }
    let digits = 1;
    for (let x = v; x >= 10; x = Math.floor(x / 10)) digits++;
    let o = (this.len += digits);
    for (let x = v; x > 0; x = Math.floor(x / 10)) b[--o] = 48 + (x % 10);
  }

  /**
   * line appends `head key tail value` and a newline: one sample line from its parts. Room is made once
   * for the line, and the parts are copied in one loop each (most lines are under a hundred bytes: a
   * native copy per part costs more than the bytes).
   */
  line(head: Uint8Array, key: string, tail: Uint8Array, v: number): void {
    const hn = head.length;
    const kn = key.length;
    const tn = tail.length;
    if (kn > SHORT || !(v >= 0 && v <= Number.MAX_SAFE_INTEGER && Math.floor(v) === v)) {
      this.copy(head);
      this.write(key);
      this.copy(tail);
      this.value(v);
      if (this.len === this.buf.length) this.grow(1);
      this.buf[this.len++] = 0x0a;
      return;
    }
    // An integer of up to 16 digits and the newline.
    if (this.buf.length - this.len < hn + kn + tn + 17) this.grow(hn + kn + tn + 17);
    const b = this.buf;
    let o = this.len;
    for (let i = 0; i < hn; i++) b[o++] = head[i]!;
    for (let i = 0; i < kn; i++) b[o++] = key.charCodeAt(i);
    for (let i = 0; i < tn; i++) b[o++] = tail[i]!;
    if (v < 10) {
      b[o++] = 48 + v;
    } else {
      let digits = 1;
      for (let x = v; x >= 10; x = Math.floor(x / 10)) digits++;
      o += digits;
      let d = o;
      for (let x = v; x > 0; x = Math.floor(x / 10)) b[--d] = 48 + (x % 10);
    }
    b[o++] = 0x0a;
    this.len = o;
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
