/**
 * Viewers: the server-sent-event streams open on one feed. The frame's event text is made once per
 * tick and written to every stream; a viewer that does not read (its socket's buffer past a bound) is
 * dropped rather than held in memory — its page reconnects and starts from the history.
 */
import type { ServerResponse } from 'node:http';
import type { Feed } from './types.js';

/** A viewer whose unread bytes pass this is dropped: a few frames of a large process. */
const MAX_UNREAD_BYTES = 4 << 20;
/** EventSource's wait before it reconnects, ms (the page also reconnects by itself). */
const RETRY_MS = 1_000;

export class Viewers {
  private readonly open = new Set<ServerResponse>();
  private readonly dispose: () => void;

  constructor(
    private readonly feed: Feed,
    private readonly hello: () => string,
    readonly max: number,
  ) {
    this.dispose = feed.onTick((frame) => this.send(`event: tick\ndata: ${frame}\n\n`));
  }

  get size(): number {
    return this.open.size;
  }

  /** add starts a stream on `res`: the hello, the history and the last frame, then every tick. False when full. */
  add(res: ServerResponse): boolean {
    if (this.open.size >= this.max) return false;
    res.statusCode = 200;
    res.setHeader('content-type', 'text/event-stream; charset=utf-8');
    res.setHeader('cache-control', 'no-store');
    res.setHeader('x-accel-buffering', 'no');
    res.socket?.setTimeout(0);
    res.socket?.setNoDelay(true);
    const latest = this.feed.latest();
    res.write(
      `retry: ${RETRY_MS}\nevent: hello\ndata: ${this.hello()}\n\nevent: history\ndata: ${this.feed.history()}\n\n${latest === undefined ? '' : `event: tick\ndata: ${latest}\n\n`}`,
    );
    this.open.add(res);
    res.on('close', () => this.open.delete(res));
    return true;
  }

  private send(text: string): void {
    for (const res of this.open) {
      if (res.writableLength > MAX_UNREAD_BYTES) {
        this.open.delete(res);
        res.destroy();
        continue;
      }
      res.write(text);
    }
  }

  close(): void {
    this.dispose();
    for (const res of this.open) res.end();
    this.open.clear();
  }
}
