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

/**
 * TextBuffer holds one family's text for a scrape. It also records each sample line written by `line`
 * (its parts, its value, where its bytes are), so that the next scrape of the family can copy a line
 * whose parts and value have not changed from this buffer instead of writing it again: given the last
 * scrape's buffer (`clear(from)`), runs of unchanged lines that lie next to each other in it are copied
 * with one native copy per run. Most of a large group's breakers are idle between two scrapes, and their
 * lines are then copied in a few runs rather than formatted byte by byte. A line's bytes are a function
 * of its parts (`head`, `key`, `tail`, never changed once made) and its value, so a copied line is the
 * line that would have been written.
 */
export class TextBuffer {
  /**
   * held counts the scrapes whose answer still refers to this buffer's bytes (a response being sent):
   * the family does not write it again while one does (see Family.begin).
   */
  held = 0;
  private buf: Buffer;
  private len = 0;
  /** The lines recorded by `line` in this scrape, in order: their parts, values and byte ranges. */
  private lines = 0;
  private readonly heads: Uint8Array[] = [];
  private readonly keys: string[] = [];
  private readonly tails: Uint8Array[] = [];
  private values = new Float64Array(0);
  private starts = new Int32Array(0);
  private ends = new Int32Array(0);
  /** The last scrape's buffer of the same family, read only while this one is written. */
  private prev: TextBuffer | undefined;
  /** A run of unchanged lines in `prev.buf` not copied yet: [runFrom, runTo), empty when equal. */
  private runFrom = 0;
  private runTo = 0;

  constructor(sizeHint: number) {
    this.buf = Buffer.allocUnsafe(Math.max(MIN_BYTES, sizeHint));
  }

  /** length is the number of bytes written. */
  get length(): number {
    return this.len + this.runTo - this.runFrom;
  }

  /**
   * clear empties the buffer, keeping its memory; `from` (never this buffer) is the last scrape's buffer
   * of the family, whose unchanged lines are copied rather than written again.
   */
  clear(from?: TextBuffer): void {
    this.len = 0;
    this.lines = 0;
    this.runFrom = this.runTo = 0;
    this.prev = from === this ? undefined : from;
  }

  /** write appends a byte string (see the module comment): one byte per character. */
  write(s: string): void {
    if (this.runTo !== this.runFrom) this.flush();
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
  private copy(bytes: Uint8Array): void {
    const n = bytes.length;
    if (this.buf.length - this.len < n) this.grow(n);
    const b = this.buf;
    let o = this.len;
    for (let i = 0; i < n; i++) b[o++] = bytes[i]!;
    this.len = o;
  }

  /** value appends a sample value as prom-client formats it; integers digit by digit, with no string made. */
  private value(v: number): void {
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
   * line appends `head key tail value` and a newline: one sample line from its parts. A line the last
   * scrape wrote at the same position with the same parts and value is copied from it (in one run with
   * its unchanged neighbours); any other is written.
   */
  line(head: Uint8Array, key: string, tail: Uint8Array, v: number): void {
    const i = this.lines++;
    if (i === this.values.length) this.growLines();
    this.heads[i] = head;
    this.keys[i] = key;
    this.tails[i] = tail;
    this.values[i] = v;
    const p = this.prev;
    if (p !== undefined && i < p.lines && p.values[i] === v && p.keys[i] === key && p.tails[i] === tail && p.heads[i] === head) {
      const from = p.starts[i]!;
      const to = p.ends[i]!;
      if (from !== this.runTo || this.runFrom === this.runTo) {
        if (this.runTo !== this.runFrom) this.flush();
        this.runFrom = this.runTo = from;
      }
      const at = this.len + this.runTo - this.runFrom;
      this.runTo = to;
      this.starts[i] = at;
      this.ends[i] = at + to - from;
      return;
    }
    if (this.runTo !== this.runFrom) this.flush();
    this.starts[i] = this.len;
    this.writeLine(head, key, tail, v);
    this.ends[i] = this.len;
  }

  /**
   * writeLine writes one sample line: room is made once for the line, and the parts are copied in one
   * loop each (most lines are under a hundred bytes: a native copy per part costs more than the bytes).
   */
  private writeLine(head: Uint8Array, key: string, tail: Uint8Array, v: number): void {
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
    if (this.runTo !== this.runFrom) this.flush();
    // Hold no parts of lines this scrape no longer wrote (a breaker evicted since).
    if (this.keys.length > this.lines) this.heads.length = this.keys.length = this.tails.length = this.lines;
    const end = this.len > 0 && this.buf[this.len - 1] === 0x0a ? this.len - 1 : this.len;
    return this.buf.subarray(0, end);
  }

  /** flush copies the pending run of unchanged lines from the last scrape's buffer. */
  private flush(): void {
    const n = this.runTo - this.runFrom;
    if (this.buf.length - this.len < n) this.grow(n);
    this.len += this.prev!.buf.copy(this.buf, this.len, this.runFrom, this.runTo);
    this.runFrom = this.runTo = 0;
  }

  private grow(need: number): void {
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.len + need));
    this.buf.copy(next, 0, 0, this.len);
    this.buf = next;
  }

  /** growLines doubles the room for recorded lines. */
  private growLines(): void {
    const n = Math.max(64, this.values.length * 2);
    const values = new Float64Array(n);
    values.set(this.values);
    this.values = values;
    const starts = new Int32Array(n);
    starts.set(this.starts);
    this.starts = starts;
    const ends = new Int32Array(n);
    ends.set(this.ends);
    this.ends = ends;
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
