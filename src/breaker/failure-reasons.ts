/**
 * The last failure reasons a breaker keeps, rendered into its rejection message.
 */

/** How many failure reasons a breaker keeps for its rejection message (go-zero keeps 5). */
export const REASONS_KEPT = 5;
/** A reason longer than this is cut: a huge error message must not make every rejection huge. */
const REASON_MAX_CHARS = 200;

/** FailureReasons keeps the last `REASONS_KEPT` failure descriptions, oldest first. */
export class FailureReasons {
  private readonly ring: string[] = [];
  private at = 0;

  /** add records `err` as the newest reason. */
  add(err: unknown): void {
    const text = describe(err);
    if (this.ring.length < REASONS_KEPT) this.ring.push(text);
    else {
      this.ring[this.at] = text;
      this.at = (this.at + 1) % REASONS_KEPT;
    }
  }

  /** list answers the kept reasons, oldest first. */
  list(): string[] {
    return [...this.ring.slice(this.at), ...this.ring.slice(0, this.at)];
  }

  /** clear forgets every reason. */
  clear(): void {
    this.ring.length = 0;
    this.at = 0;
  }

  /** suffix renders the reasons for an error message ('' when there are none). */
  suffix(): string {
    const l = this.list();
    return l.length === 0 ? '' : `; last failures (oldest first): ${l.join(' | ')}`;
  }
}

function describe(err: unknown): string {
  let text: string;
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    text = `${err.name}${typeof code === 'string' || typeof code === 'number' ? ` [${code}]` : ''}: ${err.message}`;
  } else if (err === undefined) text = 'failure (no error given)';
  else {
    try {
      text = typeof err === 'string' ? err : String(err);
    } catch {
      text = Object.prototype.toString.call(err);
    }
  }
  text = text.replace(/\s+/g, ' ');
  return text.length > REASON_MAX_CHARS ? `${text.slice(0, REASON_MAX_CHARS - 1)}…` : text;
}
